// A var result assigned to a tensor (PyTorch: a tensor that requires grad is
// still a tensor): one dimsum error naming both dim lists (it was the
// compiler's "conversion from var<...> to non-scalar type tensor<...>").
// EXPECT: dimsum: a grad::var is not a tensor
// EXPECT: a_var_is_not_a_tensor<dimsum::dims<batch, posn, d_model>, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"
#include <dimsum/grad/grad.hpp>

int main() {
  dimsum::grad::tape tape;
  auto v = tape.watch(x_t::ones(batch{2}, posn{3}));
#ifdef DIMSUM_SHOULD_FAIL
  x_t y = v * 2.0f;
#else
  x_t y = (v * 2.0f).value();
#endif
  (void)y;
}
