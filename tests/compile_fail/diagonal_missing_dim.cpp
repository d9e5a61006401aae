// diagonal over a dim the tensor lacks (trace alike).
// EXPECT: dimsum: diagonal/trace over a dim that the tensor does not have
// EXPECT: diagonal_dim_is_not_a_dim_of_the_tensor<k_posn, dimsum::dims<batch, nheads, q_posn, posn> ?>
#include "common.hpp"

int main() {
  dimsum::tensor<float, batch, nheads, q_posn, posn> s(batch{2}, q_posn{3}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto d = dimsum::diagonal<q_posn, k_posn>(s);
#else
  auto d = dimsum::diagonal<q_posn, posn>(s);
#endif
  (void)d;
}
