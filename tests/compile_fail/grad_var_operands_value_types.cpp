// A double var plus a float tensor (the same refusal for two vars, and for
// minimum, maximum, pow, clamp, where, * - /): one error naming both value
// types, not "assigning needs the same value type" from inside the gradient
// rule, where the user assigned nothing.
// EXPECT: dimsum: an operation on grad::vars .* needs its var and tensor operands of one value type
// EXPECT: var_operands_need_the_same_value_type<double, float>
#include "common.hpp"
#include <dimsum/grad/grad.hpp>

int main() {
  dimsum::grad::tape tape;
  auto v = tape.watch(dimsum::tensor<double, batch, posn, d_model>::ones(batch{2}, posn{3}));
#ifdef DIMSUM_SHOULD_FAIL
  const x_t bias = x_t::ones(batch{2}, posn{3});
#else
  const auto bias = dimsum::tensor<double, batch, posn, d_model>::ones(batch{2}, posn{3});
#endif
  auto r = v + bias;
  (void)r;
}
