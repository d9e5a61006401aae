// An einsum string with an empty group.
// EXPECT: dimsum: einsum string has an empty group
// EXPECT: einsum_string_has_an_empty_group
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::rearrange<"batch posn () -> batch posn">(x);
#else
  auto r = dimsum::rearrange<"batch posn d_model -> batch posn d_model">(x);
#endif
  (void)r;
}
