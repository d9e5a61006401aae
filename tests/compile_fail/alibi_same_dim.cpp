// alibi with one dim for queries and keys, its result added to the scores:
// one error, from alibi; the sum adds none.
// EXPECT: dimsum: relative_positions needs two different dims
// EXPECT: relative_positions_query_and_key_are_the_same_dim<posn ?>
#include "common.hpp"

int main() {
  scores_t s(batch{1}, q_posn{4}, k_posn{4});
#ifdef DIMSUM_SHOULD_FAIL
  auto b = s + dimsum::alibi<float>(nheads{2}, posn{4}, posn{4});
#else
  auto b = s + dimsum::alibi<float>(nheads{2}, q_posn{4}, k_posn{4});
#endif
  (void)b;
}
