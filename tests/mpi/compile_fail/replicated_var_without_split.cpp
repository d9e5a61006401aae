// a var made by dist::replicate<model> used where no value is split over
// `model`: every rank computes all of its gradient, which replicate's
// backward would then sum over the ranks.
// EXPECT: dimsum: a var made by dist::replicate<axis> meets no value split .* over that axis
// EXPECT: replicated_var_meets_no_split_value<dimsum::dims<batch ?, d_model ?>, model ?>
// EXPECT: replicated_var_without_split\.cpp:17:
#include "common.hpp"

int main() {
  dist::mesh<model> m(MPI_COMM_WORLD, model{1});
  dimsum::grad::tape t;
  const auto x = t.watch(dimsum::tensor<float, batch, d_model>(batch{3}));
  const auto xr = dist::replicate<model>(m, x);
  const dimsum::tensor<float, d_model> scale;
  dimsum::parameter<float, nheads, d_model> w(nheads{}, d_model{});
#ifdef DIMSUM_SHOULD_FAIL
  const auto y = xr * scale;
#else
  const auto y = xr * dist::watch<heads_split>(t, m, w);
#endif
  (void)y;
}
