// window_mask with the query dim given as the key dim too.
// EXPECT: dimsum: window_mask needs two different dims: the query position and the key position
// EXPECT: window_mask_query_and_key_are_the_same_dim<q_posn ?>
#include "common.hpp"

int main() {
  scores_t s(batch{2}, q_posn{3}, k_posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto m = dimsum::window_mask<q_posn, q_posn>(s, 2, -1e9f);
#else
  auto m = dimsum::window_mask<q_posn, k_posn>(s, 2, -1e9f);
#endif
  (void)m;
}
