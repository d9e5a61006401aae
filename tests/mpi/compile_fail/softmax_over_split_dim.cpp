// softmax over the dim that is split over the mesh (each rank has only part of each row).
// EXPECT: dimsum: this operation needs all of a dim that is split over a mesh axis
// EXPECT: operation_over_a_sharded_dim<nheads ?, model ?, dimsum::dist::op_softmax ?>
#include "common.hpp"

int main() {
  dist::mesh<model> m(MPI_COMM_WORLD, model{1});
  dimsum::tensor<float, nheads, d_head> a;
  const auto as = dist::shard<heads_split>(m, a);
#ifdef DIMSUM_SHOULD_FAIL
  auto p = dist::softmax<nheads>(as);
#else
  auto p = dist::softmax<d_head>(as);
#endif
  (void)p;
}
