// An einsum string with two arrows.
// EXPECT: dimsum: einsum string has more than one '->'
// EXPECT: einsum_string_has_more_than_one_arrow
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
  w_t w;
#ifdef DIMSUM_SHOULD_FAIL
  auto q = dimsum::einsum<"batch posn d_model -> nheads d_model d_head -> batch posn nheads d_head">(x, w);
#else
  auto q = dimsum::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w);
#endif
  (void)q;
}
