// A var result assigned to a declared var type with other dims: the same
// checker as for a tensor, naming both dim lists (it was the compiler's
// "conversion from var<...> to non-scalar type var<...> requested").
// EXPECT: dimsum: assigning an expression to a tensor needs the same dims
// EXPECT: assignment_between_different_dims<dimsum::dims<batch, posn>, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"
#include <dimsum/grad/grad.hpp>

int main() {
  dimsum::grad::tape tape;
  auto v = tape.watch(x_t::ones(batch{2}, posn{3}));
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::grad::var<float, batch, posn> r = v * 2.0f;
#else
  dimsum::grad::var<float, batch, posn> r = dimsum::sum<d_model>(v * 2.0f);
#endif
  (void)r;
}
