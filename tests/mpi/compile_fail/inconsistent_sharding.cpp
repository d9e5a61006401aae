// einsum of weights split by head with a bias that holds every head.
// EXPECT: dimsum: operands place a dim inconsistently
// EXPECT: operands_shard_a_dim_inconsistently<nheads ?, model ?>
#include "common.hpp"

int main() {
  dist::mesh<model> m(MPI_COMM_WORLD, model{1});
  dimsum::tensor<float, batch, posn, d_model> x(batch{1}, posn{3});
  dimsum::tensor<float, nheads, d_model, d_head> w;
  dimsum::tensor<float, nheads, d_head> b;
  const auto ws = dist::shard<heads_split>(m, w);
  const auto q = dist::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, ws);
#ifdef DIMSUM_SHOULD_FAIL
  auto qb = q + b;
#else
  auto qb = q + dist::shard<heads_split>(m, b);
#endif
  (void)qb;
}
