// The bf16 GEMM (kernels/detail/gemm_bf16.hpp) on every path this build and
// CPU can run (AVX512-BF16's vdpbf16ps, and bf16 converted to float for the
// AVX-512, AVX2+FMA, AVX2 and scalar float kernels) against plain loops in
// double. Tolerances: the products of two bf16 are exact in float, so the
// kernel's error is that of float32 sums, (K + 4) * 2^-24 * sum |a_k b_k|
// (K roundings plus those of the K blocks and the store); against the float
// values the bf16 operands were rounded from, each product also carries
// the two roundings to bf16's 8 significant bits, (2 * 2^-8 + 2^-16).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

#include <dimsum/core/bf16.hpp>
#include <dimsum/kernels/gemm.hpp>
#include <dimsum/kernels/threads.hpp>

#include "arch_paths.hpp"

namespace {

namespace dk = dimsum::kernels;
using dimsum::bf16;

// One batched matrix product C[b][m][n] = alpha * sum_k A[b][m][k] B[b][k][n]
// + beta * C + bias[n], with each operand's strides chosen by the case.
struct bf16_problem {
  std::size_t nb = 1, m = 1, n = 1, k = 1;
  std::ptrdiff_t a_sb = 0, a_sm = 0, a_sk = 0, b_sb = 0, b_sk = 0, b_sn = 0, c_sb = 0, c_sm = 0, c_sn = 0;
  float alpha = 1, beta = 0;
  bool with_bias = false;
  std::vector<float> a_f, b_f;  // the float values before rounding
  std::vector<bf16> a, b;
  std::vector<float> c, bias;

  dk::contraction_args<bf16, float> args() {
    dk::contraction_args<bf16, float> x;
    x.a = a.data();
    x.b = b.data();
    x.c = c.data();
    x.alpha = alpha;
    x.beta = beta;
    auto one = [](dk::dim_group& g, std::size_t e, std::ptrdiff_t sa, std::ptrdiff_t sb, std::ptrdiff_t sc) {
      g.rank = 1;
      g.extents[0] = e;
      g.stride_a[0] = sa;
      g.stride_b[0] = sb;
      g.stride_c[0] = sc;
    };
    one(x.batch, nb, a_sb, b_sb, c_sb);
    one(x.m, m, a_sm, 0, c_sm);
    one(x.n, n, 0, b_sn, c_sn);
    one(x.k, k, a_sk, b_sk, 0);
    if (with_bias) {
      x.bias = bias.data();
      x.bias_n[0] = 1;
    }
    return x;
  }
};

// Row-major A (K innermost) and B (N innermost) unless `transposed`: then A
// has M innermost and B has K innermost (the gather paths of the packing).
bf16_problem make(std::size_t nb, std::size_t m, std::size_t n, std::size_t k, bool transposed, unsigned seed) {
  bf16_problem p;
  p.nb = nb, p.m = m, p.n = n, p.k = k;
  if (!transposed) {
    p.a_sk = 1, p.a_sm = std::ptrdiff_t(k), p.a_sb = std::ptrdiff_t(m * k);
    p.b_sn = 1, p.b_sk = std::ptrdiff_t(n), p.b_sb = std::ptrdiff_t(k * n);
  } else {
    p.a_sm = 1, p.a_sk = std::ptrdiff_t(m), p.a_sb = std::ptrdiff_t(m * k);
    p.b_sk = 1, p.b_sn = std::ptrdiff_t(k), p.b_sb = std::ptrdiff_t(k * n);
  }
  p.c_sn = 1, p.c_sm = std::ptrdiff_t(n), p.c_sb = std::ptrdiff_t(m * n);
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  p.a_f.resize(nb * m * k);
  p.b_f.resize(nb * k * n);
  for (auto& v : p.a_f) v = dist(gen);
  for (auto& v : p.b_f) v = dist(gen);
  for (float v : p.a_f) p.a.push_back(bf16(v));
  for (float v : p.b_f) p.b.push_back(bf16(v));
  p.c.resize(nb * m * n);
  for (auto& v : p.c) v = dist(gen);
  p.bias.resize(n);
  for (auto& v : p.bias) v = dist(gen);
  return p;
}

// Largest |C - reference| / bound over C, with the reference and bound in
// double from the bf16 operands (from_floats false) or from the floats they
// were rounded from (true). Below 1 passes.
double worst_ratio(const bf16_problem& p, const std::vector<float>& c0, bool from_floats) {
  const double u = std::ldexp(1.0, -24), u_bf16 = std::ldexp(1.0, -8);
  double worst = 0;
  for (std::size_t b = 0; b < p.nb; ++b)
    for (std::size_t i = 0; i < p.m; ++i)
      for (std::size_t j = 0; j < p.n; ++j) {
        double sum = 0, abs_sum = 0;
        for (std::size_t q = 0; q < p.k; ++q) {
          const std::size_t ia = b * std::size_t(p.a_sb) + i * std::size_t(p.a_sm) + q * std::size_t(p.a_sk);
          const std::size_t ib = b * std::size_t(p.b_sb) + q * std::size_t(p.b_sk) + j * std::size_t(p.b_sn);
          const double x = from_floats ? double(p.a_f[ia]) : double(static_cast<float>(p.a[ia]));
          const double y = from_floats ? double(p.b_f[ib]) : double(static_cast<float>(p.b[ib]));
          sum += x * y;
          abs_sum += std::abs(x * y);
        }
        const std::size_t ic = b * std::size_t(p.c_sb) + i * std::size_t(p.c_sm) + j * std::size_t(p.c_sn);
        const double rest = double(p.beta) * c0[ic] + (p.with_bias ? double(p.bias[j]) : 0.0);
        const double want = double(p.alpha) * sum + rest;
        double rel = double(p.k + 4) * u;
        if (from_floats) rel += 2 * u_bf16 + u_bf16 * u_bf16;
        // The alpha, beta and bias terms round once more each in float.
        const double bound = std::abs(double(p.alpha)) * rel * abs_sum + 4 * u * (std::abs(want) + std::abs(rest)) + 1e-30;
        worst = std::max(worst, std::abs(double(p.c[ic]) - want) / bound);
      }
  return worst;
}

template <class Arch>
void check_on(bf16_problem p) {
  const std::vector<float> c0 = p.c;
  dk::contract_on<Arch>(p.args());
  INFO("path " << Arch::name() << ", " << p.nb << " x " << p.m << " x " << p.n << " x " << p.k);
  CHECK(worst_ratio(p, c0, false) < 1.0);
  CHECK(worst_ratio(p, c0, true) < 1.0);
}

// Every path: the float kernels' archs, and vdpbf16ps where it runs.
template <class F>
void for_each_bf16_path(F&& f) {
  test::for_each_arch(f);
  if constexpr (dk::avx512_bf16_arch::supported()) {
    if (dk::avx512_bf16_arch::available()) return f(dk::avx512_bf16_arch{});
  }
  WARN("dimsum kernel path 'avx512bf16' skipped: "
       << (dk::avx512_bf16_arch::supported() ? "this CPU lacks it" : "not enabled at compile time"));
}

}  // namespace

