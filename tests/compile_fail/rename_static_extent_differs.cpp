// rename of a static dim (d_wide, 31) to a dim with another static extent
// (d_model, 30): the checker names both dims and both extents.
// EXPECT: dimsum: rename to a dim whose static extent differs from the renamed dim's
// EXPECT: rename_target_has_another_static_extent<d_wide, dimsum::extent_c<31>, d_model, dimsum::extent_c<30> ?>
#include "common.hpp"

DIMSUM_DIM(d_wide, 31);
DIMSUM_DIM(d_same, 31);

int main() {
  dimsum::tensor<float, batch, d_wide> t(batch{2});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::rename<d_wide, d_model>(t);
#else
  auto r = dimsum::rename<d_wide, d_same>(t);
#endif
  (void)r;
}
