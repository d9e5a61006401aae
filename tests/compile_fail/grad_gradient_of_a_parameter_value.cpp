// The gradient of a parameter's value tensor, after watching that tensor
// (a copy) instead of the parameter: the message says to watch the parameter.
// EXPECT: dimsum: gradient\(x\) needs a parameter or a grad::var; a tensor or expression has no gradient: watch a parameter W itself \(tape.watch\(W\), not tape.watch\(W.value\)
// EXPECT: gradient_of_something_that_is_not_a_parameter_or_var<dimsum::dims<d_model, d_head> ?>
#include "common.hpp"
#include <dimsum/grad/grad.hpp>

int main() {
  dimsum::grad::tape t;
  dimsum::parameter<float, d_model, d_head> W(d_model{30}, d_head{10});
#ifdef DIMSUM_SHOULD_FAIL
  auto w = t.watch(W.value);
#else
  auto w = t.watch(W);
#endif
  t.backward(dimsum::sum<d_model, d_head>(w * w));
#ifdef DIMSUM_SHOULD_FAIL
  auto g = dimsum::gradient(W.value);
#else
  auto g = dimsum::gradient(W);
#endif
  (void)g;
}
