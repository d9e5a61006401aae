// As grad_layer_norm_missing_dim.cpp, with the result assigned to a declared type, as users
// write it (`grad::var<float, batch, posn, d_model> y = ...`): still exactly one error.
// layer_norm over a dim that the var does not have.
// EXPECT: dimsum: layer_norm over a dim that the tensor does not have
// EXPECT: layer_norm_dim_is_not_a_dim_of_the_tensor<d_head, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"
#include <dimsum/grad/grad.hpp>

int main() {
  dimsum::parameter<float, d_model> w(dimsum::tensor<float, d_model>::ones()), b(dimsum::tensor<float, d_model>{});
  dimsum::grad::tape t;
  auto x = t.watch(x_t(batch{2}, posn{3}));
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::grad::var<float, batch, posn, d_model> y = dimsum::layer_norm<d_head>(x, t.watch(w), t.watch(b));
#else
  dimsum::grad::var<float, batch, posn, d_model> y = dimsum::layer_norm<d_model>(x, t.watch(w), t.watch(b));
#endif
  t.backward(dimsum::sum<batch, posn, d_model>(y));
}
