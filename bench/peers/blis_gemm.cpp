// The square GEMM C = A @ B as one bli_sgemm, the BLIS entry of
// bench/compare's GEMM workloads (Debian libblis-dev, OpenMP build).
//
//   blis_gemm N [reps] [--out file.f32]
//
// Threads: BLIS_NUM_THREADS (bench/compare sets it with OMP_NUM_THREADS).
// Prints "kernel=BLIS <version> <arch>": the sub-configuration BLIS picked
// for this CPU at run time.
#include <blis.h>

#include <cstdio>
#include <vector>

#include "inputs.hpp"

int main(int argc, char** argv) {
  const bench::gemm_args args = bench::parse_gemm_args(argc, argv);
  if (!args.ok) return 2;
  std::printf("kernel=BLIS %s %s\n", bli_info_get_version_str(), bli_arch_string(bli_arch_query_id()));
  const auto n = static_cast<dim_t>(args.n);
  const bench::gemm_inputs in(args.n);
  std::vector<float> c;  // sized on the first call, as in the other peers
  float one = 1.0f, zero = 0.0f;
  auto forward = [&] {
    c.resize(args.n * args.n);
    // Row-major: row stride n, column stride 1.
    bli_sgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, n, n, n, &one, const_cast<float*>(in.a.data()), n, 1,
              const_cast<float*>(in.b.data()), n, 1, &zero, c.data(), n, 1);
  };
  return bench::time_and_write(args, forward, [&] { return c.data(); }, args.n * args.n);
}
