// dot_product_attention whose k lacks the key-position dim.
// EXPECT: dimsum: attention operand lacks a dim it needs
// EXPECT: attention_operand_lacks_a_dim<dimsum::chars<'k'>, k_posn
#include "common.hpp"
#include <dimsum/nn/attention.hpp>

int main() {
  dimsum::tensor<float, batch, q_posn, d_head> qq(batch{1}, q_posn{2}, d_head{10});
  dimsum::tensor<float, batch, k_posn, d_head> kk(batch{1}, k_posn{2}, d_head{10});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::nn::dot_product_attention<q_posn, k_posn, d_head>(qq, qq, kk);
#else
  auto r = dimsum::nn::dot_product_attention<q_posn, k_posn, d_head>(qq, kk, kk);
#endif
  (void)r;
}
