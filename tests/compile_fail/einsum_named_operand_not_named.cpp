// The named einsum given a scalar operand (scale the result instead).
// EXPECT: dimsum: einsum operand is not a dimsum tensor or expression
// EXPECT: einsum_operand_is_not_a_named_tensor<dimsum::operand<1>, float ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::einsum<batch, posn>(x, 2.0f);
#else
  auto r = dimsum::einsum<batch, posn>(x * 2.0f);
#endif
  (void)r;
}
