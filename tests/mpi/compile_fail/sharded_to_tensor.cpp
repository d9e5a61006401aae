// A sharded tensor assigned to a plain tensor (a rank holds only its
// block): it was the compiler's "conversion from sharded<...> to
// non-scalar type tensor<...>".
// EXPECT: dimsum: a dist::sharded is not a tensor; take this rank's block with s.local\(\)
// EXPECT: a_sharded_tensor_is_not_a_tensor<dimsum::dims<nheads, d_head>, dimsum::dims<nheads, d_head> ?>
#include "common.hpp"

int main() {
  dist::mesh<model> m(MPI_COMM_WORLD, model{1});
  dimsum::tensor<float, nheads, d_head> a;
  const auto as = dist::shard<heads_split>(m, a);
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<float, nheads, d_head> b = as;
#else
  dimsum::tensor<float, nheads, d_head> b = dist::all_gather<nheads>(as);
#endif
  (void)b;
}
