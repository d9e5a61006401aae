// diagonal of a dim with itself (a tensor cannot hold two dims of one name).
// EXPECT: dimsum: diagonal/trace needs two different dims
// EXPECT: diagonal_pairs_a_dim_with_itself<q_posn ?>
#include "common.hpp"

int main() {
  scores_t s(batch{2}, q_posn{3}, k_posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto d = dimsum::trace<q_posn, q_posn>(s);
#else
  auto d = dimsum::trace<q_posn, k_posn>(s);
#endif
  (void)d;
}
