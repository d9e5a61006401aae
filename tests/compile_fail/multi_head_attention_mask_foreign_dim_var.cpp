// nn::multi_head_attention called on vars with a mask that has a dim the
// scores lack (posn: the mask was built for the unrenamed positions). The
// tape form has two paths (fused, and op by op for dropout): one error.
// EXPECT: dimsum: masked_fill mask has a dim that the tensor lacks
// EXPECT: masked_fill_mask_has_a_dim_the_tensor_lacks<posn, dimsum::dims<batch, posn> ?, dimsum::dims<batch, heads, q_posn, k_posn> ?>
#include "common.hpp"
#include <dimsum/nn/attention.hpp>

DIMSUM_DIM(emb);
DIMSUM_DIM(heads);
DIMSUM_DIM(dk);

int main() {
  dimsum::nn::multi_head_attention<float, emb, heads, dk> mha(heads{2}, emb{4});
  dimsum::grad::tape t;
  auto q = t.constant(dimsum::tensor<float, batch, q_posn, emb>(batch{1}, q_posn{3}, emb{4}));
  auto kv = t.constant(dimsum::tensor<float, batch, k_posn, emb>(batch{1}, k_posn{2}, emb{4}));
#ifdef DIMSUM_SHOULD_FAIL
  const dimsum::tensor<bool, batch, posn> pad(batch{1}, posn{2});
#else
  const dimsum::tensor<bool, batch, k_posn> pad(batch{1}, k_posn{2});
#endif
  auto out = mha(q, kv, kv, pad);
  (void)out;
}
