// window_mask over a key dim the scores do not have (posn instead of k_posn).
// EXPECT: dimsum: window_mask over a dim that the tensor does not have
// EXPECT: window_mask_dim_is_not_a_dim_of_the_tensor<posn ?,
#include "common.hpp"

int main() {
  scores_t s(batch{2}, q_posn{3}, k_posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto m = dimsum::window_mask<q_posn, posn>(s, 2, -1e9f);
#else
  auto m = dimsum::window_mask<q_posn, k_posn>(s, 2, -1e9f);
#endif
  (void)m;
}
