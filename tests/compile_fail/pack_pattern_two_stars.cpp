// A pack pattern with two '*'.
// EXPECT: dimsum: a pack pattern is labels around exactly one '\*'
// EXPECT: pack_pattern_is_not_labels_around_one_star<dimsum::position_c<8> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
  dimsum::tensor<float, batch, d_model> y(batch{2});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::pack<"batch * * d_model", k_posn>(x, y);
#else
  auto r = dimsum::pack<"batch * d_model", k_posn>(x, y);
#endif
  (void)r;
}
