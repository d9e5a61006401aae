// p.grad.data() of a frozen_parameter (a loop over a gradient written for
// every parameter of a model): there is no gradient to read.
// EXPECT: dimsum: p.grad of a frozen_parameter
// EXPECT: a_frozen_parameter_has_no_grad<dimsum::dims<nheads, d_model, d_head> ?>
#include "common.hpp"
#include <dimsum/grad/grad.hpp>

int main() {
  dimsum::frozen_parameter<float, nheads, d_model, d_head> E;
#ifdef DIMSUM_SHOULD_FAIL
  const float* g = E.grad.data();
#else
  const float* g = E.value.data();
#endif
  (void)g;
}
