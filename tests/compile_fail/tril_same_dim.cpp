// tril with the same dim for rows and columns (torch.tril(torch.ones(n, n))
// written with one dim): one error, the causal_mask checker, before the
// result type tensor<bool, posn, posn> is named.
// EXPECT: dimsum: causal_mask needs two different dims
// EXPECT: causal_mask_query_and_key_are_the_same_dim<posn>
#include "common.hpp"

int main() {
#ifdef DIMSUM_SHOULD_FAIL
  auto m = dimsum::tril(posn{3}, posn{3});
#else
  auto m = dimsum::tril(q_posn{3}, k_posn{3});
#endif
  (void)m;
}
