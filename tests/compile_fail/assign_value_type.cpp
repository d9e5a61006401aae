// Assigning a double expression to a float tensor.
// EXPECT: dimsum: assigning needs the same value type
// EXPECT: value_type_mismatch<float, double>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  x_t y = dimsum::cast<double>(x);
#else
  x_t y = dimsum::cast<float>(x);
#endif
  (void)y;
}
