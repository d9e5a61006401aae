// map over operands that share no dim: the element-wise rule applies to a
// user's function as to the built-in operations.
// EXPECT: dimsum: element-wise operation between tensors that share no dim
// EXPECT: elementwise_operands_share_no_dim<dimsum::dims<batch, posn, d_model>, dimsum::dims<nheads, d_head> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
  dimsum::tensor<float, nheads, d_head> b;
  dimsum::tensor<float, d_model> b_O;
  auto f = [](float u, float v) { return u * v + 1.0f; };
#ifdef DIMSUM_SHOULD_FAIL
  auto y = dimsum::map(f, x, b);
#else
  auto y = dimsum::map(f, x, b_O); (void)b;
#endif
  (void)y;
}
