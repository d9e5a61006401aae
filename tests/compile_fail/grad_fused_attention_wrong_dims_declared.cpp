// As grad_fused_attention_wrong_dims.cpp, with the result assigned to a declared type, as users
// write it (`grad::var<float, batch, q_posn, nheads, d_head> z = ...`): still exactly one error.
// grad::fused_attention whose f treats k as having query positions: the
// score einsum's term for k names q_posn, which k does not have. One error,
// from the einsum inside f; fused_attention adds none.
// EXPECT: dimsum: einsum label is not a dim of its operand, which has a dim the term leaves out
// EXPECT: einsum_label_is_not_a_dim_of_its_operand_did_you_mean_rename<dimsum::label<(dimsum::)?fixed_string<7>{"q_posn"}>, dimsum::operand<1>, dimsum::dims<batch, k_posn, nheads, d_head> ?, dimsum::fix::rename<k_posn
#include "common.hpp"
#include <dimsum/grad/grad.hpp>

using q_t = dimsum::tensor<float, batch, q_posn, nheads, d_head>;
using k_t = dimsum::tensor<float, batch, k_posn, nheads, d_head>;

int main() {
  dimsum::grad::tape t;
  auto q = t.watch(q_t(batch{1}, q_posn{4}));
  auto k = t.watch(k_t(batch{1}, k_posn{4}));
  auto v = t.watch(k_t(batch{1}, k_posn{4}));
  dimsum::grad::var<float, batch, q_posn, nheads, d_head> z = dimsum::grad::fused_attention(q, k, v, [](const auto& q, const auto& k, const auto& v) {
#ifdef DIMSUM_SHOULD_FAIL
    auto scores = dimsum::einsum<"batch q_posn nheads d_head, batch q_posn nheads d_head -> batch nheads q_posn k_posn">(q, k);
#else
    auto scores = dimsum::einsum<"batch q_posn nheads d_head, batch k_posn nheads d_head -> batch nheads q_posn k_posn">(q, k);
#endif
    return dimsum::einsum<"batch nheads q_posn k_posn, batch k_posn nheads d_head -> batch q_posn nheads d_head">(
        dimsum::softmax<k_posn>(scores), v);
  });
  (void)z;
}
