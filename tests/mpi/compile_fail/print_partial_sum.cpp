// printing a partial sum.
// EXPECT: dimsum: a partial sum .* is used where the full value is needed
// EXPECT: partial_sum_used_as_a_full_value<nheads ?, model ?, dimsum::dist::op_print ?>
#include <iostream>

#include "common.hpp"

int main() {
  dist::mesh<model> m(MPI_COMM_WORLD, model{1});
  dimsum::tensor<float, nheads, d_head> a;
  const auto as = dist::shard<heads_split>(m, a);
  const auto total = dist::einsum<"nheads d_head -> d_head">(as);
#ifdef DIMSUM_SHOULD_FAIL
  std::cout << total;
#else
  std::cout << dist::all_reduce(total);
#endif
}
