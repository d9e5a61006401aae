// one mesh axis splitting two dims.
// EXPECT: dimsum: a sharded tensor places one dim, or uses one mesh axis, twice
// EXPECT: sharded_tensor_uses_a_dim_or_mesh_axis_twice<d_head ?, model ?>
#include "common.hpp"

int main() {
  dist::mesh<model, data> m(MPI_COMM_WORLD, model{1}, data{1});
  dimsum::tensor<float, nheads, d_head> b;
#ifdef DIMSUM_SHOULD_FAIL
  auto s = dist::shard<dist::split<nheads, model>, dist::split<d_head, model>>(m, b);
#else
  auto s = dist::shard<dist::split<nheads, model>, dist::split<d_head, data>>(m, b);
#endif
  (void)s;
}
