// minimum of two tensors that share no dim (maximum, pow and clamp alike).
// EXPECT: dimsum: element-wise operation between tensors that share no dim
// EXPECT: elementwise_operands_share_no_dim<dimsum::dims<batch, posn, d_model>, dimsum::dims<nheads, d_head> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
  dimsum::tensor<float, nheads, d_head> b;
  dimsum::tensor<float, d_model> b_O;
#ifdef DIMSUM_SHOULD_FAIL
  auto y = dimsum::minimum(x, b);
#else
  auto y = dimsum::minimum(x, b_O); (void)b;
#endif
  (void)y;
}
