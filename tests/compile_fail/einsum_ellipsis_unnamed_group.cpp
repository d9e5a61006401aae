// an unnamed group in a term with '...': which dim it splits would depend on positions.
// EXPECT: dimsum: a term with '...' splits an unnamed group; name the dim it splits
// EXPECT: einsum_ellipsis_term_has_an_unnamed_group<dimsum::input_term<0> ?>
// EXPECT-CLANG: einsum_ellipsis_unnamed_group\.cpp:[0-9]+:[0-9]+: note
#include "common.hpp"

DIMSUM_DIM(hd);

int main() {
  dimsum::tensor<float, batch, posn, hd> x(batch{2}, posn{3}, hd{20});
#ifdef DIMSUM_SHOULD_FAIL
  auto y = dimsum::rearrange<"... (nheads d_head) -> ... nheads d_head">(x, nheads{2});
#else
  auto y = dimsum::rearrange<"... hd(nheads d_head) -> ... nheads d_head">(x, nheads{2});
#endif
  (void)y;
}
