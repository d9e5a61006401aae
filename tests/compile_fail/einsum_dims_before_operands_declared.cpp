// As einsum_dims_before_operands.cpp, with the result assigned to a declared tensor type, as
// users write it (`x_t q = ...`): still exactly one error.
// A dim passed before an operand.
// EXPECT: dimsum: einsum takes its operands first, then any dims
// EXPECT: einsum_dims_must_follow_the_operands
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  x_t r = dimsum::rearrange<"batch posn d_model -> batch posn d_model">(nheads{2}, x);
#else
  x_t r = dimsum::rearrange<"batch posn d_model -> batch posn d_model">(x);
#endif
  (void)r;
}
