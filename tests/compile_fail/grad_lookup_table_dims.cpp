// lookup<Vocab> of a table that lacks the Vocab dim.
// EXPECT: dimsum: lookup<Vocab>\(table, ids\) needs a table with two dims, Vocab and the embedding dim
// EXPECT: lookup_table_needs_the_vocab_dim_and_one_more<posn, dimsum::dims<nheads, d_head> ?>
#include "common.hpp"
#include <cstdint>
#include <dimsum/grad/grad.hpp>

int main() {
  dimsum::parameter<float, nheads, d_head> table(dimsum::tensor<float, nheads, d_head>::ones());
  dimsum::tensor<std::int64_t, batch> ids(batch{2});
  dimsum::grad::tape t;
#ifdef DIMSUM_SHOULD_FAIL
  auto rows = dimsum::lookup<posn>(t.watch(table), ids);
#else
  auto rows = dimsum::lookup<nheads>(t.watch(table), ids);
#endif
  t.backward(dimsum::sum<batch, d_head>(rows));
}
