// The square GEMM C[i,j] = sum_k A[i,k] B[k,j] as one dimsum einsum, the
// dimsum entry of bench/compare's GEMM workloads.
//
//   dimsum_gemm N [reps] [--out file.f32]
//
// Prints "peak_extra_mib=<x>" and "median_ms=<x>" and, with --out, writes
// C (n, n) as raw float32.
#include <algorithm>

#include <dimsum/dimsum.hpp>

#include "inputs.hpp"

DIMSUM_DIM(i);
DIMSUM_DIM(k);
DIMSUM_DIM(j);

int main(int argc, char** argv) {
  const bench::gemm_args args = bench::parse_gemm_args(argc, argv);
  if (!args.ok) return 2;
  std::printf("kernel=dimsum %s\n", dimsum::kernel_isa());
  const std::size_t n = args.n;
  const bench::gemm_inputs in(n);
  dimsum::tensor<float, i, k> a(i{n}, k{n});
  dimsum::tensor<float, k, j> b(k{n}, j{n});
  std::copy(in.a.begin(), in.a.end(), a.data());
  std::copy(in.b.begin(), in.b.end(), b.data());

  dimsum::tensor<float, i, j> c;
  auto forward = [&] { c = dimsum::einsum<"i k, k j -> i j">(a, b); };
  return bench::time_and_write(args, forward, [&] { return c.data(); }, n * n);
}
