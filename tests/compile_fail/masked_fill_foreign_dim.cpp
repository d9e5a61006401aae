// masked_fill with a mask that has a dim the tensor lacks.
// EXPECT: dimsum: masked_fill mask has a dim that the tensor lacks
// EXPECT: masked_fill_mask_has_a_dim_the_tensor_lacks<posn,
#include "common.hpp"

int main() {
  scores_t s(batch{2}, q_posn{3}, k_posn{3});
  dimsum::tensor<bool, batch, posn> pad(batch{2}, posn{3});
  dimsum::tensor<bool, batch, k_posn> kpad(batch{2}, k_posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto m = dimsum::masked_fill(s, pad, -1e9f);
#else
  auto m = dimsum::masked_fill(s, kpad, -1e9f); (void)pad;
#endif
  (void)m;
}
