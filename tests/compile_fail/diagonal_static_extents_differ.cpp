// diagonal of two static dims of different extents.
// EXPECT: dimsum: diagonal/trace of two dims whose static extents differ
// EXPECT: diagonal_dims_have_different_static_extents<nheads, dimsum::extent_c<2>, d_head, dimsum::extent_c<10> ?>
#include "common.hpp"

int main() {
  w_t w;
  dimsum::tensor<float, nheads, d_model, d_head> w2;
#ifdef DIMSUM_SHOULD_FAIL
  auto d = dimsum::diagonal<nheads, d_head>(w);
#else
  auto d = dimsum::sum<d_model>(w2);
#endif
  (void)d; (void)w2;
}
