// one mesh axis splitting two dims.
// EXPECT: dimsum: a sharded tensor places one dim, or uses one mesh axis, twice
// EXPECT: sharded_tensor_uses_a_dim_or_mesh_axis_twice<d_dyn ?, model ?>
#include "common.hpp"

DIMSUM_DIM(d_dyn);  // dynamic: a split dim must be

int main() {
  dist::mesh<model, data> m(MPI_COMM_WORLD, model{1}, data{1});
  dimsum::tensor<float, nheads, d_dyn> b(nheads{2}, d_dyn{2});
#ifdef DIMSUM_SHOULD_FAIL
  auto s = dist::shard<dist::split<nheads, model>, dist::split<d_dyn, model>>(m, b);
#else
  auto s = dist::shard<dist::split<nheads, model>, dist::split<d_dyn, data>>(m, b);
#endif
  (void)s;
}
