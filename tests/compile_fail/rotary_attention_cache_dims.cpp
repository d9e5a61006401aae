// nn::rotary_attention decoding (batch, posn, d_model) inputs with a cache
// made for inputs without a batch dim.
// EXPECT: dimsum: nn::rotary_attention: the key/value cache's dims
// EXPECT: rotary_attention_cache_does_not_fit_the_input<dimsum::dims<.*, dimsum::dims<batch,
#include "common.hpp"
#include <dimsum/nn/rotary_attention.hpp>

DIMSUM_DIM(kv_heads);

int main() {
  dimsum::nn::rotary_attention<float, posn, d_model, nheads, kv_heads, d_head> attn(d_model{}, nheads{}, kv_heads{1},
                                                                                    d_head{});
  x_t x(batch{1}, posn{1});
#ifdef DIMSUM_SHOULD_FAIL
  auto cache = attn.make_cache(4);
#else
  auto cache = attn.make_cache(4, batch{1});
#endif
  auto y = attn(x, cache);
  (void)y;
}
