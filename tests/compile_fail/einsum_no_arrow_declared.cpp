// As einsum_no_arrow.cpp, with the result assigned to a declared tensor type, as
// users write it (`qkv_t q = ...`): still exactly one error.
// An einsum string without '->'.
// EXPECT: dimsum: einsum string has no '->'
// EXPECT: einsum_string_has_no_arrow
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
  w_t w;
#ifdef DIMSUM_SHOULD_FAIL
  qkv_t q = dimsum::einsum<"batch posn d_model, nheads d_model d_head">(x, w);
#else
  qkv_t q = dimsum::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w);
#endif
  (void)q;
}
