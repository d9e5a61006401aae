// ring_attention with the keys split over another mesh axis than the queries.
// EXPECT: dimsum: dist::ring_attention needs q split over a mesh axis along its query position dim
// EXPECT: ring_attention_needs_position_splits<
#include "common.hpp"

int main() {
  dist::mesh<model, data> m(MPI_COMM_WORLD, model{1}, data{1});
  dimsum::tensor<float, q_posn, d_head> q(q_posn{4});
  dimsum::tensor<float, k_posn, d_head> k(k_posn{4});
  const auto qs = dist::shard<dist::split<q_posn, model>>(m, q);
#ifdef DIMSUM_SHOULD_FAIL
  const auto ks = dist::shard<dist::split<k_posn, data>>(m, k);
#else
  const auto ks = dist::shard<dist::split<k_posn, model>>(m, k);
#endif
  auto o = dist::ring_attention<d_head>(qs, ks, ks);
  (void)o;
}
