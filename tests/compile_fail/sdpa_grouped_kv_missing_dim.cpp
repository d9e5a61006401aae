// nn::scaled_dot_product_attention grouped as grouped_kv<nheads, kv_heads>
// whose k has q's heads instead of kv_heads.
// EXPECT: dimsum: attention operand lacks a dim it needs
// EXPECT: attention_operand_lacks_a_dim<dimsum::chars<'k'>, kv_heads
#include "common.hpp"
#include <dimsum/nn/scaled_dot_product_attention.hpp>

DIMSUM_DIM(kv_heads);

int main() {
  dimsum::tensor<float, batch, q_posn, nheads, d_head> q(batch{1}, q_posn{2});
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<float, batch, k_posn, nheads, d_head> k(batch{1}, k_posn{3});
#else
  dimsum::tensor<float, batch, k_posn, kv_heads, d_head> k(batch{1}, k_posn{3}, kv_heads{1});
#endif
  auto out = dimsum::nn::scaled_dot_product_attention<q_posn, k_posn, d_head,
                                                      dimsum::nn::grouped_kv<nheads, kv_heads>>(q, k, k);
  (void)out;
}
