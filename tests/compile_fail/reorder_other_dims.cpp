// reorder<Out> with a list that names a dim the tensor lacks (nheads for
// d_model): one error naming both lists, before the permutation is built
// (its tuple index would be out of range).
// EXPECT: dimsum: reorder needs the same dims in another order
// EXPECT: reorder_needs_the_same_dims<dimsum::dims<posn, batch, nheads>, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::reorder<dimsum::dim_list<posn, batch, nheads>>(x);
#else
  auto r = dimsum::reorder<dimsum::dim_list<posn, batch, d_model>>(x);
#endif
  (void)r;
}
