// nn::transformer given float token ids (an embedding reads integer ids).
// EXPECT: dimsum: nn::transformer: the token ids must be integers
// EXPECT: transformer_ids_are_not_integers<float, dimsum::dims<batch, posn> ?>
#include "common.hpp"
#include <cstdint>
#include <dimsum/nn/transformer.hpp>

DIMSUM_DIM(vocab);
DIMSUM_DIM(kv_heads);
DIMSUM_DIM(d_ff);

int main() {
  dimsum::nn::transformer<float, vocab, posn, d_model, nheads, kv_heads, d_head, d_ff> m(
      vocab{11}, d_model{}, nheads{}, kv_heads{1}, d_head{}, d_ff{12}, 1);
  dimsum::grad::tape t;
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<float, batch, posn> ids(batch{1}, posn{3});
#else
  dimsum::tensor<std::int64_t, batch, posn> ids(batch{1}, posn{3});
#endif
  auto logits = m(t, ids);
  (void)logits;
}
