// The square GEMM C = A @ B as one cblas_sgemm, the OpenBLAS entry of
// bench/compare's GEMM workloads.
//
//   openblas_gemm N [reps] [--out file.f32]
#include <cblas.h>

#include <cstdio>
#include <vector>

#include "inputs.hpp"

int main(int argc, char** argv) {
  const bench::gemm_args args = bench::parse_gemm_args(argc, argv);
  if (!args.ok) return 2;
  std::printf("kernel=OpenBLAS %s\n", openblas_get_corename());
  const int n = int(args.n);
  const bench::gemm_inputs in(args.n);
  std::vector<float> c;  // sized on the first call, so it counts in its peak memory as the other peers' output does
  auto forward = [&] {
    c.resize(args.n * args.n);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, in.a.data(), n, in.b.data(), n, 0.0f,
                c.data(), n);
  };
  return bench::time_and_write(args, forward, [&] { return c.data(); }, args.n * args.n);
}
