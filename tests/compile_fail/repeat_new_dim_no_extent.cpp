// A repeat pattern adds a dim whose extent is not given: the output label
// is absent from the input and from the dims passed after it.
// EXPECT: dimsum: repeat adds a dim whose extent is not given
// EXPECT: repeat_new_dim_has_no_extent<dimsum::label<(dimsum::)?fixed_string<[0-9]+>{"q_posn"}> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::repeat<"batch posn d_model -> batch q_posn posn d_model">(x);
#else
  auto r = dimsum::repeat<"batch posn d_model -> batch q_posn posn d_model">(x, q_posn{2});
#endif
  (void)r;
}
