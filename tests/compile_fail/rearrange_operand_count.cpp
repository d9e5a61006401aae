// rearrange given two tensors (it takes one, then any group extents as dims).
// EXPECT: dimsum: einsum string has a different number of input terms than einsum has operands
// EXPECT: einsum_term_count_does_not_match_operand_count<dimsum::count_c<1>, dimsum::count_c<2> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::rearrange<"batch posn d_model -> posn batch d_model">(x, x);
#else
  auto r = dimsum::rearrange<"batch posn d_model -> posn batch d_model">(x);
#endif
  (void)r;
}
