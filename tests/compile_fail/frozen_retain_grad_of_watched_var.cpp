// v.retain_grad() on the var of a parameter frozen by its type (a PyTorch
// habit: retain_grad on a leaf to read its .grad): it has no gradient.
// EXPECT: dimsum: gradient\(v\), v.retain_grad\(\) or v.register_hook\(f\) of the var of a frozen_parameter
// EXPECT: gradient_of_the_var_of_a_frozen_parameter<dimsum::dims<nheads, d_model, d_head> ?>
#include "common.hpp"
#include <dimsum/grad/grad.hpp>

int main() {
  dimsum::frozen_parameter<float, nheads, d_model, d_head> E;
  dimsum::parameter<float, nheads, d_model, d_head> W;
  dimsum::grad::tape t;
  auto e = E(t);
  auto w = W(t);
#ifdef DIMSUM_SHOULD_FAIL
  e.retain_grad();
#else
  w.retain_grad();
#endif
  t.backward(dimsum::sum<nheads, d_model, d_head>(w * e));
}
