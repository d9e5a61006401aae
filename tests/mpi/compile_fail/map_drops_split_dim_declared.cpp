// As map_drops_split_dim.cpp, with the result assigned to a declared type, as users
// write it (`dist::sharded<tensor<float, nheads, d_head>, heads_split> r = ...`): still exactly one error.
// dist::map whose function sums over a dim split over a mesh axis (each
// rank would hold a partial sum typed as a full value).
// EXPECT: dimsum: this operation needs all of a dim that is split over a mesh axis
// EXPECT: operation_over_a_sharded_dim<nheads ?, model ?, dimsum::dist::op_map ?>
#include "common.hpp"

int main() {
  dist::mesh<model> m(MPI_COMM_WORLD, model{1});
  dimsum::tensor<float, nheads, d_head> a, b;
  const auto as = dist::shard<heads_split>(m, a);
  const auto bs = dist::shard<heads_split>(m, b);
#ifdef DIMSUM_SHOULD_FAIL
  dist::sharded<dimsum::tensor<float, nheads, d_head>, heads_split> r = dist::map([](const auto& x, const auto& y) { return dimsum::sum<nheads>(x * y); }, as, bs);
#else
  dist::sharded<dimsum::tensor<float, nheads, d_head>, heads_split> r = dist::map([](const auto& x, const auto& y) { return x * y; }, as, bs);
#endif
  (void)r;
}
