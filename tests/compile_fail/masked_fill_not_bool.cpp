// masked_fill with a float mask.
// EXPECT: dimsum: masked_fill needs a mask of bool values
// EXPECT: masked_fill_mask_is_not_boolean<float>
#include "common.hpp"

int main() {
  scores_t s(batch{2}, q_posn{3}, k_posn{3});
  dimsum::tensor<float, batch, k_posn> fmask(batch{2}, k_posn{3});
  dimsum::tensor<bool, batch, k_posn> bmask(batch{2}, k_posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto m = dimsum::masked_fill(s, fmask, -1e9f);
#else
  auto m = dimsum::masked_fill(s, bmask, -1e9f); (void)fmask;
#endif
  (void)m;
}
