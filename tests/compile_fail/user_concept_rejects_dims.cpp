// A user function constrained with tensor_of<batch, posn, d_model>, called
// with a tensor of other dims: the compiler's own concept diagnostic names
// the required dims.
// EXPECT: tensor_of<.*, batch, posn, d_model>
// EXPECT: no matching function for call to .*residual_norm
#include "common.hpp"

template <dimsum::tensor_of<batch, posn, d_model> X>
float residual_norm(const X& x) {
  return dimsum::eval(dimsum::sum<batch, posn, d_model>(x * x)).item();
}

int main() {
  qkv_t q(batch{2}, posn{3});
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = residual_norm(q);
#else
  auto r = residual_norm(x);
  (void)q;
#endif
  (void)r;
}
