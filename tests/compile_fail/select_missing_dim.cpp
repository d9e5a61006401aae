// select along a dim the tensor does not have (PyTorch's `x[0]` on the wrong
// axis). One error on clang too: the check is a pure condition and the
// report is made in the failing branch.
// EXPECT: dimsum: argument names a dim that the tensor does not have
// EXPECT: argument_is_not_a_dim_of_the_tensor<k_posn, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::select<k_posn>(x, 0);
#else
  auto r = dimsum::select<posn>(x, 0);
#endif
  (void)r;
}
