// x += q where q has dims x lacks (PyTorch would broadcast x up, and fail
// in place): t += e is t = t + e, whose dims are not t's.
// EXPECT: dimsum: assigning an expression to a tensor needs the same dims
// EXPECT: assignment_between_different_dims<dimsum::dims<batch, posn, d_model>, dimsum::dims<batch, posn, d_model, nheads, d_head> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  qkv_t q(batch{2}, posn{3});
  x += q;
#else
  dimsum::tensor<float, batch, posn> m(batch{2}, posn{3});
  x += m;
#endif
}
