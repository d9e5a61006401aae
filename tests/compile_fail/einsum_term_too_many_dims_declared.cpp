// As einsum_term_too_many_dims.cpp, with the result assigned to a declared tensor type, as
// users write it (`dimsum::tensor<float, batch, posn, nheads> q = ...`): still exactly one error.
// A term that lists more dims than its operand has.
// EXPECT: dimsum: einsum term lists more dims than its operand has
// EXPECT: einsum_term_lists_more_dims_than_its_operand_has<dimsum::operand<1>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
  dimsum::tensor<float, nheads, d_model> w;
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<float, batch, posn, nheads> r = dimsum::einsum<"batch posn d_model, nheads d_model (a b) -> batch posn nheads">(x, w);
#else
  dimsum::tensor<float, batch, posn, nheads> r = dimsum::einsum<"batch posn d_model, nheads d_model -> batch posn nheads">(x, w);
#endif
  (void)r;
}
