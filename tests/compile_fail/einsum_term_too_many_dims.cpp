// A term that lists more dims than its operand has.
// EXPECT: dimsum: einsum term lists more dims than its operand has
// EXPECT: einsum_term_lists_more_dims_than_its_operand_has<dimsum::operand<1>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
  dimsum::tensor<float, nheads, d_model> w;
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::einsum<"batch posn d_model, nheads d_model (a b) -> batch posn nheads">(x, w);
#else
  auto r = dimsum::einsum<"batch posn d_model, nheads d_model -> batch posn nheads">(x, w);
#endif
  (void)r;
}
