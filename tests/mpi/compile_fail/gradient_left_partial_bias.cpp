// a bias var every rank holds in full, added to values split over `model`:
// each rank's part of the bias's gradient sums only its own heads.
// EXPECT: dimsum: this var meets values split .* over a mesh axis it is not placed on
// EXPECT: gradient_would_be_a_partial_sum<dimsum::dims<d_head ?>, model ?>
// EXPECT: gradient_left_partial_bias\.cpp:15:
#include "common.hpp"

int main() {
  dist::mesh<model> m(MPI_COMM_WORLD, model{1});
  dimsum::grad::tape t;
  dimsum::parameter<float, nheads, d_head> q(nheads{}, d_head{});
  dimsum::parameter<float, d_head> b(d_head{});
  const auto qs = dist::watch<heads_split>(t, m, q);
#ifdef DIMSUM_SHOULD_FAIL
  const auto y = qs + b(t);
#else
  const auto y = qs + dist::replicate<model>(m, b(t));
#endif
  (void)y;
}
