// where(cond, a, b) whose branches give one dim two static extents (a
// bare dim<"d_model", 31> against d_model's 30).
// EXPECT: dimsum: the same dim has two different static extents
// EXPECT: static_extent_mismatch<d_model, dimsum::extent_c<30>, dimsum::extent_c<31> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<float, batch, posn, dimsum::dim<"d_model", 31>> y(batch{2}, posn{3});
#else
  x_t y(batch{2}, posn{3});
#endif
  auto r = dimsum::where(x > 0.0f, x, y);
  (void)r;
}
