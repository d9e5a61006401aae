// As einsum_value_types_differ.cpp, with the result assigned to a declared tensor type, as
// users write it (`qkv_t q = ...`): still exactly one error.
// einsum operands of different value types.
// EXPECT: dimsum: einsum operands must share a value type
// EXPECT: einsum_operands_have_different_value_types<float, double>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
  dimsum::tensor<double, nheads, d_model, d_head> wd;
  w_t w;
#ifdef DIMSUM_SHOULD_FAIL
  qkv_t r = dimsum::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, wd);
#else
  qkv_t r = dimsum::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w); (void)wd;
#endif
  (void)r;
}
