// rename of a dim the tensor lacks.
// EXPECT: dimsum: rename of a dim that the tensor does not have
// EXPECT: rename_source_is_not_a_dim_of_the_tensor<q_posn, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::rename<q_posn, k_posn>(x);
#else
  auto r = dimsum::rename<posn, k_posn>(x);
#endif
  (void)r;
}
