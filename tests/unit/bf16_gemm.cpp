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
        const double ratio = std::abs(double(p.c[ic]) - want) / bound;
        worst = std::isnan(ratio) ? INFINITY : std::max(worst, ratio);  // a NaN result fails
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

// Runs f on the bf16 path Arch where this build and CPU run it; warns
// otherwise.
template <class Arch, class F>
void on_bf16_path(F&& f) {
  if constexpr (Arch::supported()) {
    if (Arch::available()) {
      f(Arch{});
      return;
    }
  }
  WARN("dimsum kernel path '" << Arch::name() << "' skipped: "
                              << (Arch::supported() ? "this CPU (or OS) lacks it" : "not enabled at compile time"));
}

// Every path: the float kernels' archs, vdpbf16ps and AMX where they run.
template <class F>
void for_each_bf16_path(F&& f) {
  test::for_each_arch(f);
  on_bf16_path<dk::avx512_bf16_arch>(f);
  on_bf16_path<dk::amx_bf16_arch>(f);
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

TEST_CASE("bf16 gemm: results are bit-identical on 1 and 2 threads, and contract takes AMX or best_bf16_gemm_arch",
          "[bf16][gemm][threads]") {
  const bf16_problem p = make(2, 50, 130, 90, false, 9);
  const auto on = [&](auto arch) {
    using Arch = decltype(arch);
    INFO("path " << Arch::name());
    bf16_problem one = p, two = p;
    {
      test::thread_count_guard g(1);
      dk::contract_on<Arch>(one.args());
    }
    {
      test::thread_count_guard g(2);
      dk::contract_on<Arch>(two.args());
    }
    CHECK(one.c == two.c);
    CHECK(worst_ratio(one, p.c, false) < 1.0);
    return one;
  };
  bf16_problem best = p;
  dk::contract(best.args());
  if (dk::bf16_gemm_on_amx()) {
    CHECK(std::string(dk::bf16_gemm_kernel()) == "amx-bf16");
    on_bf16_path<dk::amx_bf16_arch>([&](auto arch) { CHECK(on(arch).c == best.c); });
    on_bf16_path<dk::avx512_bf16_arch>(on);
    return;
  }
  CHECK_FALSE((dk::amx_bf16_arch::supported() && dk::amx_bf16_arch::available()));
  CHECK(std::string(dk::bf16_gemm_kernel()) == dk::best_bf16_gemm_arch::name());
  CHECK(on(dk::best_bf16_gemm_arch{}).c == best.c);
}

TEST_CASE("bf16 gemm on AMX tiles: every A layout, edges of rows, columns and K, NaN next to A never read",
          "[bf16][gemm]") {
  on_bf16_path<dk::amx_bf16_arch>([&](auto arch) {
    using Arch = decltype(arch);
    // M and N past and short of the 32 x 32 blocks, K short of, at and past
    // the 32 values of a step; A transposed (rows contiguous: packed by
    // transposing 16 x 16 words), row-major (K contiguous) and both strided
    const std::size_t sizes[][4] = {{1, 32, 32, 32}, {1, 33, 31, 33}, {2, 16, 48, 17}, {1, 65, 70, 96}, {1, 40, 9, 130}};
    unsigned seed = 300;
    for (const auto& s : sizes)
      for (bool transposed : {false, true}) {
        const bf16_problem p = make(s[0], s[1], s[2], s[3], transposed, seed++);
        // a product of NaNs with K padded to 32 first, so that the packing
        // buffers hold NaN wherever this product's padding is not zeroed
        bf16_problem nan = make(s[0], s[1], s[2], (s[3] + 31) / 32 * 32, transposed, seed);
        std::fill(nan.a.begin(), nan.a.end(), bf16(NAN));
        std::fill(nan.b.begin(), nan.b.end(), bf16(NAN));
        dk::contract_on<Arch>(nan.args());
        check_on<Arch>(p);
        // A laid out again in a buffer of NaNs: its rows (or columns) padded
        // by 5 (the masked loads must not read past K, or past M where
        // rows are contiguous), and every other element (neither M nor K
        // contiguous: the per-element packing)
        for (std::ptrdiff_t spread : {0, 1}) {
          bf16_problem w = p;
          const std::ptrdiff_t m = std::ptrdiff_t(p.m), k = std::ptrdiff_t(p.k);
          if (spread == 0) {
            (transposed ? w.a_sk : w.a_sm) = (transposed ? m : k) + 5;
            w.a_sb = (transposed ? w.a_sk * k : w.a_sm * m) + 7;
          } else {
            w.a_sb *= 2, w.a_sm *= 2, w.a_sk *= 2;
          }
          w.a.assign(std::size_t(w.a_sb) * p.nb, bf16(NAN));
          for (std::size_t b = 0; b < p.nb; ++b)
            for (std::ptrdiff_t i = 0; i < m; ++i)
              for (std::ptrdiff_t q = 0; q < k; ++q)
                w.a[std::size_t(std::ptrdiff_t(b) * w.a_sb + i * w.a_sm + q * w.a_sk)] =
                    p.a[std::size_t(std::ptrdiff_t(b) * p.a_sb + i * p.a_sm + q * p.a_sk)];
          const std::vector<float> c0 = w.c;
          dk::contract_on<Arch>(w.args());
          INFO((spread ? "every other element" : "padded with NaN") << ", " << s[1] << " x " << s[2] << " x " << s[3]
                                                                     << (transposed ? ", transposed" : ""));
          CHECK(worst_ratio(w, c0, false) < 1.0);
        }
      }
  });
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
        if (dk::bf16_gemm_on_amx() && v != c_transposed) {
          // the vdpbf16ps path's rounded store, which contract_rounded does
          // not take here: within bf16's rounding of the AMX sums (the two
          // add the pairs' products in their own orders)
          on_bf16_path<dk::avx512_bf16_arch>([&](auto arch) {
            std::vector<bf16> v16(p.c.size(), bf16(-7.0f));
            auto plain_args = args;  // as contract_rounded passes them
            plain_args.c = nullptr;
            plain_args.beta = 0.0f;
            dk::detail::contract_bf16<decltype(arch)>(plain_args, v16.data());
            std::size_t far = 0;
            for (std::size_t q = 0; q < p.c.size(); ++q) {
              const float x = v16[q].to_float(), y = c16[q].to_float();
              far += !(x == y || std::abs(x - y) <= std::ldexp(std::abs(y), -7) || (std::isnan(x) && std::isnan(y)));
            }
            CHECK(far == 0);
          });
        }
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
              const double ratio = std::abs(double(r.c[i * std::size_t(p.c_sm) + j]) - want) / bound;
              worst = std::isnan(ratio) ? INFINITY : std::max(worst, ratio);
            }
          CHECK(worst < 1.0);
        }
      }
}
