// Deterministic inputs shared by every implementation of the seed-000
// attention forward and of the square GEMM in bench/ (dimsum, Eigen,
// OpenBLAS; bench/compare mirrors them for PyTorch), so their outputs can be
// compared element by element. Flat row-major arrays.
#pragma once
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace bench {

struct attention_shape {
  std::size_t b, p, m, h, d;
};

// Element i of tensor number `salt`, scaled.
inline float input_value(std::size_t i, int salt, double scale) {
  return static_cast<float>(scale * std::sin(0.7 * double(i % 100003) + 1.3 * salt + 0.1 * double(i % 7)));
}

inline std::vector<float> make_input(std::size_t n, int salt, double scale) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = input_value(i, salt, scale);
  return v;
}

// x (b,p,m); W_Q, W_K, W_V (h,m,d); W_O (h,d,m); b_Q, b_K, b_V (h,d); b_O (m).
struct attention_inputs {
  std::vector<float> x, W_Q, W_K, W_V, W_O, b_Q, b_K, b_V, b_O;
  explicit attention_inputs(const attention_shape& s)
      : x(make_input(s.b * s.p * s.m, 0, 1.0)),
        W_Q(make_input(s.h * s.m * s.d, 1, 1.0 / std::sqrt(double(s.m)))),
        W_K(make_input(s.h * s.m * s.d, 2, 1.0 / std::sqrt(double(s.m)))),
        W_V(make_input(s.h * s.m * s.d, 3, 1.0 / std::sqrt(double(s.m)))),
        W_O(make_input(s.h * s.d * s.m, 4, 1.0 / std::sqrt(double(s.h * s.d)))),
        b_Q(make_input(s.h * s.d, 5, 0.1)),
        b_K(make_input(s.h * s.d, 6, 0.1)),
        b_V(make_input(s.h * s.d, 7, 0.1)),
        b_O(make_input(s.m, 8, 0.1)) {}
};

// t (any tensor with data()) with its elements copied from v, row-major as
// the inputs above are made.
template <class T>
T from(const std::vector<float>& v, T t) {
  std::copy(v.begin(), v.end(), t.data());
  return t;
}

// The command line every peer takes: B P M H D [reps] [--out file.f32].
struct peer_args {
  attention_shape shape{};
  int reps = 5;
  std::string out_path;
  bool ok = false;
};

inline peer_args parse_args(int argc, char** argv) {
  peer_args a;
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s B P M H D [reps] [--out file.f32]\n", argv[0]);
    return a;
  }
  a.shape = {std::stoul(argv[1]), std::stoul(argv[2]), std::stoul(argv[3]), std::stoul(argv[4]),
             std::stoul(argv[5])};
  if (argc > 6 && argv[6][0] != '-') a.reps = std::atoi(argv[6]);
  for (int i = 6; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--out") == 0) a.out_path = argv[i + 1];
  a.ok = true;
  return a;
}

// The GEMM peers' workload: C (n, n) = A (n, n) @ B (n, n), row-major, and
// their command line: N [reps] [--out file.f32].
struct gemm_inputs {
  std::vector<float> a, b;
  explicit gemm_inputs(std::size_t n)
      : a(make_input(n * n, 0, 1.0)), b(make_input(n * n, 1, 1.0 / std::sqrt(double(n)))) {}
};

struct gemm_args : peer_args {
  std::size_t n = 0;
};

inline gemm_args parse_gemm_args(int argc, char** argv) {
  gemm_args a;
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s N [reps] [--out file.f32]\n", argv[0]);
    return a;
  }
  a.n = std::stoul(argv[1]);
  if (argc > 2 && argv[2][0] != '-') a.reps = std::atoi(argv[2]);
  for (int i = 2; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--out") == 0) a.out_path = argv[i + 1];
  a.ok = true;
  return a;
}

// A field of /proc/self/status ("VmRSS", "VmHWM") in MiB, or -1.
inline double proc_status_mib(const char* field) {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  double kib = -1;
  const std::size_t n = std::strlen(field);
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, field, n) == 0 && line[n] == ':') kib = std::atof(line + n + 1);
  std::fclose(f);
  return kib < 0 ? -1 : kib / 1024.0;
}

// Peak memory of one call of `forward` beyond what the process held before
// it (max RSS minus the RSS after setup), in MiB: the kernel's high-water
// mark is reset first (/proc/self/clear_refs), so setup's own peak does not
// count. Buffers a peer allocates on its first call count; the inputs do not.
template <class F>
double peak_extra_mib(F&& forward) {
  if (std::FILE* f = std::fopen("/proc/self/clear_refs", "w")) {
    std::fputs("5", f);
    std::fclose(f);
  }
  const double before = proc_status_mib("VmRSS");
  forward();
  return proc_status_mib("VmHWM") - before;
}

// Runs `forward` once untimed (measuring its peak extra memory, printed as
// "peak_extra_mib=<x>"), then a.reps times, prints "median_ms=<x>", and
// writes the n floats `output()` points to into a.out_path (raw float32) if
// one was given. Returns the process exit code.
/// How long one timed run (a batch of calls) lasts at least.
inline constexpr double batch_ms = 20.0;

template <class F, class G>
int time_and_write(const peer_args& a, F&& forward, G&& output, std::size_t n) {
  std::printf("peak_extra_mib=%.1f\n", peak_extra_mib(forward));
  using clock = std::chrono::steady_clock;
  auto ms_since = [](clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  };
  // A run is a batch of calls lasting about batch_ms (one call when a call
  // is longer), timed as a whole: the median of single short calls (shape A
  // takes ~0.1 ms) would be timer and cache noise.
  const auto t_once = clock::now();
  forward();
  const int calls = std::max(1, static_cast<int>(batch_ms / std::max(ms_since(t_once), 1e-3)));
  std::vector<double> times;
  for (int r = 0; r < a.reps; ++r) {
    const auto t0 = clock::now();
    for (int c = 0; c < calls; ++c) forward();
    times.push_back(ms_since(t0) / calls);
  }
  std::sort(times.begin(), times.end());
  std::printf("median_ms=%.4f\n", times[times.size() / 2]);
  if (a.out_path.empty()) return 0;
  std::FILE* f = std::fopen(a.out_path.c_str(), "wb");
  if (!f) return 1;
  const bool written = std::fwrite(output(), sizeof(float), n, f) == n;
  return std::fclose(f) == 0 && written ? 0 : 1;
}

}  // namespace bench
