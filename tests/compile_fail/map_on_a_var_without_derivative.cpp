// map of a grad::var with a function that has no derivative.
// EXPECT: dimsum: map\(f, v\) of a grad::var needs f's derivative to record the gradient: write map\(with_derivative\(f, df\), v\)
// EXPECT: map_on_a_var_needs_a_derivative<dimsum::dims<batch, posn ?> ?>
#include "common.hpp"

#include <dimsum/grad/grad.hpp>

int main() {
  dimsum::grad::tape tape;
  auto v = tape.watch(dimsum::tensor<float, batch, posn>(batch{2}, posn{3}));
  auto f = [](float x) { return x * x; };
#ifdef DIMSUM_SHOULD_FAIL
  auto y = dimsum::map(f, v);
#else
  auto y = dimsum::map(dimsum::with_derivative(f, [](float x) { return 2 * x; }), v);
#endif
  (void)y;
}
