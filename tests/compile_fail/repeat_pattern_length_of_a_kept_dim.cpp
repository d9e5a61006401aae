// repeat<"..."> given an extent for a dim the tensor keeps, inside an output group.
// EXPECT: dimsum: repeat adds a dim that the tensor already has
// EXPECT: repeat_adds_a_dim_the_tensor_already_has<posn, dimsum::dims<batch, posn, d_model> ?>
// EXPECT-CLANG: repeat_pattern_length_of_a_kept_dim\.cpp:[0-9]+:[0-9]+: note
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
  DIMSUM_DIM(r);
#ifdef DIMSUM_SHOULD_FAIL
  auto t = dimsum::repeat<"batch posn d_model -> batch pp(posn r) d_model">(x, posn{3}, r{2});
#else
  auto t = dimsum::repeat<"batch posn d_model -> batch pp(posn r) d_model">(x, r{2});
#endif
  (void)t;
}
