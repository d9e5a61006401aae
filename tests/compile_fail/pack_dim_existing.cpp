// pack along a dim that a tensor already has.
// EXPECT: dimsum: pack needs a new dim for '\*'
// EXPECT: pack_dim_is_already_a_dim_of_an_operand<posn, dimsum::operand<0> ?, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::pack<"batch * d_model", posn>(x);
#else
  auto r = dimsum::pack<"batch * d_model", k_posn>(x);
#endif
  (void)r;
}
