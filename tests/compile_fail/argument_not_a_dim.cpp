// Constructing a tensor with the extent of a dim it does not have.
// EXPECT: dimsum: argument names a dim that the tensor does not have
// EXPECT: argument_is_not_a_dim_of_the_tensor<nheads, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"

int main() {
#ifdef DIMSUM_SHOULD_FAIL
  x_t x(batch{2}, posn{3}, nheads{2});
#else
  x_t x(batch{2}, posn{3});
#endif
  (void)x;
}
