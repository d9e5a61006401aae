// a kv_cache whose position dim is not among its dims.
// EXPECT: dimsum: kv_cache<T, Pos, Dims...> needs Pos among Dims
// EXPECT: kv_cache_position_dim_is_not_one_of_its_dims<q_posn ?,
#include "common.hpp"

int main() {
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::kv_cache<float, q_posn, batch, k_posn, nheads, d_head> cache(batch{1}, k_posn{8});
#else
  dimsum::kv_cache<float, k_posn, batch, k_posn, nheads, d_head> cache(batch{1}, k_posn{8});
#endif
  (void)cache.size();
}
