// Element access with an index given as a plain number, PyTorch's x[0, 1, 2]
// half translated: the second index names no dim.
// EXPECT: dimsum: extents and indices are given by name, not by position
// EXPECT: extents_and_indices_are_given_by_name<(long )?unsigned int|unsigned long|int, dimsum::count_c<1>, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"

int main() {
  const x_t x = x_t::ones(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  float v = x(batch{0}, 1, d_model{2});
#else
  float v = x(batch{0}, posn{1}, d_model{2});
#endif
  return v == 1.0f ? 0 : 1;
}
