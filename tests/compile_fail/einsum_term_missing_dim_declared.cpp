// As einsum_term_missing_dim.cpp, with the result assigned to a declared tensor type, as
// users write it (`qkv_t q = ...`): still exactly one error.
// A term that leaves out one of its operand's dims.
// EXPECT: dimsum: einsum term does not list every dim of its operand
// EXPECT: einsum_term_does_not_list_every_dim_of_its_operand<d_model
// EXPECT: dims<batch, posn, d_model>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
  w_t w;
#ifdef DIMSUM_SHOULD_FAIL
  qkv_t q = dimsum::einsum<"batch posn, nheads d_model d_head -> batch posn nheads d_head">(x, w);
#else
  qkv_t q = dimsum::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w);
#endif
  (void)q;
}
