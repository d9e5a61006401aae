// dist::rename of a split dim to a name the tensor already has: the local
// rename's one error (it gave 4 on both compilers).
// EXPECT: dimsum: rename to a name that the tensor already has
// EXPECT: rename_target_is_already_a_dim_of_the_tensor<d_head, dimsum::dims<nheads, d_head> ?>
#include "common.hpp"

int main() {
  dist::mesh<model> m(MPI_COMM_WORLD, model{1});
  dimsum::tensor<float, nheads, d_head> a;
  const auto as = dist::shard<heads_split>(m, a);
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dist::rename<nheads, d_head>(as);
#else
  auto r = dist::rename<nheads, q_posn>(as);
#endif
  (void)r;
}
