// The square GEMM C[i,j] = sum_k A[i,k] B[k,j] on bf16 operands with float32
// sums (`einsum<"i k, k j -> i j", float>` of two bf16 tensors), the dimsum
// entry of bench/compare's bf16 GEMM workloads, and the same product on
// float32 operands that hold the same (bf16-rounded) values, so that both
// rows give the same C to float32 rounding.
//
//   dimsum_gemm_bf16 bf16|float32 N [reps] [--out file.f32]
//
// A and B are bench::gemm_inputs rounded to bf16 (nearest even). Prints
// "kernel=...", "peak_extra_mib=<x>" and "median_ms=<x>" and, with --out,
// writes C (n, n) as raw float32.
#include <algorithm>
#include <cstring>

#include <dimsum/dimsum.hpp>

#include "inputs.hpp"

DIMSUM_DIM(i);
DIMSUM_DIM(k);
DIMSUM_DIM(j);

int main(int argc, char** argv) {
  if (argc < 2 || (std::strcmp(argv[1], "bf16") != 0 && std::strcmp(argv[1], "float32") != 0)) return 2;
  const bool bf16_operands = std::strcmp(argv[1], "bf16") == 0;
  const bench::gemm_args args = bench::parse_gemm_args(argc - 1, argv + 1);
  if (!args.ok) return 2;
  std::printf("kernel=dimsum %s\n", bf16_operands ? dimsum::kernels::bf16_gemm_kernel() : dimsum::kernel_isa());
  const std::size_t n = args.n;
  const bench::gemm_inputs in(n);
  dimsum::tensor<dimsum::bf16, i, k> a(i{n}, k{n});
  dimsum::tensor<dimsum::bf16, k, j> b(k{n}, j{n});
  std::transform(in.a.begin(), in.a.end(), a.data(), [](float x) { return dimsum::bf16(x); });
  std::transform(in.b.begin(), in.b.end(), b.data(), [](float x) { return dimsum::bf16(x); });
  dimsum::tensor<float, i, k> af(i{n}, k{n});
  dimsum::tensor<float, k, j> bf(k{n}, j{n});
  std::transform(a.data(), a.data() + a.size(), af.data(), [](dimsum::bf16 x) { return static_cast<float>(x); });
  std::transform(b.data(), b.data() + b.size(), bf.data(), [](dimsum::bf16 x) { return static_cast<float>(x); });

  dimsum::tensor<float, i, j> c;
  auto forward = [&] {
    if (bf16_operands)
      c = dimsum::einsum<"i k, k j -> i j", float>(a, b);
    else
      c = dimsum::einsum<"i k, k j -> i j">(af, bf);
  };
  return bench::time_and_write(args, forward, [&] { return c.data(); }, n * n);
}
