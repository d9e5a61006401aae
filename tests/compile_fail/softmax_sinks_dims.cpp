// softmax with sink logits over the softmax's own dim (one logit per key).
// EXPECT: dimsum: softmax<D>\(x, sinks\): the sinks must have at least one dim, and only dims of x other than D
// EXPECT: softmax_sinks_need_dims_of_the_tensor_other_than_the_softmax_dim<k_posn, dimsum::dims<k_posn ?>, dimsum::dims<batch, nheads, q_posn, k_posn ?> ?>
#include "common.hpp"

int main() {
  scores_t s(batch{2}, q_posn{3}, k_posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<float, k_posn> sinks(k_posn{3});
#else
  dimsum::tensor<float, nheads> sinks;
#endif
  auto p = dimsum::softmax<k_posn>(s, sinks);
  (void)p;
}
