// As merge_dims_position_past_last_dim_var.cpp, with the result assigned to
// a declared var type: still exactly one error.
// EXPECT: dimsum: split_dim<Pos, ...> / merge_dims<Pos, Count, ...>: the dims from position Pos \(0-based\) run past the tensor's last dim
// EXPECT: split_or_merge_position_is_past_the_last_dim<dimsum::position_c<2>, dimsum::count_c<2>, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"
#include <dimsum/grad/grad.hpp>

DIMSUM_DIM(merged);

int main() {
  dimsum::grad::tape t;
  auto x = t.watch(x_t(batch{2}, posn{3}));
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::grad::var<float, batch, merged> m = dimsum::merge_dims<2, 2, merged>(x);
#else
  dimsum::grad::var<float, batch, merged> m = dimsum::merge_dims<1, 2, merged>(x);
#endif
  (void)m;
}
