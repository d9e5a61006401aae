// lookup<Vocab> on tensors with ids that are not integers.
// EXPECT: dimsum: lookup<Vocab>\(table, ids\) needs integer ids
// EXPECT: lookup_ids_must_be_integers<float, dimsum::dims<q_posn, k_posn> ?>
#include "common.hpp"
#include <cstdint>

DIMSUM_DIM(bucket);

int main() {
  const dimsum::tensor<float, bucket, nheads> table(bucket{32});
#ifdef DIMSUM_SHOULD_FAIL
  const auto ids = dimsum::relative_positions<float>(q_posn{4}, k_posn{4});
#else
  const auto ids = dimsum::t5_relative_bucket(dimsum::relative_positions<int>(q_posn{4}, k_posn{4}), true, 32, 128);
#endif
  [[maybe_unused]] const auto bias = dimsum::lookup<bucket>(table, ids);
}
