// An einsum string without '->'.
// EXPECT: dimsum: einsum string has no '->'
// EXPECT: einsum_string_has_no_arrow
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
  w_t w;
#ifdef DIMSUM_SHOULD_FAIL
  auto q = dimsum::einsum<"batch posn d_model, nheads d_model d_head">(x, w);
#else
  auto q = dimsum::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w);
#endif
  (void)q;
}
