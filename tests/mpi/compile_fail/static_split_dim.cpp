// A dim declared with a static extent (as tutorial chapter 1 declares dims)
// split over a mesh axis: each rank's block would have another extent than
// the one its type states.
// EXPECT: dimsum: a dim split over a mesh axis must be dynamic
// EXPECT: split_dim_has_a_static_extent<heads4 ?, model ?>
// EXPECT: static_split_dim\.cpp:16:
#include "common.hpp"

DIMSUM_DIM(heads4, 4);

int main() {
  dist::mesh<model> m(MPI_COMM_WORLD, model{1});
  dimsum::tensor<float, heads4, d_model> w;
  dimsum::tensor<float, nheads, d_model> v(nheads{4});
#ifdef DIMSUM_SHOULD_FAIL
  const auto s = dist::shard<dist::split<heads4, model>>(m, w);
#else
  const auto s = dist::shard<dist::split<nheads, model>>(m, v);
  (void)w;
#endif
  (void)s;
}
