// rope with the feature dim given as the position dim too.
// EXPECT: dimsum: rope needs a position dim and a different feature dim
// EXPECT: rope_position_and_feature_dim_are_the_same<d_head ?>
#include "common.hpp"

int main() {
  qkv_t q(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::rope<d_head, d_head>(q, dimsum::rope_pairs::interleaved);
#else
  auto r = dimsum::rope<posn, d_head>(q, dimsum::rope_pairs::interleaved);
#endif
  (void)r;
}
