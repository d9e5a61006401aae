// dot_product_attention with the same dim as query and key positions.
// EXPECT: dimsum: attention needs different dims for query and key positions
// EXPECT: attention_query_and_key_positions_share_a_name<posn>
#include "common.hpp"
#include <dimsum/nn/attention.hpp>

int main() {
  qkv_t q(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::nn::dot_product_attention<posn, posn, d_head>(q, q, q);
#else
  auto r = dimsum::nn::dot_product_attention<q_posn, posn, d_head>(dimsum::eval(dimsum::rename<posn, q_posn>(q)), q, q);
#endif
  (void)r;
}
