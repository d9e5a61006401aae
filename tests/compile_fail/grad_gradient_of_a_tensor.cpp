// The gradient of a plain tensor: only parameters and vars have one.
// EXPECT: dimsum: gradient\(x\) needs a parameter or a grad::var
// EXPECT: gradient_of_something_that_is_not_a_parameter_or_var<dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"
#include <dimsum/grad/grad.hpp>

int main() {
  dimsum::grad::tape t;
  x_t x(batch{2}, posn{3});
  auto xv = t.watch(x);
  t.backward(dimsum::sum<batch, posn, d_model>(xv * xv));
#ifdef DIMSUM_SHOULD_FAIL
  auto g = dimsum::gradient(x);
#else
  auto g = dimsum::gradient(xv);
#endif
  (void)g;
}
