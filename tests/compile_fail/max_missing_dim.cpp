// max over a dim the tensor lacks.
// EXPECT: dimsum: reduction over a dim that the tensor does not have
// EXPECT: reduction_dim_is_not_a_dim_of_the_tensor<k_posn, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::max<k_posn>(x);
#else
  auto r = dimsum::max<d_model>(x);
#endif
  (void)r;
}
