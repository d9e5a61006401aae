// As grad_fused_attention_value_types.cpp, with the result assigned to a declared type, as users
// write it (`grad::var<float, batch, q_posn, nheads, d_head> z = ...`): still exactly one error.
// grad::fused_attention with a double q and float k and v.
// EXPECT: dimsum: grad::fused_attention\(q, k, v, f\) needs q, k and v of one value type
// EXPECT: fused_attention_operands_have_different_value_types<double, float, float>
#include "common.hpp"
#include <dimsum/grad/grad.hpp>

using k_t = dimsum::tensor<float, batch, k_posn, nheads, d_head>;

int main() {
  dimsum::grad::tape t;
#ifdef DIMSUM_SHOULD_FAIL
  auto q = t.watch(dimsum::tensor<double, batch, q_posn, nheads, d_head>(batch{1}, q_posn{4}));
#else
  auto q = t.watch(dimsum::tensor<float, batch, q_posn, nheads, d_head>(batch{1}, q_posn{4}));
#endif
  auto k = t.watch(k_t(batch{1}, k_posn{4}));
  auto v = t.watch(k_t(batch{1}, k_posn{4}));
  dimsum::grad::var<float, batch, q_posn, nheads, d_head> z = dimsum::grad::fused_attention(q, k, v, [](const auto& q, const auto& k, const auto& v) {
    return dimsum::einsum<"batch nheads q_posn k_posn, batch k_posn nheads d_head -> batch q_posn nheads d_head">(
        dimsum::softmax<k_posn>(
            dimsum::einsum<"batch q_posn nheads d_head, batch k_posn nheads d_head -> batch nheads q_posn k_posn">(q, k)),
        v);
  });
  (void)z;
}
