// As einsum_unused_extra_dim.cpp, with the result assigned to a declared tensor type, as
// users write it (`qkv_t q = ...`): still exactly one error.
// A dim passed after the operands that no group uses.
// EXPECT: dimsum: a dim passed after the operands names no label of a group
// EXPECT: einsum_extra_dim_is_not_a_group_label<k_posn>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
  w_t w;
#ifdef DIMSUM_SHOULD_FAIL
  qkv_t r = dimsum::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w, k_posn{4});
#else
  qkv_t r = dimsum::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w);
#endif
  (void)r;
}
