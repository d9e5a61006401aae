// logsumexp over a dim the tensor lacks (prod, any, all alike).
// EXPECT: dimsum: reduction over a dim that the tensor does not have
// EXPECT: reduction_dim_is_not_a_dim_of_the_tensor<d_model, dimsum::dims<batch, posn, nheads, d_head> ?>
#include "common.hpp"

int main() {
  qkv_t q(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::logsumexp<d_model>(q);
#else
  auto r = dimsum::logsumexp<d_head>(q);
#endif
  (void)r;
}
