// a full value (a bias) added to a partial sum inside all_reduce: one error,
// at the sum, on the user's line (no "no matching function" for all_reduce).
// EXPECT: dimsum: a partial sum .* is used where the full value is needed
// EXPECT: partial_sum_used_as_a_full_value<nheads ?, model ?, dimsum::dist::op_add_full_value ?>
// EXPECT: all_reduce_of_partial_plus_full\.cpp:17:
#include "common.hpp"

int main() {
  dist::mesh<model> m(MPI_COMM_WORLD, model{1});
  dimsum::tensor<float, batch, q_posn, nheads, d_head> z(batch{1}, q_posn{3}, nheads{4});
  dimsum::tensor<float, nheads, d_head, d_model> w(nheads{4});
  dimsum::tensor<float, d_model> b_O;
  const auto zs = dist::shard<heads_split>(m, z);
  const auto ws = dist::shard<heads_split>(m, w);
  const auto partial = dist::einsum<"batch q_posn nheads d_head, nheads d_head d_model -> batch q_posn d_model">(zs, ws);
#ifdef DIMSUM_SHOULD_FAIL
  auto out = dist::all_reduce(partial + b_O);
#else
  auto out = dist::all_reduce(partial) + b_O;
#endif
  (void)out;
}
