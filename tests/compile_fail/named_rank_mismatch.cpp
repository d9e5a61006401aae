// Naming a rank-2 xtensor container with three dims.
// EXPECT: dimsum: naming an xtensor expression needs exactly one dim per axis
// EXPECT: named_rank_does_not_match_dims<dimsum::count_c<2>, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"
#include <xtensor/xbuilder.hpp>

int main() {
  xt::xtensor<float, 2> raw = xt::zeros<float>({2, 3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::named<batch, posn, d_model>(raw);
#else
  auto r = dimsum::named<batch, posn>(raw);
#endif
  (void)r;
}
