// An einsum string with an unclosed group.
// EXPECT: dimsum: einsum string has an unbalanced or nested parenthesis
// EXPECT: einsum_string_has_unbalanced_parentheses
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::rearrange<"batch posn (d_model -> batch posn d_model">(x);
#else
  auto r = dimsum::rearrange<"batch posn d_model -> batch posn d_model">(x);
#endif
  (void)r;
}
