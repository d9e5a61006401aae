// A user function that states the dims it needs with require_dims, called
// with a tensor of other dims: the error is a dimsum message naming both.
// EXPECT: dimsum: the tensor's dims are not the dims this function requires
// EXPECT: tensor_dims_are_not_the_required_dims<dimsum::dims<batch, posn, d_model>, dimsum::dims<batch, posn, nheads, d_head> ?>
#include "common.hpp"

// The condition is the pure trait; require_dims reports in the other branch
// (as a condition it would be a second error on clang).
template <class X>
float residual_norm(const X& x) {
  if constexpr (dimsum::has_dims<X, batch, posn, d_model>) {
    return dimsum::eval(dimsum::sum<batch, posn, d_model>(x * x)).item();
  } else {
    dimsum::require_dims<X, batch, posn, d_model>();  // one error, naming both dim lists
    return 0.0f;
  }
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
