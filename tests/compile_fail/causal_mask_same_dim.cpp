// causal_mask with the same dim as query and key.
// EXPECT: dimsum: causal_mask needs two different dims
// EXPECT: causal_mask_query_and_key_are_the_same_dim<k_posn>
#include "common.hpp"

int main() {
  scores_t s(batch{2}, q_posn{3}, k_posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto m = dimsum::causal_mask<k_posn, k_posn>(s, -1e9f);
#else
  auto m = dimsum::causal_mask<q_posn, k_posn>(s, -1e9f);
#endif
  (void)m;
}
