// An einsum string with two input terms given three operands.
// EXPECT: dimsum: einsum string has a different number of input terms than einsum has operands
// EXPECT: einsum_term_count_does_not_match_operand_count<dimsum::count_c<2>, dimsum::count_c<3> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
  w_t w;
#ifdef DIMSUM_SHOULD_FAIL
  auto q = dimsum::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w, w);
#else
  auto q = dimsum::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w);
#endif
  (void)q;
}