TEST_CASE("bf16 gemm: odd sizes, odd K, row-major and transposed operands, within float32's bound", "[bf16][gemm]") {
  const std::size_t sizes[][4] = {{1, 1, 1, 1}, {1, 13, 70, 37}, {2, 7, 17, 64}, {1, 6, 64, 2}, {3, 19, 33, 5}};
  unsigned seed = 1;
  for (const auto& s : sizes)
    for (bool transposed : {false, true}) {
      const bf16_problem p = make(s[0], s[1], s[2], s[3], transposed, seed++);
      for_each_bf16_path([&](auto arch) { check_on<decltype(arch)>(p); });
    }
}

TEST_CASE("bf16 gemm: K deeper than a cache block, alpha, beta and a bias", "[bf16][gemm]") {
  bf16_problem p = make(1, 8, 40, 2100, false, 42);
  p.alpha = 0.5f;
  p.beta = -1.25f;
  for_each_bf16_path([&](auto arch) { check_on<decltype(arch)>(p); });
  p.beta = 0;
  p.with_bias = true;
  for_each_bf16_path([&](auto arch) { check_on<decltype(arch)>(p); });
}

TEST_CASE("bf16 gemm: sums are float32, not bf16", "[bf16][gemm]") {
  // 1 + 256 * 2^-8 = 2: a bf16 sum would stop at 1 (1 + 2^-8 rounds to 1).
  bf16_problem p = make(1, 1, 1, 257, false, 3);
  for (std::size_t q = 0; q < 257; ++q) {
    p.a[q] = bf16(q == 0 ? 1.0f : 0.0625f);
    p.b[q] = bf16(q == 0 ? 1.0f : 0.0625f);
  }
  for_each_bf16_path([&](auto arch) {
    bf16_problem r = p;
    dk::contract_on<decltype(arch)>(r.args());
    CHECK(r.c[0] == 2.0f);
  });
}

TEST_CASE("bf16 gemm: results are bit-identical on 1 and 2 threads, and contract takes best_bf16_gemm_arch",
          "[bf16][gemm][threads]") {
  const bf16_problem p = make(2, 50, 130, 90, false, 9);
  bf16_problem one = p, two = p, best = p;
  {
    test::thread_count_guard g(1);
    dk::contract_on<dk::best_bf16_gemm_arch>(one.args());
    dk::contract(best.args());
  }
  {
    test::thread_count_guard g(2);
    dk::contract_on<dk::best_bf16_gemm_arch>(two.args());
  }
  CHECK(one.c == two.c);
  CHECK(one.c == best.c);
  CHECK(worst_ratio(one, p.c, false) < 1.0);
}

