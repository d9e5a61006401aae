// softmax with sink logits of another value type than the scores.
// EXPECT: dimsum: softmax<D>\(x, sinks\): the sinks must have the value type of x
// EXPECT: softmax_sinks_need_the_value_type_of_the_tensor<float, double ?>
#include "common.hpp"

int main() {
  scores_t s(batch{2}, q_posn{3}, k_posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<double, nheads> sinks;
#else
  dimsum::tensor<float, nheads> sinks;
#endif
  auto p = dimsum::softmax<k_posn>(s, sinks);
  (void)p;
}
