// Reading an element with the same dim's index twice.
// EXPECT: dimsum: argument list names the same dim twice
// EXPECT: argument_names_a_dim_twice<posn, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  float v = x(batch{0}, posn{1}, posn{2});
#else
  float v = x(batch{0}, posn{1}, d_model{2});
#endif
  (void)v;
}
