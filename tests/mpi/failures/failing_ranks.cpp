// Programs that go wrong on some ranks, run by tests/mpi/expect_failure.cmake
// under mpirun: each must end with a clear message and a non-zero exit
// within the test's time limit, never hang.
//   failing_ranks throw        rank 1 throws while rank 0 waits in an all_reduce
//   failing_ranks extent       the last rank's block has another extent
//   failing_ranks die          rank 1 exits without finalising MPI
//   failing_ranks stuck        rank 1 is alive but sleeps instead of reaching an
//                              all_reduce; the others hit the 1.5 s deadline
//   failing_ranks same_count   ranks shard a replicated tensor of equal element
//                              count but other extents (batch 2 x posn 6, 3 x 4)
//   failing_ranks static_split a dim with a static extent split over the ranks
#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

#include <dimsum/dimsum.hpp>
#include <dimsum/distributed/dist.hpp>

namespace dist = dimsum::dist;

namespace {
DIMSUM_MESH_AXIS(model);
DIMSUM_DIM(nheads);
DIMSUM_DIM(d_model);
DIMSUM_DIM(batch);
DIMSUM_DIM(posn);
DIMSUM_DIM(heads4, 4);
}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const std::string mode = argc > 1 ? argv[1] : "";
  const int rc = dist::abort_on_error(MPI_COMM_WORLD, [&] {
    int n = 0, me = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    dist::set_deadline(std::chrono::milliseconds(1500));
    dist::mesh<model> m(MPI_COMM_WORLD, model{n});
    if (mode == "same_count") {
      const std::size_t b = me == 0 ? 2 : 3, p = me == 0 ? 6 : 4;
      dimsum::tensor<float, batch, posn, nheads> x(batch{b}, posn{p}, nheads{std::size_t(n)});
      (void)dist::shard<dist::split<nheads, model>>(m, x);
      return 0;
    }
    if (mode == "static_split") {
      dimsum::tensor<float, heads4, d_model> w(d_model{3});
      (void)dist::shard<dist::split<heads4, model>>(m, w);
      return 0;
    }
    dimsum::tensor<float, nheads, d_model> full(nheads{std::size_t(2 * n)}, d_model{3});
    full.fill(1.0f);
    const auto s = dist::shard<dist::split<nheads, model>>(m, full);
    if (mode == "throw" && me == 1) throw std::runtime_error("a failure on rank 1 (test)");
    if (mode == "die" && me == 1) std::_Exit(3);
    if (mode == "stuck" && me == 1)
      for (int i = 0; i < 600; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (mode != "stuck") {
      const std::size_t width = mode == "extent" && me == n - 1 ? 4 : 3;
      (void)dist::from_local<dist::partial<model, nheads>>(
          m, dimsum::tensor<float, nheads, d_model>(nheads{2}, d_model{width}));
    }
    const auto total = dist::all_reduce(dist::einsum<"nheads d_model -> d_model">(s));
    (void)total;
    return 0;
  });
  MPI_Finalize();
  return rc;
}
