// ring_attention contracting a dim that q does not have (d_model instead of d_head).
// EXPECT: dimsum: dist::ring_attention<D>\(q, k, v\) needs q with \(batch dims..., its query position, D\)
// EXPECT: ring_attention_operands_do_not_fit<
#include "common.hpp"

int main() {
  dist::mesh<model> m(MPI_COMM_WORLD, model{1});
  dimsum::tensor<float, q_posn, d_head> q(q_posn{4});
  dimsum::tensor<float, k_posn, d_head> k(k_posn{4});
  const auto qs = dist::shard<dist::split<q_posn, model>>(m, q);
  const auto ks = dist::shard<dist::split<k_posn, model>>(m, k);
#ifdef DIMSUM_SHOULD_FAIL
  auto o = dist::ring_attention<d_model>(qs, ks, ks);
#else
  auto o = dist::ring_attention<d_head>(qs, ks, ks);
#endif
  (void)o;
}
