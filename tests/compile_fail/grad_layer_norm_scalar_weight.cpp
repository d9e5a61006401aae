// layer_norm on a var given numbers for its weight and bias: one error, as
// on tensors.
// EXPECT: dimsum: layer_norm's weight and bias are tensors \(or vars\) over dims of x
// EXPECT: layer_norm_weight_and_bias_are_tensors<float, float>
#include "common.hpp"
#include <dimsum/grad/grad.hpp>

int main() {
  dimsum::parameter<float, d_model> w(dimsum::tensor<float, d_model>::ones()), b(dimsum::tensor<float, d_model>{});
  dimsum::grad::tape t;
  auto x = t.watch(x_t(batch{2}, posn{3}));
#ifdef DIMSUM_SHOULD_FAIL
  auto y = dimsum::layer_norm<d_model>(x, 1.0f, 0.0f);
  (void)w; (void)b;
#else
  auto y = dimsum::layer_norm<d_model>(x, t.watch(w), t.watch(b));
#endif
  (void)y;
}
