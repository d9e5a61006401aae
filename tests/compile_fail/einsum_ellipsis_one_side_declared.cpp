// As einsum_ellipsis_one_side.cpp, with the result assigned to a declared tensor type: still one error.
// EXPECT: dimsum: '...' appears on one side of '->' only
// EXPECT: einsum_ellipsis_on_one_side_of_the_arrow_only<dimsum::input_term<0> ?, dimsum::dims<batch, posn, d_model> ?>
// EXPECT-CLANG: einsum_ellipsis_one_side_declared\.cpp:[0-9]+:[0-9]+: note
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<float, d_model, batch, posn> y = dimsum::rearrange<"... d_model -> d_model">(x);
#else
  dimsum::tensor<float, d_model, batch, posn> y = dimsum::rearrange<"... d_model -> d_model ...">(x);
#endif
  (void)y;
}
