// As einsum_operand_count.cpp, with the result assigned to a declared tensor type, as
// users write it (`qkv_t q = ...`): still exactly one error.
// An einsum string with two input terms given three operands.
// EXPECT: dimsum: einsum string has a different number of input terms than einsum has operands
// EXPECT: einsum_term_count_does_not_match_operand_count<dimsum::count_c<2>, dimsum::count_c<3> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
  w_t w;
#ifdef DIMSUM_SHOULD_FAIL
  qkv_t q = dimsum::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w, w);
#else
  qkv_t q = dimsum::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w);
#endif
  (void)q;
}
