// nn::scaled_dot_product_attention whose v has two dims of its own (heads
// that q lacks, and the value dim): the output could not say where they go.
// EXPECT: dimsum: scaled_dot_product_attention: v must have the key positions, one dim of its own
// EXPECT: attention_value_needs_one_dim_of_its_own<dimsum::dims<.*nheads.*d_head
#include "common.hpp"
#include <dimsum/nn/scaled_dot_product_attention.hpp>

int main() {
  dimsum::tensor<float, batch, q_posn, d_head> q(batch{1}, q_posn{2});
  dimsum::tensor<float, batch, k_posn, d_head> k(batch{1}, k_posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<float, batch, k_posn, nheads, d_head> v(batch{1}, k_posn{3});
#else
  dimsum::tensor<float, batch, k_posn, d_head> v(batch{1}, k_posn{3});
#endif
  auto out = dimsum::nn::scaled_dot_product_attention<q_posn, k_posn, d_head>(q, k, v);
  (void)out;
}
