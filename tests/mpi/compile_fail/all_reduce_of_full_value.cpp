// all_reduce of a value that is not a partial sum (it would multiply it by the number of ranks).
// EXPECT: dimsum: this collective needs a value placed that way
// EXPECT: collective_has_nothing_to_do<.*dimsum::dist::op_all_reduce ?>
#include "common.hpp"

int main() {
  dist::mesh<model> m(MPI_COMM_WORLD, model{1});
  dimsum::tensor<float, nheads, d_head> a;
  const auto as = dist::shard<heads_split>(m, a);
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dist::all_reduce(as);
#else
  auto r = dist::all_reduce(dist::einsum<"nheads d_head -> d_head">(as));
#endif
  (void)r;
}
