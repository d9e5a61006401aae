// merge_dims<Pos, Count, NewDim> on a grad::var whose dims [Pos, Pos + Count)
// run past its last dim (a rank-3 var has no dims 2 and 3 to merge).
// EXPECT: dimsum: split_dim<Pos, ...> / merge_dims<Pos, Count, ...>: the dims from position Pos \(0-based\) run past the tensor's last dim
// EXPECT: split_or_merge_position_is_past_the_last_dim<dimsum::position_c<2>, dimsum::count_c<2>, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"
#include <dimsum/grad/grad.hpp>

DIMSUM_DIM(merged);

int main() {
  dimsum::grad::tape t;
  auto x = t.watch(x_t(batch{2}, posn{3}));
#ifdef DIMSUM_SHOULD_FAIL
  auto m = dimsum::merge_dims<2, 2, merged>(x);
#else
  auto m = dimsum::merge_dims<1, 2, merged>(x);
#endif
  (void)m;
}
