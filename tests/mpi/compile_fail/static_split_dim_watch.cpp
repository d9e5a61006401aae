// dist::watch of a parameter block split over a dim with a static extent.
// EXPECT: dimsum: a dim split over a mesh axis must be dynamic
// EXPECT: split_dim_has_a_static_extent<d_model ?, model ?>
// EXPECT: static_split_dim_watch\.cpp:13:
#include "common.hpp"
#include <dimsum/training.hpp>

int main() {
  dist::mesh<model> m(MPI_COMM_WORLD, model{1});
  dimsum::grad::tape t;
  dimsum::parameter<float, nheads, d_model> w(nheads{2}, d_model{});
#ifdef DIMSUM_SHOULD_FAIL
  const auto s = dist::watch<dist::split<d_model, model>>(t, m, w);
#else
  const auto s = dist::watch<dist::split<nheads, model>>(t, m, w);
#endif
  (void)s;
}
