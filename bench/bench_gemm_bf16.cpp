// dimsum's GEMM on bf16 operands (float32 sums, float C) against dimsum's
// own float32 GEMM, in one binary: square row-major C = A B.
//
//   cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DDIMSUM_BUILD_BENCH=ON
//   cmake --build build-bench --target bench_gemm_bf16
//   build-bench/bench/bench_gemm_bf16 --cpu_time_one_thread
//       --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//   (one command line)
//
// Rows: sgemm/float32 (contract on float), sgemm/bf16 (contract on bf16:
// AMX tiles where the CPU has them, else best_bf16_gemm_arch, vdpbf16ps
// where AVX512-BF16 is compiled in) and
// sgemm/bf16_convert (the bf16 operands converted to float while packing,
// on best_gemm_arch: the path of CPUs without AVX512-BF16). Registered side
// by side per size and thread count, so all see the same machine state.
// The context lines name the CPU's kernels; compare the FLOPS counters.
// --cpu_time_one_thread times the 1-thread rows by the calling thread's CPU
// time (as bench_gemm does), which on a shared machine counts only the time
// the thread ran.

#include <dimsum/core/bf16.hpp>
#include <dimsum/kernels/gemm.hpp>
#include <dimsum/kernels/threads.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "gemm_args.hpp"

namespace {

namespace dk = dimsum::kernels;
using bench::one_dim;
using dimsum::bf16;

struct square {
  std::size_t n;
  std::vector<float> a, b, c;
  std::vector<bf16> a16, b16;
  dk::contraction_args<float> args;
  dk::contraction_args<bf16, float> args16;

  explicit square(std::size_t n_) : n(n_), a(bench::random_vector(n * n, 1)), b(bench::random_vector(n * n, 2)), c(n * n) {
    for (float x : a) a16.push_back(bf16(x));
    for (float x : b) b16.push_back(bf16(x));
    const auto s = static_cast<std::ptrdiff_t>(n);
    args.a = a.data();
    args.b = b.data();
    args.c = c.data();
    args.m = one_dim(n, s, 0, s);
    args.n = one_dim(n, 0, 1, 1);
    args.k = one_dim(n, 1, s, 0);
    args16.a = a16.data();
    args16.b = b16.data();
    args16.c = c.data();
    args16.m = args.m;
    args16.n = args.n;
    args16.k = args.k;
  }
  // The bf16 result against float64 sums of the bf16 operands: within
  // float32's bound for n terms of |a b| <= 1.
  bool bf16_ok() const {
    for (std::size_t i = 0; i < n; i += 97)
      for (std::size_t j = 0; j < n; j += 89) {
        double want = 0;
        for (std::size_t k = 0; k < n; ++k)
          want += double(static_cast<float>(a16[i * n + k])) * double(static_cast<float>(b16[k * n + j]));
        if (std::abs(double(c[i * n + j]) - want) > double(n + 4) * std::ldexp(1.0, -24) * double(n)) return false;
      }
    return true;
  }
};

square& problem(std::size_t n) {
  static std::map<std::size_t, square> cache;
  return cache.try_emplace(n, n).first->second;
}

enum class path { float32, bf16_best, bf16_convert };

template <path P>
void bm_sgemm(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  dimsum::set_num_threads(static_cast<int>(state.range(1)));
  square& s = problem(n);
  auto run = [&] {
    if constexpr (P == path::float32)
      dk::contract(s.args);
    else if constexpr (P == path::bf16_best)
      dk::contract(s.args16);
    else
      dk::contract_on<dk::best_gemm_arch>(s.args16);
  };
  if constexpr (P != path::float32) {
    run();
    if (!s.bf16_ok()) {
      state.SkipWithError("the bf16 GEMM is outside float32's error bound");
      return;
    }
  }
  for (auto _ : state) {
    run();
    benchmark::ClobberMemory();
  }
  state.counters["FLOPS"] = benchmark::Counter(2.0 * double(n) * double(n) * double(n),
                                               benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

int main(int argc, char** argv) {
  bool cpu_time_one_thread = false;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--cpu_time_one_thread") == 0) {
      cpu_time_one_thread = true;
      for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
      --argc;
      break;
    }
  auto add = [&](const char* name, auto fn, std::int64_t n, std::int64_t threads) {
    auto* b = benchmark::RegisterBenchmark(name, fn)->Args({n, threads})->ArgNames({"n", "threads"})->Unit(
        benchmark::kMillisecond);
    if (!(cpu_time_one_thread && threads == 1)) b->UseRealTime();
  };
  benchmark::AddCustomContext("dimsum_kernels", dimsum::kernel_isa());
  benchmark::AddCustomContext("dimsum_bf16_kernels", dk::bf16_gemm_kernel());
  for (std::int64_t threads : {1, 2})
    for (std::int64_t n : {1024, 2048}) {
      add("sgemm/float32", bm_sgemm<path::float32>, n, threads);
      add("sgemm/bf16", bm_sgemm<path::bf16_best>, n, threads);
      add("sgemm/bf16_convert", bm_sgemm<path::bf16_convert>, n, threads);
    }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
