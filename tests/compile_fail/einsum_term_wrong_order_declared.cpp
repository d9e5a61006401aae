// As einsum_term_wrong_order.cpp, with the result assigned to a declared tensor type, as
// users write it (`qkv_t q = ...`): still exactly one error.
// A term that lists its operand's dims in the wrong order.
// EXPECT: dimsum: einsum term lists its operand's dims in a different order
// EXPECT: einsum_term_lists_dims_in_a_different_order_than_its_operand
// EXPECT: dims<batch, posn, d_model>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
  w_t w;
#ifdef DIMSUM_SHOULD_FAIL
  qkv_t q = dimsum::einsum<"posn batch d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w);
#else
  qkv_t q = dimsum::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w);
#endif
  (void)q;
}
