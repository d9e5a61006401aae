// slice along a dim the tensor does not have, on a lazy expression (which
// slice evaluates first): exactly one error.
// EXPECT: dimsum: argument names a dim that the tensor does not have
// EXPECT: argument_is_not_a_dim_of_the_tensor<q_posn, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::slice<q_posn>(x * 2.0f, 0, 2);
#else
  auto r = dimsum::slice<posn>(x * 2.0f, 0, 2);
#endif
  (void)r;
}
