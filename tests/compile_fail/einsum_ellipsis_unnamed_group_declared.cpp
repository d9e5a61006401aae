// As einsum_ellipsis_unnamed_group.cpp, with the result assigned to a declared tensor type: still one error.
// EXPECT: dimsum: a term with '...' splits an unnamed group; name the dim it splits
// EXPECT: einsum_ellipsis_term_has_an_unnamed_group<dimsum::input_term<0> ?>
// EXPECT-CLANG: einsum_ellipsis_unnamed_group_declared\.cpp:[0-9]+:[0-9]+: note
#include "common.hpp"

DIMSUM_DIM(hd);

int main() {
  dimsum::tensor<float, batch, posn, hd> x(batch{2}, posn{3}, hd{20});
#ifdef DIMSUM_SHOULD_FAIL
  qkv_t y = dimsum::rearrange<"... (nheads d_head) -> ... nheads d_head">(x, nheads{2});
#else
  qkv_t y = dimsum::rearrange<"... hd(nheads d_head) -> ... nheads d_head">(x, nheads{2});
#endif
  (void)y;
}
