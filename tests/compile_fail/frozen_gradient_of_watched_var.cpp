// gradient(v) of the var that tape.watch gives for a parameter frozen by its
// type: the var is a constant (a grad::frozen_var), so it has no gradient.
// EXPECT: dimsum: gradient\(v\), v.retain_grad\(\) or v.register_hook\(f\) of the var of a frozen_parameter
// EXPECT: gradient_of_the_var_of_a_frozen_parameter<dimsum::dims<nheads, d_model, d_head> ?>
#include "common.hpp"
#include <dimsum/grad/grad.hpp>

int main() {
  dimsum::frozen_parameter<float, nheads, d_model, d_head> E;
  dimsum::parameter<float, nheads, d_model, d_head> W;
  dimsum::grad::tape t;
  auto [e, w] = t.watch(E, W);
  t.backward(dimsum::sum<nheads, d_model, d_head>(w * e));
#ifdef DIMSUM_SHOULD_FAIL
  const auto& g = dimsum::gradient(e);
#else
  const auto& g = dimsum::gradient(w);
#endif
  (void)g;
}
