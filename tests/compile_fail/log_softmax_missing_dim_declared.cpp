// As log_softmax_missing_dim.cpp, with the result assigned to a declared type, as users
// write it (`x_t y = ...`): still exactly one error.
// log_softmax of a tensor over a dim that the tensor does not have.
// EXPECT: dimsum: log_softmax over a dim that the tensor does not have
// EXPECT: log_softmax_dim_is_not_a_dim_of_the_tensor<k_posn, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  x_t y = dimsum::log_softmax<k_posn>(x);
#else
  x_t y = dimsum::log_softmax<d_model>(x);
#endif
  (void)y;
}
