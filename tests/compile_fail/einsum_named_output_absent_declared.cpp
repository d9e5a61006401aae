// As einsum_named_output_absent.cpp, with the result assigned to a declared tensor type, as
// users write it (`qkv_t q = ...`): still exactly one error.
// The named spelling with an output dim that no operand has.
// EXPECT: dimsum: einsum output names a dim that no operand has
// EXPECT: einsum_output_label_is_not_in_any_operand<k_posn>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
  w_t w;
#ifdef DIMSUM_SHOULD_FAIL
  qkv_t q = dimsum::einsum<batch, k_posn, nheads, d_head>(x, w);
#else
  qkv_t q = dimsum::einsum<batch, posn, nheads, d_head>(x, w);
#endif
  (void)q;
}
