// A dim passed before an operand.
// EXPECT: dimsum: einsum takes its operands first, then any dims
// EXPECT: einsum_dims_must_follow_the_operands
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::rearrange<"batch posn d_model -> batch posn d_model">(nheads{2}, x);
#else
  auto r = dimsum::rearrange<"batch posn d_model -> batch posn d_model">(x);
#endif
  (void)r;
}
