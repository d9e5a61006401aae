// masked_fill with a mask whose dim has another static extent than the
// tensor's dim of that name.
// EXPECT: dimsum: the same dim has two different static extents
// EXPECT: static_extent_mismatch<d_model, dimsum::extent_c<30>, dimsum::extent_c<31> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<bool, dimsum::dim<"d_model", 31>> m;
#else
  dimsum::tensor<bool, d_model> m;
#endif
  auto r = dimsum::masked_fill(x, m, 0.0f);
  (void)r;
}
