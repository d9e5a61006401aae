// dimsum's name-free GEMM kernel against OpenBLAS cblas_sgemm, in one binary.
//
//   cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DDIMSUM_BUILD_BENCH=ON
//   cmake --build build-bench --target bench_gemm
//   OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 build-bench/bench/bench_gemm
//       --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//   (one command line)
//
// Every benchmark sets both libraries to its thread count (the `threads`
// argument) through their APIs; the environment only sizes the pools, so set
// both variables to the largest count. Compare the FLOPS counters (medians).
// Each workload checks dimsum against OpenBLAS once before it is timed. The
// context lines name OpenBLAS's core type (set OPENBLAS_CORETYPE to choose)
// and dimsum's kernels.
//
// --cpu_time_one_thread: the 1-thread rows are timed by the CPU time of the
// calling thread (both libraries compute on it alone) instead of wall time,
// which on a machine shared with other processes counts only the time the
// thread actually ran; the 2-thread rows stay on wall time.

#include <dimsum/kernels/gemm.hpp>
#include <dimsum/kernels/threads.hpp>

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "gemm_args.hpp"

namespace {

namespace dk = dimsum::kernels;

using bench::one_dim;
using bench::random_vector;

void set_threads(int n) {
  dimsum::set_num_threads(n);
  openblas_set_num_threads(n);
}

bool close(const std::vector<float>& x, const std::vector<float>& y, double k) {
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, double(std::fabs(x[i] - y[i])));
  return worst <= 1e-6 * k;  // |values| <= 1: each dot product is below k
}

// ---------------------------------------------------------------------------
// Square row-major SGEMM, C = A B: the GEMM-shaped einsum "m k, k n -> m n".

struct square {
  std::size_t n;
  std::vector<float> a, b, c;
  dk::contraction_args<float> args;
  bool checked = false;

  explicit square(std::size_t n_)
      : n(n_), a(random_vector(n * n, 1)), b(random_vector(n * n, 2)), c(n * n) {
    const auto s = static_cast<std::ptrdiff_t>(n);
    args.a = a.data();
    args.b = b.data();
    args.c = c.data();
    args.m = one_dim(n, s, 0, s);
    args.n = one_dim(n, 0, 1, 1);
    args.k = one_dim(n, 1, s, 0);
  }
  void run_openblas() {
    const int s = static_cast<int>(n);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s, s, s, 1.f, a.data(), s, b.data(), s,
                0.f, c.data(), s);
  }
  void run_dimsum() { dk::contract(args); }
  bool check() {
    run_openblas();
    const std::vector<float> want = c;
    run_dimsum();
    return close(c, want, double(n));
  }
};

square& square_of(std::size_t n) {
  static std::map<std::size_t, square> cache;
  auto it = cache.find(n);
  if (it == cache.end()) it = cache.emplace(n, n).first;
  return it->second;
}

template <bool Dimsum>
void bm_sgemm(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  set_threads(static_cast<int>(state.range(1)));
  square& p = square_of(n);
  if (!p.checked) {
    if (!p.check()) {
      state.SkipWithError("dimsum and OpenBLAS disagree");
      return;
    }
    p.checked = true;
  }
  for (auto _ : state) {
    if constexpr (Dimsum)
      p.run_dimsum();
    else
      p.run_openblas();
    benchmark::ClobberMemory();
  }
  state.counters["FLOPS"] = benchmark::Counter(2.0 * double(n) * double(n) * double(n),
                                               benchmark::Counter::kIsIterationInvariantRate);
}

// ---------------------------------------------------------------------------
// Attention scores "posn nheads d_head, k_posn nheads d_head -> nheads posn
// k_posn" at b1 p1024 h12 d64: a batch over heads with strided operands
// (q and k keep their [posn, head, d] layout; B is read transposed). OpenBLAS
// needs one sgemm per head with lda = ldb = h*d and CblasTrans.

struct scores {
  static constexpr std::size_t p = 1024, h = 12, d = 64;
  std::vector<float> q = random_vector(p * h * d, 3), k = random_vector(p * h * d, 4),
                     c = std::vector<float>(h * p * p);
  dk::contraction_args<float> args;
  bool checked = false;

  scores() {
    constexpr auto hd = static_cast<std::ptrdiff_t>(h * d), pp = static_cast<std::ptrdiff_t>(p * p);
    args.a = q.data();
    args.b = k.data();
    args.c = c.data();
    args.batch = one_dim(h, d, d, pp);                   // nheads
    args.m = one_dim(p, hd, 0, static_cast<std::ptrdiff_t>(p));  // q posn
    args.n = one_dim(p, 0, hd, 1);                       // k posn
    args.k = one_dim(d, 1, 1, 0);                        // d_head
  }
  void run_openblas() {
    constexpr int ip = static_cast<int>(p), ihd = static_cast<int>(h * d);
    for (std::size_t head = 0; head < h; ++head)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ip, ip, static_cast<int>(d), 1.f,
                  q.data() + head * d, ihd, k.data() + head * d, ihd, 0.f,
                  c.data() + head * p * p, ip);
  }
  void run_dimsum() { dk::contract(args); }
  bool check() {
    run_openblas();
    const std::vector<float> want = c;
    run_dimsum();
    return close(c, want, double(d));
  }
};

template <bool Dimsum>
void bm_scores(benchmark::State& state) {
  set_threads(static_cast<int>(state.range(0)));
  static scores s;
  if (!s.checked) {
    if (!s.check()) {
      state.SkipWithError("dimsum and OpenBLAS disagree");
      return;
    }
    s.checked = true;
  }
  for (auto _ : state) {
    if constexpr (Dimsum)
      s.run_dimsum();
    else
      s.run_openblas();
    benchmark::ClobberMemory();
  }
  state.counters["FLOPS"] =
      benchmark::Counter(2.0 * double(scores::h * scores::p * scores::p * scores::d),
                         benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

// Registered pairwise (dimsum, then OpenBLAS, per workload and thread count)
// so both see the same machine state when others share it.
int main(int argc, char** argv) {
  bool cpu_time_one_thread = false;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--cpu_time_one_thread") == 0) {
      cpu_time_one_thread = true;
      for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
      --argc;
      break;
    }
  auto add = [&](const char* name, auto fn, std::vector<std::int64_t> args,
                 std::vector<std::string> arg_names) {
    auto* b = benchmark::RegisterBenchmark(name, fn)->Args(args)->ArgNames(arg_names)->Unit(benchmark::kMillisecond);
    if (!(cpu_time_one_thread && args.back() == 1)) b->UseRealTime();
  };
  benchmark::AddCustomContext("openblas_core", openblas_get_corename());
  benchmark::AddCustomContext("dimsum_kernels", dimsum::kernel_isa());
  for (std::int64_t threads : {1, 2}) {
    for (std::int64_t n : {512, 1024, 2048}) {
      add("sgemm/dimsum", bm_sgemm<true>, {n, threads}, {"n", "threads"});
      add("sgemm/openblas", bm_sgemm<false>, {n, threads}, {"n", "threads"});
    }
    add("attn_scores_p1024h12d64/dimsum", bm_scores<true>, {threads}, {"threads"});
    add("attn_scores_p1024h12d64/openblas", bm_scores<false>, {threads}, {"threads"});
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
