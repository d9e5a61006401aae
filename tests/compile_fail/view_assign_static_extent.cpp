// Writing into a slice from a source whose dim has another static extent.
// EXPECT: dimsum: the same dim has two different static extents
// EXPECT: static_extent_mismatch<.*d_model.*extent_c<30>.*extent_c<31>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<float, dimsum::dim<"d_model", 31>> b;
#else
  dimsum::tensor<float, d_model> b;
#endif
  dimsum::select<batch>(x, 0) = b;
}
