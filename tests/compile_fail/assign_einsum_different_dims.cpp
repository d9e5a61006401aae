// An einsum result assigned to a declared tensor with other dims (d_head
// left out of the declared type).
// EXPECT: dimsum: assigning an expression to a tensor needs the same dims
// EXPECT: assignment_between_different_dims<dimsum::dims<batch, posn, nheads>, dimsum::dims<batch, posn, nheads, d_head> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
  w_t w;
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<float, batch, posn, nheads> q =
      dimsum::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w);
#else
  qkv_t q = dimsum::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w);
#endif
  (void)q;
}
