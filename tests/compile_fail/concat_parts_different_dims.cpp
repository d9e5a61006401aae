// concat of listed parts whose dims differ (here a head's slice beside the
// residual stream): parts must have the same dims, in any order.
// EXPECT: dimsum: stack and concat need parts with the same dims
// EXPECT: stack_and_concat_need_parts_with_the_same_dims<dimsum::operand<1>, dimsum::dims<batch, posn, d_model>, dimsum::dims<batch, posn, nheads, d_head> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  qkv_t q(batch{2}, posn{3});
  auto r = dimsum::concat<posn>(x, q);
#else
  dimsum::tensor<float, posn, d_model, batch> y(batch{2}, posn{1});
  auto r = dimsum::concat<posn>(x, y * 2.0f);
#endif
  (void)r;
}
