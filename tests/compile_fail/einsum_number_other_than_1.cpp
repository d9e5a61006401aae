// A number other than 1 in a pattern (einops' anonymous axis of length 3).
// EXPECT: dimsum: einsum string has a number other than 1
// EXPECT: einsum_string_has_a_number_other_than_1<dimsum::position_c<22>, dimsum::count_c<1> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::repeat<"batch posn d_model -> 3 batch posn d_model">(x);
#else
  auto r = dimsum::repeat<"batch posn d_model -> q_posn batch posn d_model">(x, q_posn{3});
#endif
  (void)r;
}
