// reduce on a var with an operation that has no gradient.
// EXPECT: dimsum: reduce on a grad::var needs an operation with a gradient
// EXPECT: reduce_of_a_var_needs_a_differentiable_operation<dimsum::label<(dimsum::)?fixed_string<[0-9]+>{"any"}> ?>
#include <dimsum/grad/grad.hpp>

#include "common.hpp"

int main() {
  dimsum::grad::tape tape;
  auto v = tape.watch(x_t(batch{2}, posn{3}));
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::reduce<"batch posn d_model -> batch", "any">(v);
#else
  auto r = dimsum::reduce<"batch posn d_model -> batch", "max">(v);
#endif
  (void)r;
}
