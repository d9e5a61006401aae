// unpack of a tensor with two dims besides the pattern's (which one did '*' pack?),
// bound as `auto [x] = unpack...` (no second error from the binding).
// EXPECT: dimsum: unpack's tensor needs exactly one dim besides those the pattern names
// EXPECT: unpack_tensor_needs_one_dim_besides_the_pattern<dimsum::dims<batch, posn, nheads, d_head> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
  auto [p, shapes] = dimsum::pack<"batch * d_model", k_posn>(x);
  qkv_t q(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto [r] = dimsum::unpack<"batch * d_head">(q, shapes);
#else
  auto [r] = dimsum::unpack<"batch * d_model">(p, shapes);
#endif
  (void)r;
}
