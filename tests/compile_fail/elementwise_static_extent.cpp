// Adding tensors whose shared dim has different static extents.
// EXPECT: dimsum: the same dim has two different static extents
// EXPECT: static_extent_mismatch<.*d_model.*extent_c<30>.*extent_c<31>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
  dimsum::tensor<float, dimsum::dim<"d_model", 31>> b31;
  dimsum::tensor<float, d_model> b;
#ifdef DIMSUM_SHOULD_FAIL
  auto y = x + b31;
#else
  auto y = x + b; (void)b31;
#endif
  (void)y;
}
