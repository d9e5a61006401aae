// layer_norm given numbers for its weight and bias (as if it had PyTorch's
// elementwise_affine=False), result assigned to a declared type: one error.
// EXPECT: dimsum: layer_norm's weight and bias are tensors \(or vars\) over dims of x
// EXPECT: layer_norm_weight_and_bias_are_tensors<float, float>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
  auto w = dimsum::tensor<float, d_model>::ones();
  dimsum::tensor<float, d_model> b;
#ifdef DIMSUM_SHOULD_FAIL
  x_t y = dimsum::layer_norm<d_model>(x, 1.0f, 0.0f);
#else
  x_t y = dimsum::layer_norm<d_model>(x, w, b);
#endif
  (void)y;
}
