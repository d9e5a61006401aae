// einsum operands of different value types.
// EXPECT: dimsum: einsum operands must share a value type
// EXPECT: einsum_operands_have_different_value_types<float, double>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
  dimsum::tensor<double, nheads, d_model, d_head> wd;
  w_t w;
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, wd);
#else
  auto r = dimsum::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w); (void)wd;
#endif
  (void)r;
}
