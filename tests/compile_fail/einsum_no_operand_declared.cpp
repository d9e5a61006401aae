// As einsum_no_operand.cpp, with the result assigned to a declared tensor type, as
// users write it (`dimsum::tensor<float, batch> q = ...`): still exactly one error.
// einsum without operands.
// EXPECT: dimsum: einsum needs at least one operand
// EXPECT: einsum_needs_at_least_one_operand<dimsum::dims<batch> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<float, batch> r = dimsum::einsum<batch>();
#else
  dimsum::tensor<float, batch> r = dimsum::einsum<batch>(x);
#endif
  (void)r;
}
