// einsum without operands.
// EXPECT: dimsum: einsum needs at least one operand
// EXPECT: einsum_needs_at_least_one_operand<dimsum::dims<batch> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::einsum<batch>();
#else
  auto r = dimsum::einsum<batch>(x);
#endif
  (void)r;
}
