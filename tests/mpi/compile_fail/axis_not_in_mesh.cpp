// sharding over a mesh axis the mesh does not have.
// EXPECT: dimsum: a dim is sharded over a mesh axis that the mesh does not have
// EXPECT: sharded_over_a_mesh_axis_the_mesh_lacks<nheads ?, data ?,
// EXPECT: axis_not_in_mesh\.cpp:11:
#include "common.hpp"

int main() {
  dist::mesh<model> m(MPI_COMM_WORLD, model{1});
  dimsum::tensor<float, nheads, d_model, d_head> w;
#ifdef DIMSUM_SHOULD_FAIL
  auto ws = dist::shard<dist::split<nheads, data>>(m, w);
#else
  auto ws = dist::shard<dist::split<nheads, model>>(m, w);
#endif
  (void)ws;
}
