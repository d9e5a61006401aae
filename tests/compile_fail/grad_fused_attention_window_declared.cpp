// As grad_fused_attention_window.cpp, with the result assigned to a declared type, as users
// write it (`grad::var<float, batch, posn, nheads, d_head> z = ...`): still exactly one error.
// grad::fused_attention over a sliding-window attention: the fused backward
// differentiates scales, causal masks and boolean masks only, so a window
// (or an additive bias) is a compile error rather than a wrong gradient.
// EXPECT: dimsum: grad::fused_attention differentiates scales, causal_mask and boolean masks only
// EXPECT: fused_attention_backward_lacks_a_stage<k_posn ?, dimsum::plan::fusion::window_mask_stage>
#include "common.hpp"
#include <dimsum/grad/grad.hpp>
#include <dimsum/ops/window_mask.hpp>

int main() {
  dimsum::grad::tape t;
  auto q = t.watch(qkv_t(batch{1}, posn{4}));
  auto k = t.watch(dimsum::tensor<float, batch, k_posn, nheads, d_head>(batch{1}, k_posn{4}));
  auto v = t.watch(dimsum::tensor<float, batch, k_posn, nheads, d_head>(batch{1}, k_posn{4}));
  dimsum::grad::var<float, batch, posn, nheads, d_head> z = dimsum::grad::fused_attention(q, k, v, [](const auto& q, const auto& k, const auto& v) {
    auto s = dimsum::einsum<"batch posn nheads d_head, batch k_posn nheads d_head -> batch nheads posn k_posn">(q, k);
#ifdef DIMSUM_SHOULD_FAIL
    auto m = dimsum::window_mask<posn, k_posn>(std::move(s), 2, -1e9f);
#else
    auto m = dimsum::causal_mask<posn, k_posn>(std::move(s), -1e9f);
#endif
    return dimsum::einsum<"batch nheads posn k_posn, batch k_posn nheads d_head -> batch posn nheads d_head">(
        dimsum::softmax<k_posn>(std::move(m)), v);
  });
  (void)z;
}
