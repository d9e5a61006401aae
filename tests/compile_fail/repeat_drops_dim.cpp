// A repeat pattern that leaves out a dim of its operand.
// EXPECT: dimsum: repeat must keep every dim of its operand
// EXPECT: repeat_drops_a_dim<posn>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::repeat<"batch posn d_model -> batch k_posn d_model">(x, k_posn{4});
#else
  auto r = dimsum::repeat<"batch posn d_model -> batch k_posn posn d_model">(x, k_posn{4});
#endif
  (void)r;
}
