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
//   failing_ranks ckpt_modules the last rank loads a ZeRO optimizer checkpoint
//                              into a module whose parameter has another extent
//   failing_ranks ckpt_missing the last rank's file of the checkpoint is gone
//   failing_ranks ckpt_stuck   rank 1 sleeps instead of loading the checkpoint
//   failing_ranks ring_stuck   rank 1 sleeps instead of entering ring_attention
//   failing_ranks shift_stuck  rank 1 sleeps instead of entering a ring_shift;
//                              its neighbours (ranks 0 and 2) hit the deadline
//   failing_ranks ring_backward_stuck  every rank runs ring_attention on vars,
//                              rank 1 sleeps instead of running backward
#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>

#include <unistd.h>

#include <dimsum/dimsum.hpp>
#include <dimsum/distributed/dist.hpp>

namespace dist = dimsum::dist;

namespace {
DIMSUM_MESH_AXIS(model);
DIMSUM_DIM(nheads);
DIMSUM_DIM(d_model);
DIMSUM_DIM(batch);
DIMSUM_DIM(posn);
DIMSUM_DIM(q_posn);
DIMSUM_DIM(k_posn);
DIMSUM_DIM(d_head, 4);

struct tiny {
  BOOST_HANA_DEFINE_STRUCT(tiny, (dimsum::parameter<float, d_model>, w));
};

/// Saves a ZeRO optimizer state of a one-parameter module, then loads it
/// as `mode` says; rank 0 removes the checkpoint before the error leaves.
void checkpoint_mode(const dist::mesh<model>& m, const std::string& mode, int me, int n) {
  std::string dir;
  if (me == 0)
    dir = (std::filesystem::temp_directory_path() / ("dimsum-failing-" + mode + "-" + std::to_string(::getpid()))).string();
  int len = static_cast<int>(dir.size());
  MPI_Bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD);
  dir.resize(static_cast<std::size_t>(len));
  MPI_Bcast(dir.data(), len, MPI_CHAR, 0, MPI_COMM_WORLD);
  tiny t;
  t.w = dimsum::parameter<float, d_model>(d_model{6});
  t.w.grad.fill(1.0f);
  dist::sharded_adamw<model> opt;
  opt.step(m, t);
  dist::save_optimizer_state(m, dir, t, opt);
  MPI_Barrier(MPI_COMM_WORLD);
  if (mode == "ckpt_missing" && me == 0)
    for (const auto& f : std::filesystem::directory_iterator(dir))
      if (f.path().filename().string().find("-rank0000" + std::to_string(n - 1) + "-") != std::string::npos)
        std::filesystem::remove(f.path());
  MPI_Barrier(MPI_COMM_WORLD);
  if (mode == "ckpt_modules" && me == n - 1) t.w = dimsum::parameter<float, d_model>(d_model{4});
  if (mode == "ckpt_stuck" && me == 1) {
    for (int i = 0; i < 600; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return;
  }
  try {
    dist::load_optimizer_state(m, dir, t, opt);
  } catch (...) {
    if (me == 0) std::filesystem::remove_all(dir);
    // every rank throws the same error (but the stuck rank, asleep): the
    // others wait until rank 0 has removed the files before they abort the job
    if (mode != "ckpt_stuck") MPI_Barrier(MPI_COMM_WORLD);
    throw;
  }
}
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
    if (mode.starts_with("ckpt_")) {
      checkpoint_mode(m, mode, me, n);
      return 0;
    }
    if (mode == "ring_stuck" || mode == "shift_stuck") {
      auto q = dist::from_local<dist::split<q_posn, model>>(m, dimsum::tensor<float, q_posn, d_head>(q_posn{8}));
      auto k = dist::from_local<dist::split<k_posn, model>>(m, dimsum::tensor<float, k_posn, d_head>(k_posn{8}));
      if (me == 1) {
        for (int i = 0; i < 600; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        return 0;
      }
      if (mode == "shift_stuck") {
        dimsum::tensor<float, d_model> mine(d_model{3}), got(d_model{3});
        dist::ring_shift<model>(m, mine, got).wait();
        return 0;
      }
      (void)dist::ring_attention<d_head>(q, k, k, {.causal = true});
      return 0;
    }
    if (mode == "ring_backward_stuck") {
      dimsum::parameter<float, q_posn, d_head> pq(dimsum::tensor<float, q_posn, d_head>(q_posn{8}));
      dimsum::parameter<float, k_posn, d_head> pk(dimsum::tensor<float, k_posn, d_head>(k_posn{8}));
      dimsum::grad::tape t;
      auto q = dist::watch<dist::split<q_posn, model>>(t, m, pq);
      auto k = dist::watch<dist::split<k_posn, model>>(t, m, pk);
      auto o = dist::ring_attention<d_head>(q, k, k, {.causal = true});
      if (me == 1) {
        for (int i = 0; i < 600; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        return 0;
      }
      t.backward(dimsum::einsum<>(o.local()));
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
