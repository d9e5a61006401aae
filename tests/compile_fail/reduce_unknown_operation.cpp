// reduce with an operation that is not one of the named reductions.
// EXPECT: dimsum: reduce's operation is not one of sum, mean, max, min, prod, any, all, logsumexp
// EXPECT: reduce_operation_is_not_a_reduction<dimsum::label<(dimsum::)?fixed_string<[0-9]+>{"maen"}> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::reduce<"batch posn d_model -> batch d_model", "maen">(x);
#else
  auto r = dimsum::reduce<"batch posn d_model -> batch d_model", "mean">(x);
#endif
  (void)r;
}
