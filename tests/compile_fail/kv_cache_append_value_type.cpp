// appending double values to a float cache.
// EXPECT: dimsum: kv_cache.append needs keys and values of the cache's value type
// EXPECT: kv_cache_append_with_another_value_type<float, double ?>
#include "common.hpp"

int main() {
  dimsum::kv_cache<float, k_posn, batch, k_posn, nheads, d_head> cache(batch{1}, k_posn{8});
  dimsum::tensor<float, batch, k_posn, nheads, d_head> k(batch{1}, k_posn{1});
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<double, batch, k_posn, nheads, d_head> v(batch{1}, k_posn{1});
#else
  dimsum::tensor<float, batch, k_posn, nheads, d_head> v(batch{1}, k_posn{1});
#endif
  cache.append(k, v);
}
