// Q·Kᵀ written with q_posn and k_posn while both operands still have posn:
// the message suggests the rename (for the first operand it finds).
// EXPECT: dimsum: einsum label is not a dim of its operand, which has a dim the term leaves out
// EXPECT: einsum_label_is_not_a_dim_of_its_operand_did_you_mean_rename<dimsum::label<(dimsum::)?fixed_string<7>{"q_posn"}>, dimsum::operand<0>, dimsum::dims<batch, posn, nheads, d_head>
// EXPECT: fix::rename<posn, dimsum::label<(dimsum::)?fixed_string<7>{"q_posn"}> ?> ?\(dimsum::operand<0>\)
#include "common.hpp"

int main() {
  qkv_t q(batch{2}, posn{3});
  qkv_t k(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto s = dimsum::einsum<"batch q_posn nheads d_head, batch k_posn nheads d_head -> batch nheads q_posn k_posn">(q, k);
#else
  auto s = dimsum::einsum<"batch q_posn nheads d_head, batch k_posn nheads d_head -> batch nheads q_posn k_posn">(
      dimsum::rename<posn, q_posn>(q), dimsum::rename<posn, k_posn>(k));
#endif
  (void)s;
}
