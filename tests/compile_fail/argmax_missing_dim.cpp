// argmax over a dim the tensor lacks.
// EXPECT: dimsum: reduction over a dim that the tensor does not have
// EXPECT: reduction_dim_is_not_a_dim_of_the_tensor<nheads, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto ids = dimsum::argmax<nheads>(x);
#else
  auto ids = dimsum::argmax<d_model>(x);
#endif
  (void)ids;
}
