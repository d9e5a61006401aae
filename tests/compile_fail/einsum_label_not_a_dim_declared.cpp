// As einsum_label_not_a_dim.cpp, with the result assigned to a declared tensor type, as
// users write it (`qkv_t q = ...`): still exactly one error.
// An einsum label that is not a dim of its operand (posx for posn).
// EXPECT: dimsum: einsum label is not a dim of its operand
// EXPECT: einsum_label_is_not_a_dim_of_its_operand
// EXPECT: label<(dimsum::)?fixed_string<5>{"posx"}>
// EXPECT: fix::rename<posn, dimsum::label<(dimsum::)?fixed_string<5>{"posx"}> ?> ?\(dimsum::operand<0>\)
// EXPECT: dims<batch, posn, d_model>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
  w_t w;
#ifdef DIMSUM_SHOULD_FAIL
  qkv_t q = dimsum::einsum<"batch posx d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w);
#else
  qkv_t q = dimsum::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w);
#endif
  (void)q;
}
