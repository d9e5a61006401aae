// Reading an element without an index for every dim.
// EXPECT: dimsum: element access needs one index per dim
// EXPECT: element_access_is_missing_an_index_for<d_model, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  float v = x(posn{1}, batch{0});
#else
  float v = x(posn{1}, batch{0}, d_model{4});
#endif
  (void)v;
}
