// A label the operand lacks while the term names every dim of the operand
// (no rename would help): the plain form of the error, without a suggestion.
// EXPECT: dimsum: einsum label is not a dim of its operand; each term must list
// EXPECT: einsum_label_is_not_a_dim_of_its_operand<dimsum::label<(dimsum::)?fixed_string<5>{"posx"}>, dimsum::operand<0>, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
  w_t w;
#ifdef DIMSUM_SHOULD_FAIL
  qkv_t q = dimsum::einsum<"batch posn d_model posx, nheads d_model d_head -> batch posn nheads d_head">(x, w);
#else
  qkv_t q = dimsum::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w);
#endif
  (void)q;
}
