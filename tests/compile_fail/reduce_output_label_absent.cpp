// A reduce output label absent from the input (reduce cannot add a dim).
// EXPECT: dimsum: einsum output names a dim that no operand has
// EXPECT: einsum_output_label_is_not_in_any_operand<dimsum::label<(dimsum::)?fixed_string<[0-9]+>{"k_posn"}>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::reduce<"batch posn d_model -> batch k_posn", "max">(x);
#else
  auto r = dimsum::reduce<"batch posn d_model -> batch posn", "max">(x);
#endif
  (void)r;
}
