// dist::map of one sharded operand whose function sums over the split dim:
// reported as an operation over a sharded dim, as with several operands
// (it was "a sharded tensor splits a dim that the tensor does not have").
// EXPECT: dimsum: this operation needs all of a dim that is split over a mesh axis
// EXPECT: operation_over_a_sharded_dim<nheads ?, model ?, dimsum::dist::op_map ?>
#include "common.hpp"

int main() {
  dist::mesh<model> m(MPI_COMM_WORLD, model{1});
  dimsum::tensor<float, nheads, d_head> a;
  const auto as = dist::shard<heads_split>(m, a);
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dist::map([](const auto& x) { return dimsum::sum<nheads>(x); }, as);
#else
  auto r = dist::map([](const auto& x) { return dimsum::sum<d_head>(x); }, as);
#endif
  (void)r;
}
