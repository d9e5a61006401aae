// As grad_fused_attention_not_vars.cpp, with the result assigned to a declared type, as users
// write it (`grad::var<float, batch, q_posn, nheads, d_head> z = ...`): still exactly one error.
// grad::fused_attention given a tensor for k: nothing would record its gradient.
// EXPECT: dimsum: grad::fused_attention\(q, k, v, f\) needs grad::vars q, k and v
// EXPECT: fused_attention_needs_vars<dimsum::dims<batch, q_posn, nheads, d_head> ?, dimsum::dims<batch, k_posn, nheads, d_head> ?, dimsum::dims<batch, k_posn, nheads, d_head> ?>
#include "common.hpp"
#include <dimsum/grad/grad.hpp>

using q_t = dimsum::tensor<float, batch, q_posn, nheads, d_head>;
using k_t = dimsum::tensor<float, batch, k_posn, nheads, d_head>;

int main() {
  dimsum::grad::tape t;
  auto q = t.watch(q_t(batch{1}, q_posn{4}));
  const k_t k0(batch{1}, k_posn{4});
  auto k = t.watch(k0);
  auto v = t.watch(k0);
  auto attend = [](const auto& q, const auto& k, const auto& v) {
    return dimsum::einsum<"batch nheads q_posn k_posn, batch k_posn nheads d_head -> batch q_posn nheads d_head">(
        dimsum::softmax<k_posn>(
            dimsum::einsum<"batch q_posn nheads d_head, batch k_posn nheads d_head -> batch nheads q_posn k_posn">(q, k)),
        v);
  };
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::grad::var<float, batch, q_posn, nheads, d_head> z = dimsum::grad::fused_attention(q.value(), k0, k0, attend);
#else
  dimsum::grad::var<float, batch, q_posn, nheads, d_head> z = dimsum::grad::fused_attention(q, k, v, attend);
#endif
  (void)z;
}
