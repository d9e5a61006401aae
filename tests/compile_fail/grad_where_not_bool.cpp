// where on gradient vars with a float condition: one error, as on tensors.
// EXPECT: dimsum: where needs a condition of bool values
// EXPECT: where_condition_is_not_boolean<float>
#include "common.hpp"
#include <dimsum/grad/grad.hpp>

int main() {
  dimsum::grad::tape tape;
  auto v = tape.watch(x_t::ones(batch{2}, posn{3}));
  x_t f = x_t::ones(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::where(f, v, 0.0f);
#else
  auto r = dimsum::where(f > 0.0f, v, 0.0f);
#endif
  (void)r;
}
