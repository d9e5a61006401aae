// A reduce pattern that drops a dim without saying how to reduce it.
// EXPECT: dimsum: reduce needs an operation
// EXPECT: reduce_needs_an_operation<dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::reduce<"batch posn d_model -> batch d_model">(x);
#else
  auto r = dimsum::reduce<"batch posn d_model -> batch d_model", "sum">(x);
#endif
  (void)r;
}
