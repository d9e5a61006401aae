// Helpers of the GEMM benches (bench_gemm.cpp, bench_gemm_tiles.cpp): random
// operands and one-dim groups for kernels::contraction_args.
#pragma once
#include <dimsum/kernels/contraction_args.hpp>

#include <cstddef>
#include <random>
#include <vector>

namespace bench {

/// n uniform values in [-1, 1) from a fixed seed.
inline std::vector<float> random_vector(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

/// A group of one dim of `extent` with strides sa, sb, sc in A, B and C.
inline dimsum::kernels::dim_group one_dim(std::size_t extent, std::ptrdiff_t sa, std::ptrdiff_t sb,
                                          std::ptrdiff_t sc) {
  dimsum::kernels::dim_group g;
  g.rank = 1;
  g.extents[0] = extent;
  g.stride_a[0] = sa;
  g.stride_b[0] = sb;
  g.stride_c[0] = sc;
  return g;
}

}  // namespace bench
