// The named spelling with the same output dim twice.
// EXPECT: dimsum: einsum output names the same dim twice
// EXPECT: einsum_output_names_a_dim_twice<posn>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
  w_t w;
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::einsum<batch, posn, posn>(x, w);
#else
  auto r = dimsum::einsum<batch, posn>(x, w);
#endif
  (void)r;
}
