// As einsum_named_output_twice.cpp, with the result assigned to a declared tensor type, as
// users write it (`dimsum::tensor<float, batch, posn> q = ...`): still exactly one error.
// The named spelling with the same output dim twice.
// EXPECT: dimsum: einsum output names the same dim twice
// EXPECT: einsum_output_names_a_dim_twice<posn>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
  w_t w;
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<float, batch, posn> r = dimsum::einsum<batch, posn, posn>(x, w);
#else
  dimsum::tensor<float, batch, posn> r = dimsum::einsum<batch, posn>(x, w);
#endif
  (void)r;
}
