// nn::scaled_dot_product_attention with an int mask: neither bool (true =
// attend) nor of the scores' value type (added to the scores).
// EXPECT: dimsum: scaled_dot_product_attention: the mask is bool
// EXPECT: attention_mask_is_neither_bool_nor_of_the_scores_type<int, float>
#include "common.hpp"
#include <dimsum/nn/scaled_dot_product_attention.hpp>

int main() {
  dimsum::tensor<float, batch, q_posn, d_head> q(batch{1}, q_posn{2});
  dimsum::tensor<float, batch, k_posn, d_head> k(batch{1}, k_posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<int, q_posn, k_posn> mask(q_posn{2}, k_posn{3});
#else
  dimsum::tensor<float, q_posn, k_posn> mask(q_posn{2}, k_posn{3});
#endif
  auto out = dimsum::nn::scaled_dot_product_attention<q_posn, k_posn, d_head>(q, k, k, mask);
  (void)out;
}
