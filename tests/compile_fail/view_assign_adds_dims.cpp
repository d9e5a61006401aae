// x[:, :2] = q where q has dims the slice lacks: a source broadcasts into a
// view by name, it cannot grow it.
// EXPECT: dimsum: assigning into a view an expression with a dim the view lacks
// EXPECT: assignment_source_has_a_dim_the_view_lacks<nheads, dimsum::dims<batch, posn, nheads, d_head>, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  qkv_t q(batch{2}, posn{2});
  dimsum::slice<posn>(x, 0, 2) = q;
#else
  dimsum::tensor<float, posn, batch> m(batch{2}, posn{2});
  dimsum::slice<posn>(x, 0, 2) = m;
#endif
}
