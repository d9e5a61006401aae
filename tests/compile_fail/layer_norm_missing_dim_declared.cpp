// As layer_norm_missing_dim.cpp, with the result assigned to a declared type, as users
// write it (`x_t y = ...`): still exactly one error.
// layer_norm of a tensor over a dim that the tensor does not have.
// EXPECT: dimsum: layer_norm over a dim that the tensor does not have
// EXPECT: layer_norm_dim_is_not_a_dim_of_the_tensor<d_head, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
  auto w = dimsum::tensor<float, d_model>::ones();
  dimsum::tensor<float, d_model> b;
#ifdef DIMSUM_SHOULD_FAIL
  x_t y = dimsum::layer_norm<d_head>(x, w, b);
#else
  x_t y = dimsum::layer_norm<d_model>(x, w, b);
#endif
  (void)y;
}
