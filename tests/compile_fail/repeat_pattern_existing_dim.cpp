// repeat<"..."> given an extent for a dim the tensor already has: repeating an existing axis.
// EXPECT: dimsum: repeat adds a dim that the tensor already has
// EXPECT: repeat_adds_a_dim_the_tensor_already_has<posn, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::repeat<"batch posn d_model -> batch q_posn posn d_model">(x, q_posn{2}, posn{4});
#else
  auto r = dimsum::repeat<"batch posn d_model -> batch q_posn posn d_model">(x, q_posn{2});
#endif
  (void)r;
}
