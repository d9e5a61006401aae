// rename to a name the tensor already has.
// EXPECT: dimsum: rename to a name that the tensor already has
// EXPECT: rename_target_is_already_a_dim_of_the_tensor<batch, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::rename<posn, batch>(x);
#else
  auto r = dimsum::rename<posn, k_posn>(x);
#endif
  (void)r;
}
