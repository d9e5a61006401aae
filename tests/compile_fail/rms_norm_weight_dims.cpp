// rms_norm whose weight has a dim the input lacks (the result would grow it).
// EXPECT: dimsum: rms_norm's weight
// EXPECT: rms_norm_weight_has_a_dim_the_input_lacks<dimsum::dims<nheads, d_model>, dimsum::dims<batch, posn, d_model>
#include "common.hpp"
#include <dimsum/ops/rms_norm.hpp>

int main() {
  x_t x(batch{1}, posn{2});
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<float, nheads, d_model> w;
#else
  dimsum::tensor<float, d_model> w;
#endif
  auto y = dimsum::rms_norm<d_model>(x, w);
  (void)y;
}
