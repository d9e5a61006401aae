// rope over a position dim the tensor does not have (k_posn instead of posn).
// EXPECT: dimsum: rope over a dim that the tensor does not have
// EXPECT: rope_dim_is_not_a_dim_of_the_tensor<k_posn ?,
#include "common.hpp"

int main() {
  qkv_t q(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::rope<k_posn, d_head>(q, dimsum::rope_pairs::half_split);
#else
  auto r = dimsum::rope<posn, d_head>(q, dimsum::rope_pairs::half_split);
#endif
  (void)r;
}
