// Constructing a tensor without the extent of one of its dynamic dims.
// EXPECT: dimsum: constructing this tensor needs the extent of each dynamic dim
// EXPECT: tensor_constructor_is_missing_the_extent_of<posn, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"

int main() {
#ifdef DIMSUM_SHOULD_FAIL
  x_t x(batch{2});
#else
  x_t x(batch{2}, posn{3});
#endif
  (void)x;
}
