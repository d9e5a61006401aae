// a sharded tensor type that splits a dim its tensor does not have.
// EXPECT: dimsum: a sharded tensor splits a dim that the tensor does not have
// EXPECT: sharded_dim_is_not_a_dim_of_the_tensor<batch ?, model ?,
#include "common.hpp"

int main() {
  dist::mesh<model> m(MPI_COMM_WORLD, model{1});
  dimsum::tensor<float, nheads, d_head> b;
#ifdef DIMSUM_SHOULD_FAIL
  auto s = dist::shard<dist::split<batch, model>>(m, b);
#else
  auto s = dist::shard<dist::split<nheads, model>>(m, b);
#endif
  (void)s;
}
