// saving a partial sum (contracting the split heads) in a checkpoint.
// EXPECT: dimsum: a partial sum .* is used where the full value is needed
// EXPECT: partial_sum_used_as_a_full_value<nheads ?, model ?, dimsum::dist::op_save ?>
#include "common.hpp"

int main() {
  dist::mesh<model> m(MPI_COMM_WORLD, model{1});
  dimsum::tensor<float, nheads, d_head> a;
  const auto as = dist::shard<heads_split>(m, a);
  const auto total = dist::einsum<"nheads d_head -> d_head">(as);
#ifdef DIMSUM_SHOULD_FAIL
  dist::save_checkpoint(m, "ckpt", dist::entry("a", as), dist::entry("total", total));
#else
  dist::save_checkpoint(m, "ckpt", dist::entry("a", as), dist::entry("total", dist::all_reduce(total)));
#endif
}
