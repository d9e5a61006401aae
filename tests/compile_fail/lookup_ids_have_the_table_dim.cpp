// lookup<Vocab> on tensors whose ids already have the table's other dim.
// EXPECT: dimsum: lookup<Vocab>\(table, ids\): the ids already have the table's other dim
// EXPECT: lookup_ids_already_have_the_table_dim<nheads, dimsum::dims<batch, nheads> ?>
#include "common.hpp"
#include <cstdint>

DIMSUM_DIM(bucket);

int main() {
  const dimsum::tensor<float, bucket, nheads> table(bucket{8});
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<std::int64_t, batch, nheads> ids(batch{3});
#else
  dimsum::tensor<std::int64_t, batch, posn> ids(batch{3}, posn{2});
#endif
  ids.fill(1);
  [[maybe_unused]] const auto rows = dimsum::lookup<bucket>(table, ids);
}
