// Asking for a parameter's gradient with dims other than its own.
// EXPECT: dimsum: gradient<Dims...>\(x\) asks for dims that differ from x's dims
// EXPECT: gradient_dims_differ_from_the_variable_dims<dimsum::dims<nheads, d_head, d_model>, dimsum::dims<nheads, d_model, d_head> ?>
#include "common.hpp"
#include <dimsum/grad/grad.hpp>

int main() {
  dimsum::parameter<float, nheads, d_model, d_head> w(w_t::ones());
#ifdef DIMSUM_SHOULD_FAIL
  auto g = dimsum::gradient<nheads, d_head, d_model>(w);
#else
  auto g = dimsum::gradient<nheads, d_model, d_head>(w);
#endif
  (void)g;
}
