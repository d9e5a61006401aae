// The machine's peak float multiply-add rate on one thread: 24 independent
// chains of vector fmas (enough to cover the fma latency of two pipes), the
// widest vectors the build's -march allows (xsimd's default arch), timed by
// the thread's CPU time; best of 5 rounds. The ceiling that the GEMM and
// training-step rates of docs/performance.md are read against.
//
//   build/bench/peak_flops
#include <time.h>

#include <cstdio>

#include <xsimd/xsimd.hpp>

namespace {

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

}  // namespace

int main() {
  using vec = xsimd::batch<float>;
  constexpr int chains = 24;
  vec acc[chains];
  for (int i = 0; i < chains; ++i) acc[i] = vec(float(i) * 1e-3f);
  const vec a(0.999999f), b(1e-7f);
  const long steps = 20000000;
  double best = 0;
  for (int r = 0; r < 5; ++r) {
    const double t0 = thread_cpu_s();
    for (long s = 0; s < steps; ++s) {
#pragma GCC unroll 24
      for (int i = 0; i < chains; ++i) acc[i] = xsimd::fma(acc[i], a, b);
    }
    const double gflops = double(steps) * chains * vec::size * 2 / (thread_cpu_s() - t0) / 1e9;
    if (gflops > best) best = gflops;
  }
  float sink = 0;
  for (int i = 0; i < chains; ++i) sink += xsimd::hadd(acc[i]);
  std::printf("peak float fma rate, one thread, %s (%zu floats per vector): %.1f GFLOP/s (checksum %g)\n",
              xsimd::default_arch::name(), vec::size, best, double(sink));
  return 0;
}
