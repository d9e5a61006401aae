// As einsum_ellipsis_twice.cpp, with the result assigned to a declared tensor type: still one error.
// EXPECT: dimsum: an einsum term has '...' twice
// EXPECT: einsum_term_has_two_ellipses<dimsum::input_term<0> ?>
// EXPECT-CLANG: einsum_ellipsis_twice_declared\.cpp:[0-9]+:[0-9]+: note
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<float, posn, batch, d_model> y = dimsum::rearrange<"... posn ... -> posn ...">(x);
#else
  dimsum::tensor<float, posn, batch, d_model> y = dimsum::rearrange<"... posn -> posn ...">(x);
#endif
  (void)y;
}
