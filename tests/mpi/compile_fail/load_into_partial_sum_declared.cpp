// As load_into_partial_sum.cpp, with the result assigned to a declared type, as users
// write it (`stored x = ...`): still exactly one error.
// loading a checkpoint's tensor as a partial sum (a checkpoint holds full values).
// EXPECT: dimsum: a partial sum .* is used where the full value is needed
// EXPECT: partial_sum_used_as_a_full_value<nheads ?, model ?, dimsum::dist::op_load ?>
#include "common.hpp"

int main() {
  dist::mesh<model> m(MPI_COMM_WORLD, model{1});
#ifdef DIMSUM_SHOULD_FAIL
  using stored = dist::sharded<dimsum::tensor<float, d_head>, dist::partial<model, nheads>>;
#else
  using stored = dist::sharded<dimsum::tensor<float, nheads, d_head>, heads_split>;
#endif
  stored x = dist::load<stored>(m, "ckpt", "total");
  (void)x;
}
