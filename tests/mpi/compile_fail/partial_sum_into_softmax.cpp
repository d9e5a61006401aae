// softmax of a partial sum (contracting the split heads) before all_reduce.
// EXPECT: dimsum: a partial sum .* is used where the full value is needed
// EXPECT: partial_sum_used_as_a_full_value<nheads ?, model ?, dimsum::dist::op_softmax ?>
// EXPECT: partial_sum_into_softmax\.cpp:15:
#include "common.hpp"

int main() {
  dist::mesh<model> m(MPI_COMM_WORLD, model{1});
  dimsum::tensor<float, batch, q_posn, nheads, d_head> z(batch{1}, q_posn{3}, nheads{4});
  dimsum::tensor<float, nheads, d_head, d_model> w(nheads{4});
  const auto zs = dist::shard<heads_split>(m, z);
  const auto ws = dist::shard<heads_split>(m, w);
  const auto out = dist::einsum<"batch q_posn nheads d_head, nheads d_head d_model -> batch q_posn d_model">(zs, ws);
#ifdef DIMSUM_SHOULD_FAIL
  auto p = dist::softmax<d_model>(out);
#else
  auto p = dimsum::softmax<d_model>(dist::all_reduce(out));
#endif
  (void)p;
}
