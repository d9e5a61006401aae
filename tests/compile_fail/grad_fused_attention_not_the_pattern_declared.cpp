// As grad_fused_attention_not_the_pattern.cpp, with the result assigned to a declared type, as users
// write it (`grad::var<float, batch, q_posn, nheads, d_head> z = ...`): still exactly one error.
// grad::fused_attention whose f forgets the softmax: not attention-shaped,
// so there is no fused kernel to run.
// EXPECT: dimsum: grad::fused_attention\(q, k, v, f\): f must return einsum\(softmax<K>
// EXPECT: fused_attention_f_does_not_return_the_attention_pattern<dimsum::dims<batch, q_posn, nheads, d_head> ?, dimsum::dims<batch, q_posn, nheads, d_head> ?, dimsum::dims<batch, k_posn, nheads, d_head> ?, dimsum::dims<batch, k_posn, nheads, d_head> ?>
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
    auto scores = dimsum::einsum<"batch q_posn nheads d_head, batch k_posn nheads d_head -> batch nheads q_posn k_posn">(q, k);
#ifdef DIMSUM_SHOULD_FAIL
    return dimsum::einsum<"batch nheads q_posn k_posn, batch k_posn nheads d_head -> batch q_posn nheads d_head">(scores, v);
#else
    return dimsum::einsum<"batch nheads q_posn k_posn, batch k_posn nheads d_head -> batch q_posn nheads d_head">(
        dimsum::softmax<k_posn>(scores), v);
#endif
  });
  (void)z;
}
