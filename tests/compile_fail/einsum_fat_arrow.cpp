// '=>' for '->': reported as a bad character at its own position (42, in
// the second term), not as a missing arrow at the end of the string.
// EXPECT: dimsum: einsum string has a character that is not part of a label
// EXPECT: einsum_string_has_an_invalid_character<dimsum::position_c<42>, dimsum::count_c<1>, dimsum::character<'='> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
  w_t w;
#ifdef DIMSUM_SHOULD_FAIL
  auto q = dimsum::einsum<"batch posn d_model, nheads d_model d_head => batch posn nheads d_head">(x, w);
#else
  auto q = dimsum::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w);
#endif
  (void)q;
}
