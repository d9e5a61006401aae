// A static dim passed after the operand with another extent than the operand's dim of that name.
// EXPECT: dimsum: a dim passed after the operands has another static extent than the operand's dim of that name
// EXPECT: pattern_length_differs_from_the_operands_dim<dimsum::label<(dimsum::)?fixed_string<[0-9]+>{"d_model"}>, dimsum::extent_c<20>, dimsum::extent_c<30>, dimsum::operand<0> ?>
// EXPECT-CLANG: pattern_length_differs_from_operand\.cpp:[0-9]+:[0-9]+: note
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::rearrange<"batch posn d_model -> batch pd(posn d_model)">(x, dimsum::dim<"d_model", 20>{});
#else
  auto r = dimsum::rearrange<"batch posn d_model -> batch pd(posn d_model)">(x, d_model{});
#endif
  (void)r;
}
