// relative_positions with one dim for queries and keys.
// EXPECT: dimsum: relative_positions needs two different dims
// EXPECT: relative_positions_query_and_key_are_the_same_dim<posn ?>
#include "common.hpp"

int main() {
#ifdef DIMSUM_SHOULD_FAIL
  auto d = dimsum::relative_positions<float>(posn{4}, posn{4});
#else
  auto d = dimsum::relative_positions<float>(q_posn{4}, k_posn{4});
#endif
  (void)d;
}
