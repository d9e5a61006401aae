// As einsum_empty_term.cpp, with the result assigned to a declared tensor type, as
// users write it (`qkv_t q = ...`): still exactly one error.
// An einsum string with an empty input term.
// EXPECT: dimsum: einsum string has an empty input term
// EXPECT: einsum_string_has_an_empty_input_term
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
  w_t w;
#ifdef DIMSUM_SHOULD_FAIL
  qkv_t q = dimsum::einsum<"batch posn d_model,, nheads d_model d_head -> batch posn nheads d_head">(x, w);
#else
  qkv_t q = dimsum::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w);
#endif
  (void)q;
}
