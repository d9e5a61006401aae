// As grad_fused_attention_bias_not_fused.cpp, with the result assigned to a declared type, as users
// write it (`grad::var<float, batch, q_posn, nheads, d_head> z = ...`): still exactly one error.
// grad::fused_attention whose bias on the scores is an einsum (a
// contraction owns a temporary, so the bias does not fuse): the attention
// takes the unfused path and there is no fused kernel to differentiate.
// Windows and lazy biases (alibi, relative_positions) are differentiated.
// EXPECT: dimsum: grad::fused_attention\(q, k, v, f\): f must return einsum\(softmax<K>
// EXPECT: fused_attention_f_does_not_return_the_attention_pattern<dimsum::dims<batch, q_posn, nheads, d_head> ?, dimsum::dims<batch, q_posn, nheads, d_head> ?, dimsum::dims<batch, k_posn, nheads, d_head> ?, dimsum::dims<batch, k_posn, nheads, d_head> ?>
#include "common.hpp"
#include <dimsum/grad/grad.hpp>
#include <dimsum/ops/alibi.hpp>
#include <dimsum/ops/window_mask.hpp>

using q_t = dimsum::tensor<float, batch, q_posn, nheads, d_head>;
using k_t = dimsum::tensor<float, batch, k_posn, nheads, d_head>;

int main() {
  dimsum::grad::tape t;
  auto q = t.watch(q_t(batch{1}, q_posn{4}));
  auto k = t.watch(k_t(batch{1}, k_posn{4}));
  auto v = t.watch(k_t(batch{1}, k_posn{4}));
  const auto slopes = dimsum::alibi_slopes<float>(nheads{2});
  const dimsum::tensor<float, q_posn, k_posn> distance = dimsum::relative_positions<float>(q_posn{4}, k_posn{4});
  dimsum::grad::var<float, batch, q_posn, nheads, d_head> z = dimsum::grad::fused_attention(q, k, v, [&](const auto& q, const auto& k, const auto& v) {
    auto scores = dimsum::einsum<"batch q_posn nheads d_head, batch k_posn nheads d_head -> batch nheads q_posn k_posn">(q, k);
#ifdef DIMSUM_SHOULD_FAIL
    auto bias = dimsum::einsum<"nheads, q_posn k_posn -> nheads q_posn k_posn">(slopes, distance);
#else
    auto bias = dimsum::outer(slopes, distance);
#endif
    return dimsum::einsum<"batch nheads q_posn k_posn, batch k_posn nheads d_head -> batch q_posn nheads d_head">(
        dimsum::softmax<k_posn>(dimsum::window_mask<q_posn, k_posn>(std::move(scores) + std::move(bias), 2, -1e9f)), v);
  });
  (void)z;
}
