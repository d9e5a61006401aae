// Writing into a slice of a const tensor: the view's elements are const.
// EXPECT: dimsum: assigning into a view of const elements
// EXPECT: assignment_into_a_view_of_const_elements<dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"

int main() {
  const x_t x(batch{2}, posn{3});
  x_t y(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::slice<posn>(x, 0, 2) = 1.0f;
#else
  dimsum::slice<posn>(y, 0, 2) = 1.0f;
  (void)x;
#endif
}
