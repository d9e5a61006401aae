// A '1' in an input term at a dim whose static extent is not 1.
// EXPECT: dimsum: a '1' or '\(\)' in a pattern stands for a dim of extent 1
// EXPECT: pattern_size_1_axis_stands_for_a_dim_of_another_extent<d_model, dimsum::extent_c<30> ?, dimsum::operand<0> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::rearrange<"batch posn 1 -> batch posn">(x);
#else
  auto r = dimsum::rearrange<"batch posn d_model -> batch posn 1 d_model">(x);
#endif
  (void)r;
}
