// A reduction that names the same dim twice.
// EXPECT: dimsum: reduction names the same dim twice
// EXPECT: reduction_names_a_dim_twice<posn, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::sum<posn, posn>(x);
#else
  auto r = dimsum::sum<posn, batch>(x);
#endif
  (void)r;
}
