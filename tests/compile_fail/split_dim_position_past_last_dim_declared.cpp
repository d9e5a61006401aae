// As split_dim_position_past_last_dim.cpp, with the result assigned to a
// declared tensor type, as users write it: still exactly one error.
// EXPECT: dimsum: split_dim<Pos, ...> / merge_dims<Pos, Count, ...>: the dims from position Pos \(0-based\) run past the tensor's last dim
// EXPECT: split_or_merge_position_is_past_the_last_dim<dimsum::position_c<3>, dimsum::count_c<1>, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"

DIMSUM_DIM(part);
DIMSUM_DIM(rest);

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<float, batch, posn, part, rest> s = dimsum::split_dim<3, dimsum::dim_list<part, rest>>(x, {3, 10});
#else
  dimsum::tensor<float, batch, posn, part, rest> s = dimsum::split_dim<2, dimsum::dim_list<part, rest>>(x, {3, 10});
#endif
  (void)s;
}
