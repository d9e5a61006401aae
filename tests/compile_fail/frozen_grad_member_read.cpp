// p.grad of a frozen_parameter read as a tensor: there is no gradient.
// EXPECT: dimsum: p.grad of a frozen_parameter
// EXPECT: a_frozen_parameter_has_no_grad<dimsum::dims<nheads, d_model, d_head> ?>
#include "common.hpp"
#include <dimsum/grad/grad.hpp>

int main() {
  dimsum::frozen_parameter<float, nheads, d_model, d_head> E;
#ifdef DIMSUM_SHOULD_FAIL
  w_t g = E.grad;
#else
  w_t g = E.value;
#endif
  (void)g;
}
