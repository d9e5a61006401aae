// select on a gradient var along a dim the var does not have: one error, as
// on a tensor.
// EXPECT: dimsum: argument names a dim that the tensor does not have
// EXPECT: argument_is_not_a_dim_of_the_tensor<nheads, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"
#include <dimsum/grad/grad.hpp>

int main() {
  dimsum::grad::tape tape;
  auto v = tape.watch(x_t::ones(batch{2}, posn{3}));
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::select<nheads>(v, 0);
#else
  auto r = dimsum::select<posn>(v, 0);
#endif
  (void)r;
}
