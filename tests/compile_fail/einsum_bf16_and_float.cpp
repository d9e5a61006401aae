// einsum of a bf16 operand and a float operand without a stated result type.
// EXPECT: dimsum: einsum operands must share a value type; state the result type
// EXPECT: einsum_operands_have_different_value_types<dimsum::bf16, float>
#include "common.hpp"

int main() {
  dimsum::tensor<dimsum::bf16, batch, posn, d_model> x(batch{2}, posn{3});
  w_t w;
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w);
#else
  auto r = dimsum::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head", float>(x, w);
#endif
  (void)r;
}
