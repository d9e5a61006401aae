// Assigning an expression to a tensor of other dims.
// EXPECT: dimsum: assigning an expression to a tensor needs the same dims
// EXPECT: assignment_between_different_dims<dimsum::dims<batch, posn, d_model>, dimsum::dims<batch, posn, nheads, d_head> ?>
#include "common.hpp"

int main() {
  qkv_t q(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  x_t y = q * 2.0f;
#else
  qkv_t y = q * 2.0f;
#endif
  (void)y;
}
