// causal_mask over dims the tensor lacks.
// EXPECT: dimsum: causal_mask over a dim that the tensor does not have
// EXPECT: causal_mask_dim_is_not_a_dim_of_the_tensor<posn, dimsum::dims<batch, nheads, q_posn, k_posn> ?>
#include "common.hpp"

int main() {
  scores_t s(batch{2}, q_posn{3}, k_posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto m = dimsum::causal_mask<posn, k_posn>(s, -1e9f);
#else
  auto m = dimsum::causal_mask<q_posn, k_posn>(s, -1e9f);
#endif
  (void)m;
}
