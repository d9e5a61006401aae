// As repeat_new_dim_no_extent.cpp (a label inside a group: tiling), with the result assigned to a declared tensor type.
// EXPECT: dimsum: repeat adds a dim whose extent is not given
// EXPECT: repeat_new_dim_has_no_extent<dimsum::label<(dimsum::)?fixed_string<[0-9]+>{"k_posn"}> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<float, batch, q_posn, d_model> r = dimsum::repeat<"batch posn d_model -> batch q_posn(k_posn posn) d_model">(x);
#else
  dimsum::tensor<float, batch, q_posn, d_model> r =
      dimsum::repeat<"batch posn d_model -> batch q_posn(k_posn posn) d_model">(x, k_posn{2});
#endif
  (void)r;
}
