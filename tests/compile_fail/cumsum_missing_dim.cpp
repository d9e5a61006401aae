// cumsum along a dim the tensor lacks.
// EXPECT: dimsum: argument names a dim that the tensor does not have
// EXPECT: argument_is_not_a_dim_of_the_tensor<k_posn, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto s = dimsum::cumsum<k_posn>(x);
#else
  auto s = dimsum::cumsum<posn>(x);
#endif
  (void)s;
}