TEST_CASE("bf16 gemm into a bf16 C: each float32 result rounded once in the store", "[bf16][gemm]") {
  if (!dk::bf16_rounds_in_store(64, 64)) {
    // no vdpbf16ps path in this build: contract_rounded declines and writes nothing
    bf16_problem p = make(1, 6, 64, 64, false, 5);
    std::vector<bf16> c16(p.m * p.n, bf16(-7.0f));
    auto args = p.args();
    CHECK_FALSE(dk::contract_rounded(args, c16.data()));
    for (bf16 v : c16) CHECK(v.bits() == bf16(-7.0f).bits());
    WARN("dimsum kernel path 'avx512bf16' skipped: not enabled at compile time");
    return;
  }
  // K beyond one cache block is declined (its sums are not complete when stored)
  CHECK_FALSE(dk::bf16_rounds_in_store(1u << 20, 64));
  enum variant { plain, alpha_bias, c_transposed, subnormal_results, inf_and_nan };
  const std::size_t sizes[][4] = {{1, 13, 70, 37}, {2, 7, 17, 64}, {1, 6, 64, 2}, {3, 19, 33, 5}, {1, 50, 130, 300}};
  unsigned seed = 100;
  for (const auto& s : sizes)
    for (bool transposed : {false, true})
      for (variant v : {plain, alpha_bias, c_transposed, subnormal_results, inf_and_nan}) {
        bf16_problem p = make(s[0], s[1], s[2], s[3], transposed, seed++);
        if (v == alpha_bias) {
          p.alpha = 0.75f;
          p.with_bias = true;
        }
        if (v == c_transposed) p.c_sn = std::ptrdiff_t(p.m), p.c_sm = 1;  // C's N strided: the store's per-element path
        if (v == subnormal_results) p.alpha = std::ldexp(1.0f, -132);  // alpha * sum below float's normal range
        if (v == inf_and_nan) {
          p.a[0] = bf16(INFINITY);      // row 0 of batch 0: inf, or NaN where B's k = 0 value is 0
          p.b[p.n > 1 ? 1 : 0] = bf16(0.0f);
        }
        // the reference: the float kernel's results (checked against double above), rounded one by one
        bf16_problem f = p;
        dk::contract(f.args());
        std::vector<bf16> c16(p.c.size(), bf16(-7.0f));
        auto args = p.args();
        args.beta = 0.5f;  // unused: C is written, never read
        REQUIRE(dk::contract_rounded(args, c16.data()));
        INFO(p.nb << " x " << p.m << " x " << p.n << " x " << p.k << (transposed ? " transposed" : "") << ", case "
                  << int(v));
        std::size_t differ = 0, nonfinite = 0;
        for (std::size_t b = 0; b < p.nb; ++b)
          for (std::size_t i = 0; i < p.m; ++i)
            for (std::size_t j = 0; j < p.n; ++j) {
              const std::size_t ic = b * std::size_t(p.c_sb) + i * std::size_t(p.c_sm) + j * std::size_t(p.c_sn);
              differ += c16[ic].bits() != bf16(f.c[ic]).bits();
              nonfinite += !std::isfinite(f.c[ic]);
            }
        CHECK(differ == 0);
        if (v == inf_and_nan) CHECK(nonfinite > 0);
        if (v == subnormal_results) {
          std::size_t subnormal = 0;
          for (float x : f.c) subnormal += std::fpclassify(x) == FP_SUBNORMAL;
          CHECK(subnormal > 0);
        }
        // and, without the special values, within bf16's half ulp of the float64 result
        if (v == plain) {
          bf16_problem r = p;
          for (std::size_t q = 0; q < r.c.size(); ++q) r.c[q] = c16[q].to_float();
          std::vector<float> c0 = p.c;
          double worst = 0;
          for (std::size_t i = 0; i < p.m; ++i)
            for (std::size_t j = 0; j < p.n; ++j) {
              double want = 0, abs_sum = 0;
              for (std::size_t q = 0; q < p.k; ++q) {
                const double x = p.a[i * std::size_t(p.a_sm) + q * std::size_t(p.a_sk)].to_float();
                const double y = p.b[q * std::size_t(p.b_sk) + j * std::size_t(p.b_sn)].to_float();
                want += x * y;
                abs_sum += std::abs(x * y);
              }
              const double bound = std::ldexp(std::abs(want), -8) + double(p.k + 4) * std::ldexp(abs_sum, -24) + 1e-30;
              worst = std::max(worst, std::abs(double(r.c[i * std::size_t(p.c_sm) + j]) - want) / bound);
            }
          CHECK(worst < 1.0);
        }
      }
}
