// Grouped-query heads: 4 query heads cannot be split over 3 key/value heads.
// EXPECT: dimsum: a group's labels cannot split the static extent of the dim it stands for
// EXPECT: pattern_group_does_not_divide_its_dim<heads, dimsum::extent_c<4>, dimsum::labels<dimsum::label<(dimsum::)?fixed_string<[0-9]+>{"kv_heads"}>, dimsum::label<(dimsum::)?fixed_string<[0-9]+>{"group"}> ?>, dimsum::extent_c<3>, dimsum::operand<0> ?>
// EXPECT-CLANG: pattern_group_does_not_divide\.cpp:[0-9]+:[0-9]+: note
#include "common.hpp"

DIMSUM_DIM(heads, 4);
#ifdef DIMSUM_SHOULD_FAIL
DIMSUM_DIM(kv_heads, 3);
#else
DIMSUM_DIM(kv_heads, 2);
#endif

int main() {
  dimsum::tensor<float, batch, q_posn, heads, d_head> q(batch{1}, q_posn{2});
  dimsum::tensor<float, batch, k_posn, kv_heads, d_head> k(batch{1}, k_posn{2});
  auto s = dimsum::einsum<"batch q_posn (kv_heads group) d_head, batch k_posn kv_heads d_head -> batch kv_heads group q_posn k_posn">(q, k);
  (void)s;
}
