// Assigning between tensors whose dim has different static extents.
// EXPECT: dimsum: the same dim has two different static extents
// EXPECT: static_extent_mismatch<.*d_model.*extent_c<30>.*extent_c<31>
#include "common.hpp"

int main() {
  dimsum::tensor<float, batch, dimsum::dim<"d_model", 31>> a(batch{2});
  dimsum::tensor<float, batch, dimsum::dim<"d_model">> b(batch{2}, dimsum::dim<"d_model">{30});
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<float, batch, d_model> y = a;
#else
  dimsum::tensor<float, batch, d_model> y = b; (void)a;
#endif
  (void)y;
}
