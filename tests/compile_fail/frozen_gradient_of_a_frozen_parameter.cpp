// gradient(p) of a parameter frozen by its type (nn::frozen<parameter<...>>,
// a table kept fixed while the rest is fine-tuned): it gets no gradient, and
// its type says so.
// EXPECT: dimsum: gradient\(p\) of a frozen_parameter
// EXPECT: gradient_of_a_frozen_parameter<dimsum::dims<nheads, d_model, d_head> ?>
#include "common.hpp"
#include <dimsum/grad/grad.hpp>

int main() {
  dimsum::frozen_parameter<float, nheads, d_model, d_head> E;
  dimsum::parameter<float, nheads, d_model, d_head> W;
  dimsum::grad::tape t;
  t.backward(dimsum::sum<nheads, d_model, d_head>(t.watch(W) * t.watch(E)));
#ifdef DIMSUM_SHOULD_FAIL
  const auto& g = dimsum::gradient(E);
#else
  const auto& g = dimsum::gradient(W);
#endif
  (void)g;
}
