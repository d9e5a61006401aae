// A gradient hook written for another gradient type (the dims in another
// order): the hook receives the var's gradient, with the var's dims.
// EXPECT: dimsum: v.register_hook\(f\) calls f with v's gradient
// EXPECT: a_gradient_hook_takes_the_var_gradient<dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"
#include <dimsum/grad/grad.hpp>

int main() {
  dimsum::grad::tape t;
  auto x = t.watch(x_t(batch{2}, posn{3}));
  auto y = x * 2.0f;
#ifdef DIMSUM_SHOULD_FAIL
  y.register_hook([](dimsum::tensor<float, posn, batch, d_model>& g) { g.fill(0.0f); });
#else
  y.register_hook([](x_t& g) { g.fill(0.0f); });
#endif
  t.backward(dimsum::sum<batch, posn, d_model>(y));
}
