// !x of a float tensor (torch's ~ refuses floats): it compiled, reading x
// as x != 0.
// EXPECT: dimsum: !x needs bool values
// EXPECT: logical_not_needs_bool_values<float, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto y = !x;
#else
  auto y = !(x != 0.0f);
#endif
  (void)y;
}
