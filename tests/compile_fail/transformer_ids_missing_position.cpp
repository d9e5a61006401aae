// nn::transformer given token ids over another position dim than the
// model's (its rotary attention runs along posn).
// EXPECT: dimsum: nn::transformer: the token ids need the model's position dim
// EXPECT: transformer_ids_lack_the_position_dim<.*posn
#include "common.hpp"
#include <cstdint>
#include <dimsum/nn/transformer.hpp>

DIMSUM_DIM(vocab);
DIMSUM_DIM(kv_heads);
DIMSUM_DIM(d_ff);

int main() {
  dimsum::nn::transformer<float, vocab, posn, d_model, nheads, kv_heads, d_head, d_ff> m(
      vocab{11}, d_model{}, nheads{}, kv_heads{1}, d_head{}, d_ff{12}, 1);
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<std::int64_t, batch, q_posn> ids(batch{1}, q_posn{3});
#else
  dimsum::tensor<std::int64_t, batch, posn> ids(batch{1}, posn{3});
#endif
  auto logits = m(ids);
  (void)logits;
}
