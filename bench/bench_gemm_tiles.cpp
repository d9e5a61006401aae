// dimsum's GEMM under several register tiles and cache blockings beside
// OpenBLAS cblas_sgemm, in one process, timed by the CPU time of the calling
// thread (one thread: both libraries compute on it alone), so that a machine
// shared with other processes slows the timing less than it slows wall time.
// Each round times every variant once; a variant's figure is its best round.
//
//   OPENBLAS_NUM_THREADS=1 build/bench/bench_gemm_tiles M N K [reps per round] [rounds]
//
// Prints one line per variant: GFLOP/s and the ratio to OpenBLAS's best
// round. Row-major C (M x N) = A (M x K) B (K x N); each variant is checked
// against OpenBLAS first.

#include <dimsum/kernels/gemm.hpp>
#include <dimsum/kernels/threads.hpp>

#include <cblas.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <vector>

#include "gemm_args.hpp"

namespace {

namespace dk = dimsum::kernels;
namespace kd = dimsum::kernels::detail;

double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

template <class F>
double best_ms(F&& f, int reps) {
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    const double t0 = thread_cpu_ms();
    f();
    best = std::min(best, thread_cpu_ms() - t0);
  }
  return best;
}

using bench::one_dim;

struct problem {
  std::size_t m, n, k;
  std::vector<float> a, b, c, want;
  dk::contraction_args<float> args{};
  problem(std::size_t m_, std::size_t n_, std::size_t k_)
      : m(m_), n(n_), k(k_), a(bench::random_vector(m * k, 1)), b(bench::random_vector(k * n, 2)), c(m * n) {
    args.a = a.data();
    args.b = b.data();
    args.c = c.data();
    args.m = one_dim(m, std::ptrdiff_t(k), 0, std::ptrdiff_t(n));
    args.n = one_dim(n, 0, 1, 1);
    args.k = one_dim(k, 1, std::ptrdiff_t(n), 0);
    run_openblas();
    want = c;
  }
  void run_openblas() {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(m), int(n), int(k), 1.f, a.data(), int(k), b.data(),
                int(n), 0.f, c.data(), int(n));
  }
  bool matches() const {
    for (std::size_t i = 0; i < c.size(); ++i)
      if (!(std::fabs(c[i] - want[i]) <= 1e-5 * double(k))) return false;
    return true;
  }
};

template <class Blk>
void run_blocked(problem& p) {
  kd::contract_blocked<float, dk::best_gemm_arch, Blk>(p.args);
}

struct variant {
  const char* name;
  void (*run)(problem&);
};

// The variants of this build's arch: the AVX-512 tiles, or (an x86-64-v3
// build, AVX2 + FMA) the AVX2 ones.
std::vector<variant> variants_for_this_arch() {
  if constexpr (std::is_base_of_v<xsimd::avx512f, dk::best_gemm_arch>) {
    return {
        {"dimsum contract (its blocking)", &run_blocked<kd::contract_blocking<float, dk::best_gemm_arch>>},
        {"6 x 4 vectors, A packed past 256 columns", &run_blocked<kd::avx512_tile<float, 6, 4>>},
        {"12 x 2 vectors, MC 96 KC 512 NC 2048 (before)", &run_blocked<kd::gemm_blocking<12, 32, 96, 512, 2048>>},
        {"12 x 2 vectors, run-time blocks", &run_blocked<kd::gemm_blocking<12, 32, 480, 1024, 8192>>},
        {"8 x 3 vectors, run-time blocks", &run_blocked<kd::gemm_blocking<8, 48, 480, 1024, 8160>>},
    };
  } else {
    return {
        {"dimsum contract (its blocking)", &run_blocked<kd::contract_blocking<float, dk::best_gemm_arch>>},
        {"6 x 2 vectors, A packed (the default tile)", &run_blocked<kd::gemm_blocking<6, 16, 96, 1024, 2048>>},
        {"6 x 2 vectors, A in place", &run_blocked<kd::gemm_blocking<6, 16, 96, 1024, 2048, 2048>>},
        {"4 x 3 vectors, A packed", &run_blocked<kd::gemm_blocking<4, 24, 96, 1024, 2040>>},
    };
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s M N K [reps per round] [rounds]\n", argv[0]);
    return 2;
  }
  problem p(std::stoul(argv[1]), std::stoul(argv[2]), std::stoul(argv[3]));
  const int reps = argc > 4 ? std::atoi(argv[4]) : 3, rounds = argc > 5 ? std::atoi(argv[5]) : 6;
  dimsum::set_num_threads(1);
  const std::vector<variant> variants = variants_for_this_arch();

  for (const variant& v : variants) {
    v.run(p);
    if (!p.matches()) {
      std::fprintf(stderr, "%s disagrees with OpenBLAS\n", v.name);
      return 1;
    }
  }
  const double flop = 2.0 * double(p.m) * double(p.n) * double(p.k);
  double openblas = 0;
  std::vector<double> best(variants.size(), 0);
  for (int r = 0; r < rounds; ++r) {
    openblas = std::max(openblas, flop / best_ms([&] { p.run_openblas(); }, reps) / 1e6);
    for (std::size_t i = 0; i < variants.size(); ++i)
      best[i] = std::max(best[i], flop / best_ms([&] { variants[i].run(p); }, reps) / 1e6);
  }
  std::printf("%zu x %zu x %zu float, one thread, thread CPU time; dimsum kernels %s, OpenBLAS %s %.1f GFLOP/s\n", p.m,
              p.n, p.k, dimsum::kernel_isa(), openblas_get_corename(), openblas);
  for (std::size_t i = 0; i < variants.size(); ++i)
    std::printf("  %-48s %7.1f GFLOP/s  %.2fx OpenBLAS\n", variants[i].name, best[i], best[i] / openblas);
  return 0;
}
