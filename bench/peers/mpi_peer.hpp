#pragma once
// What the MPI peers of bench/scaling share (dimsum_tp_attention.cpp,
// dimsum_sp_attention.cpp, dimsum_tp_train.cpp): one call's cost, the
// median of calls timed between barriers, rank 0's printout, the --out file,
// and main.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <malloc.h>
#include <string>
#include <vector>

#include <dimsum/distributed/dist.hpp>

#include "inputs.hpp"

namespace bench {

/// One call of a peer's timed function: the largest rank's peak extra
/// memory (valid on rank 0) and the bytes this rank's collectives sent.
struct mpi_call_cost {
  double worst_mib = 0;
  dimsum::dist::traffic sent;
};

template <class F>
mpi_call_cost measure_mpi_call(F&& f) {
  dimsum::dist::reset_traffic();
  const double mib = peak_extra_mib(f);
  mpi_call_cost c;
  c.sent = dimsum::dist::traffic_counter();
  MPI_Reduce(&mib, &c.worst_mib, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  return c;
}

/// The median time of `reps` calls of f, each between barriers, in ms.
template <class F>
double median_ms_between_barriers(F&& f, int reps) {
  using clock = std::chrono::steady_clock;
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = clock::now();
    f();
    MPI_Barrier(MPI_COMM_WORLD);
    times.push_back(std::chrono::duration<double, std::milli>(clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

/// Rank 0's printout: peak_extra_mib, median_ms, ring_bytes, payload_bytes, collectives.
inline void print_mpi_result(const mpi_call_cost& c, double median_ms) {
  std::printf("peak_extra_mib=%.1f\nmedian_ms=%.4f\nring_bytes=%llu\npayload_bytes=%llu\ncollectives=%llu\n", c.worst_mib,
              median_ms, static_cast<unsigned long long>(c.sent.ring_bytes),
              static_cast<unsigned long long>(c.sent.payload_bytes), static_cast<unsigned long long>(c.sent.calls));
}

/// Writes n floats to path (nothing for an empty path); the exit code.
inline int write_floats(const std::string& path, const float* data, std::size_t n) {
  if (path.empty()) return 0;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 1;
  const bool written = std::fwrite(data, sizeof(float), n, f) == n;
  return std::fclose(f) == 0 && written ? 0 : 1;
}

/// The training peers' ending: one `step` (the optimizer's state allocated,
/// `grads` holding the first step's gradients, kept for --out), then the
/// step's cost and median time; rank 0 prints them and writes the kept
/// gradients. The exit code.
template <class Step>
int time_training_step(Step& step, const std::vector<float>& grads, const peer_args& args, int me) {
  step();
  const std::vector<float> first = grads;
  malloc_trim(0);
  const mpi_call_cost cost = measure_mpi_call(step);
  const double median = median_ms_between_barriers(step, args.reps);
  if (me != 0) return 0;
  std::printf("kernel=dimsum %s\n", dimsum::kernel_isa());
  print_mpi_result(cost, median);
  return write_floats(args.out_path, first.data(), first.size());
}

/// main of an MPI peer: `run(args)` on every rank inside
/// dist::abort_on_error (an exception on one rank ends the job).
template <class Run>
int mpi_peer_main(int argc, char** argv, Run run) {
  MPI_Init(&argc, &argv);
  const peer_args args = parse_args(argc, argv);
  const int rc = args.ok ? dimsum::dist::abort_on_error(MPI_COMM_WORLD, [&] { return run(args); }) : 2;
  MPI_Finalize();
  return rc;
}

}  // namespace bench
