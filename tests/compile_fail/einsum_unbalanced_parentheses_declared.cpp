// As einsum_unbalanced_parentheses.cpp, with the result assigned to a declared tensor type, as
// users write it (`x_t q = ...`): still exactly one error.
// An einsum string with an unclosed group.
// EXPECT: dimsum: einsum string has an unbalanced or nested parenthesis
// EXPECT: einsum_string_has_unbalanced_parentheses
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  x_t r = dimsum::rearrange<"batch posn (d_model -> batch posn d_model">(x);
#else
  x_t r = dimsum::rearrange<"batch posn d_model -> batch posn d_model">(x);
#endif
  (void)r;
}
