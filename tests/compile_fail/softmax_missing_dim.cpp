// softmax over a dim the tensor lacks.
// EXPECT: dimsum: softmax over a dim that the tensor does not have
// EXPECT: softmax_dim_is_not_a_dim_of_the_tensor<posn, dimsum::dims<batch, nheads, q_posn, k_posn> ?>
#include "common.hpp"

int main() {
  scores_t s(batch{2}, q_posn{3}, k_posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto p = dimsum::softmax<posn>(s);
#else
  auto p = dimsum::softmax<k_posn>(s);
#endif
  (void)p;
}
