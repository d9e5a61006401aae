// nn::multi_head_attention called as self-attention with one tensor for q,
// k and v: query and key positions share the name posn.
// EXPECT: dimsum: attention needs different dims for query and key positions
// EXPECT: attention_query_and_key_positions_share_a_name<dimsum::dims<batch, posn> ?>
#include "common.hpp"
#include <dimsum/nn/nn.hpp>

int main() {
  dimsum::nn::multi_head_attention<float, d_model, nheads, d_head> mha(nheads{2}, d_model{});
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = mha(x, x, x);
#else
  auto k = dimsum::rename<posn, k_posn>(x);
  auto r = mha(x, k, k);
#endif
  (void)r;
}
