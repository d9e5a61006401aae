// As split_dim_repeats_a_dim_var.cpp, with the result assigned to the
// declared var type the user meant: still exactly one error.
// EXPECT: dimsum: a tensor cannot have the same dim twice
// EXPECT: tensor_has_a_duplicate_dim<posn, dimsum::dims<batch, posn, posn, rest> ?>
#include "common.hpp"
#include <dimsum/grad/grad.hpp>

DIMSUM_DIM(part);
DIMSUM_DIM(rest);

int main() {
  dimsum::grad::tape t;
  auto x = t.watch(x_t(batch{2}, posn{3}));
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::grad::var<float, batch, posn, part, rest> s = dimsum::split_dim<2, dimsum::dim_list<posn, rest>>(x, {3, 10});
#else
  dimsum::grad::var<float, batch, posn, part, rest> s = dimsum::split_dim<2, dimsum::dim_list<part, rest>>(x, {3, 10});
#endif
  (void)s;
}
