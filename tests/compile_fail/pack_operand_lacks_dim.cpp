// A tensor given to pack lacks a dim the pattern names; the result bound
// as users bind it (`auto [packed, shapes]`), which must add no second
// error ("cannot decompose invalid_expression").
// EXPECT: dimsum: a tensor given to pack or unpack lacks a dim that the pattern names
// EXPECT: pack_operand_lacks_a_dim_of_the_pattern<dimsum::label<(dimsum::)?fixed_string<[0-9]+>{"batch"}>, dimsum::operand<1> ?, dimsum::dims<nheads, d_model, d_head> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
  w_t w;
  dimsum::tensor<float, batch, d_model> y(batch{2});
#ifdef DIMSUM_SHOULD_FAIL
  auto [r, s] = dimsum::pack<"batch * d_model", k_posn>(x, w);
#else
  auto [r, s] = dimsum::pack<"batch * d_model", k_posn>(x, y);
#endif
  (void)r;
  (void)s;
}
