// As grad_log_softmax_missing_dim.cpp, with the result assigned to a declared type, as users
// write it (`grad::var<float, batch, posn, d_model> y = ...`): still exactly one error.
// log_softmax over a dim that the var does not have.
// EXPECT: dimsum: log_softmax over a dim that the tensor does not have
// EXPECT: log_softmax_dim_is_not_a_dim_of_the_tensor<k_posn, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"
#include <dimsum/grad/grad.hpp>

int main() {
  dimsum::grad::tape t;
  auto x = t.watch(x_t(batch{2}, posn{3}));
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::grad::var<float, batch, posn, d_model> y = dimsum::log_softmax<k_posn>(x);
#else
  dimsum::grad::var<float, batch, posn, d_model> y = dimsum::log_softmax<d_model>(x);
#endif
  t.backward(dimsum::sum<batch, posn, d_model>(y));
}
