// Programs that go wrong on some ranks, run by tests/mpi/expect_failure.cmake
// under mpirun: each must end with a clear message and a non-zero exit
// within the test's timeout, never hang.
//   failing_ranks throw    rank 1 throws while rank 0 waits in an all_reduce
//   failing_ranks extent   the last rank's block has another extent
//   failing_ranks die      rank 1 exits without finalising MPI
#include <mpi.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include <dimsum/dimsum.hpp>
#include <dimsum/distributed/dist.hpp>

namespace dist = dimsum::dist;

namespace {
DIMSUM_MESH_AXIS(model);
DIMSUM_DIM(nheads);
DIMSUM_DIM(d_model);
}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const std::string mode = argc > 1 ? argv[1] : "";
  const int rc = dist::abort_on_error(MPI_COMM_WORLD, [&] {
    int n = 0, me = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    dist::mesh<model> m(MPI_COMM_WORLD, model{n});
    dimsum::tensor<float, nheads, d_model> full(nheads{std::size_t(2 * n)}, d_model{3});
    full.fill(1.0f);
    const auto s = dist::shard<dist::split<nheads, model>>(m, full);
    if (mode == "throw" && me == 1) throw std::runtime_error("a failure on rank 1 (test)");
    if (mode == "die" && me == 1) std::_Exit(3);
    const std::size_t width = mode == "extent" && me == n - 1 ? 4 : 3;
    const auto mine = dist::from_local<dist::partial<model, nheads>>(
        m, dimsum::tensor<float, nheads, d_model>(nheads{2}, d_model{width}));
    const auto total = dist::all_reduce(dist::einsum<"nheads d_model -> d_model">(s));
    (void)mine;
    (void)total;
    return 0;
  });
  MPI_Finalize();
  return rc;
}
