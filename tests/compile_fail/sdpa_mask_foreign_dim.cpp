// nn::scaled_dot_product_attention with a mask over a dim the scores lack
// (the value dim).
// EXPECT: dimsum: scaled_dot_product_attention: the mask's dims
// EXPECT: attention_mask_has_a_dim_the_scores_lack<dimsum::dims<.*batch.*d_value
#include "common.hpp"
#include <dimsum/nn/scaled_dot_product_attention.hpp>

DIMSUM_DIM(d_value);

int main() {
  dimsum::tensor<float, batch, q_posn, d_head> q(batch{1}, q_posn{2});
  dimsum::tensor<float, batch, k_posn, d_head> k(batch{1}, k_posn{3});
  dimsum::tensor<float, batch, k_posn, d_value> v(batch{1}, k_posn{3}, d_value{4});
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<bool, batch, d_value> keep(batch{1}, d_value{4});
#else
  dimsum::tensor<bool, batch, k_posn> keep(batch{1}, k_posn{3});
#endif
  auto out = dimsum::nn::scaled_dot_product_attention<q_posn, k_posn, d_head>(q, k, v, keep);
  (void)out;
}
