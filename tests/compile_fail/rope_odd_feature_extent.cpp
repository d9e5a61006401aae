// rope over a feature dim of odd static extent: features rotate in pairs.
// EXPECT: dimsum: rope rotates features in pairs, so its feature dim needs an even extent
// EXPECT: rope_feature_dim_has_an_odd_extent<d_odd ?, .*7
#include "common.hpp"

DIMSUM_DIM(d_odd, 7);

int main() {
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<float, posn, d_odd> q(posn{3});
  auto r = dimsum::rope<posn, d_odd>(q, dimsum::rope_pairs::half_split);
#else
  dimsum::tensor<float, posn, d_head> q(posn{3});
  auto r = dimsum::rope<posn, d_head>(q, dimsum::rope_pairs::half_split);
#endif
  (void)r;
}
