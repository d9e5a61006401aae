// appending keys named with the query's position dim to a cache along k_posn.
// EXPECT: dimsum: kv_cache.append needs keys and values with the cache's dims
// EXPECT: kv_cache_append_with_other_dims<dimsum::dims<batch, k_posn, nheads, d_head>, dimsum::dims<batch, q_posn, nheads, d_head> ?>
#include "common.hpp"

int main() {
  dimsum::kv_cache<float, k_posn, batch, k_posn, nheads, d_head> cache(batch{1}, k_posn{8});
  dimsum::tensor<float, batch, k_posn, nheads, d_head> v(batch{1}, k_posn{1});
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<float, batch, q_posn, nheads, d_head> k(batch{1}, q_posn{1});
#else
  dimsum::tensor<float, batch, k_posn, nheads, d_head> k(batch{1}, k_posn{1});
#endif
  cache.append(k, v);
}
