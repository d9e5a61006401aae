// rms_norm over a dim the tensor does not have.
// EXPECT: dimsum: rms_norm over a dim that the tensor does not have
// EXPECT: rms_norm_dim_is_not_a_dim_of_the_tensor<d_head, dimsum::dims<batch, posn, d_model>
#include "common.hpp"
#include <dimsum/ops/rms_norm.hpp>

int main() {
  x_t x(batch{1}, posn{2});
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<float, d_head> w;
  auto y = dimsum::rms_norm<d_head>(x, w);
#else
  dimsum::tensor<float, d_model> w;
  auto y = dimsum::rms_norm<d_model>(x, w);
#endif
  (void)y;
}
