// A float var assigned to a declared double var: value_type_mismatch, as
// for a tensor. (Its message suggests dimsum::cast<T>, which has no var
// overload: a var's value type is fixed by the tensors it is watched from.)
// EXPECT: dimsum: assigning needs the same value type
// EXPECT: value_type_mismatch<double, float>
#include "common.hpp"
#include <dimsum/grad/grad.hpp>

int main() {
  dimsum::grad::tape tape;
  auto v = tape.watch(x_t::ones(batch{2}, posn{3}));
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::grad::var<double, batch, posn, d_model> r = v * 2.0f;
#else
  dimsum::grad::var<float, batch, posn, d_model> r = v * 2.0f;
#endif
  (void)r;
}
