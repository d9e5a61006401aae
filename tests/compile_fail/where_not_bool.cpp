// where with a float condition (torch.where requires a bool one; a float
// mask read as `cond != 0` would silently invert an additive mask).
// EXPECT: dimsum: where needs a condition of bool values
// EXPECT: where_condition_is_not_boolean<float>
#include "common.hpp"

int main() {
  scores_t s(batch{2}, q_posn{3}, k_posn{3});
  dimsum::tensor<float, batch, k_posn> fmask(batch{2}, k_posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  scores_t m = dimsum::where(fmask, s, -1e9f);
#else
  scores_t m = dimsum::where(fmask > 0.0f, s, -1e9f);
#endif
  (void)m;
}
