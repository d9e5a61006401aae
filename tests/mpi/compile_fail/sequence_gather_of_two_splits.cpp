// dist::sequence_gather<posn> of a var split over posn and also over batch:
// its result is replicated over posn's mesh axis and has no place for the
// batch split.
// EXPECT: dimsum: sequence_gather<D>[(]s[)] needs s split over D and placed no other way
// EXPECT: sequence_gather_needs_a_var_split_over_d_alone<posn ?, std::tuple<
// EXPECT: sequence_gather_of_two_splits\.cpp:19:
#include "common.hpp"

DIMSUM_MESH_AXIS(rows);

int main() {
  dist::mesh<model, rows> m(MPI_COMM_WORLD, model{1}, rows{1});
  dimsum::grad::tape t;
  const auto x = t.watch(dimsum::tensor<float, batch, posn, d_model>(batch{2}, posn{4}));
  const auto by_posn = dist::shard<dist::split<posn, model>>(m, x);
  const auto by_both = dist::shard<dist::split<posn, model>, dist::split<batch, rows>>(m, x);
  (void)by_posn;
#ifdef DIMSUM_SHOULD_FAIL
  const auto g = dist::sequence_gather<posn>(by_both);
#else
  const auto g = dist::sequence_gather<posn>(by_posn);
  (void)by_both;
#endif
  (void)g;
}
