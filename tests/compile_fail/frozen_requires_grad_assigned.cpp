// p.requires_grad = true on a parameter frozen by its type: the runtime flag
// is for parameter<...>; the type says this one is frozen.
// EXPECT: dimsum: p.requires_grad = ... on a frozen_parameter
// EXPECT: a_frozen_parameter_cannot_be_unfrozen<dimsum::dims<nheads, d_model, d_head> ?>
#include "common.hpp"
#include <dimsum/grad/grad.hpp>

int main() {
  dimsum::frozen_parameter<float, nheads, d_model, d_head> E;
  dimsum::parameter<float, nheads, d_model, d_head> W;
#ifdef DIMSUM_SHOULD_FAIL
  E.requires_grad = true;
#else
  W.requires_grad = false;
#endif
  (void)E;
}
