// nn::rotary_attention<float> decoding with a key/value cache of doubles:
// a cache holds the module's value type, or bf16 for a float module.
// EXPECT: dimsum: nn::rotary_attention: a key/value cache holds the module's value type
// EXPECT: rotary_attention_cache_value_type_is_neither_the_modules_nor_bf16<float, double>
#include "common.hpp"
#include <dimsum/nn/rotary_attention.hpp>

DIMSUM_DIM(kv_heads);

int main() {
  using attn_t = dimsum::nn::rotary_attention<float, posn, d_model, nheads, kv_heads, d_head>;
  attn_t attn(d_model{}, nheads{}, kv_heads{1}, d_head{});
  x_t x(batch{1}, posn{1});
#ifdef DIMSUM_SHOULD_FAIL
  attn_t::cache_type_as<double, batch> cache(batch{1}, attn_t::key_posn{4}, kv_heads{1}, d_head{});
#else
  auto cache = attn.make_cache<dimsum::bf16>(4, batch{1});
#endif
  auto y = attn(x, cache);
  (void)y;
}
