// Tests of dimsum/kernels/gemm.hpp (and kernels/threads.hpp): the name-free
// batched contraction kernel against a plain-loops reference computed in
// double, on every arch path this machine can run, over odd sizes, absent
// groups, multi-dim groups with permuted / padded / reversed / broadcast
// layouts, alpha and beta, and 1 or 2 threads.

#include <dimsum/kernels/gemm.hpp>
#include <dimsum/kernels/threads.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <catch2/catch.hpp>

#include "arch_paths.hpp"

// Counts heap allocations so a test can show the kernel makes none.
#include "heap_watch.hpp"

namespace {

namespace dk = dimsum::kernels;

// ---------------------------------------------------------------------------
// Problem description and operand layouts (independent of the kernel's code)

enum role : std::size_t { batch_role = 0, m_role = 1, n_role = 2, k_role = 3 };
using shape = std::array<std::vector<std::size_t>, 4>;  // extents by role

std::size_t group_size(const std::vector<std::size_t>& e) {
  std::size_t s = 1;
  for (auto x : e) s *= x;
  return s;
}

struct layout_options {
  bool permute = false;  // dims of the operand in a random memory order
  bool pad = false;      // random gaps between rows (non-contiguous)
  bool reverse = false;  // some dims run backwards (negative strides)
  bool column_major = false;  // dims in reverse order (first dim innermost)
};

// One operand: storage, the offset of its logical element 0, and a stride per
// dim per role. Unused storage (padding) holds `fill`.
template <class T>
struct operand {
  std::vector<T> data;
  std::ptrdiff_t base = 0;
  std::array<std::vector<std::ptrdiff_t>, 4> stride;

  T* origin() { return data.data() + base; }
  // Offset of flat index `flat` of role r (row-major over the group's dims).
  std::ptrdiff_t offset(const shape& s, role r, std::size_t flat) const {
    std::ptrdiff_t off = 0;
    for (std::size_t d = s[r].size(); d-- > 0;) {
      off += static_cast<std::ptrdiff_t>(flat % s[r][d]) * stride[r][d];
      flat /= s[r][d];
    }
    return off;
  }
};

template <class T>
operand<T> make_operand(const shape& s, std::vector<role> roles, const layout_options& o,
                        std::mt19937& rng, T fill) {
  struct dim {
    role r;
    std::size_t i, e;
  };
  std::vector<dim> dims;
  operand<T> op;
  for (role r : roles) {
    op.stride[r].assign(s[r].size(), 0);
    for (std::size_t i = 0; i < s[r].size(); ++i) dims.push_back({r, i, s[r][i]});
  }
  if (o.permute) std::shuffle(dims.begin(), dims.end(), rng);
  if (o.column_major) std::reverse(dims.begin(), dims.end());
  std::ptrdiff_t run = 1;
  for (auto it = dims.rbegin(); it != dims.rend(); ++it) {
    const auto e = static_cast<std::ptrdiff_t>(std::max<std::size_t>(it->e, 1));
    const bool back = o.reverse && it->e > 0 && rng() % 2 == 0;
    op.stride[it->r][it->i] = back ? -run : run;
    if (back) op.base += (e - 1) * run;
    run *= e + (o.pad ? static_cast<std::ptrdiff_t>(rng() % 3) : 0);
  }
  op.data.assign(static_cast<std::size_t>(run), fill);
  return op;
}

template <class T>
dk::dim_group make_group(const shape& s, role r, const operand<T>& a, const operand<T>& b,
                         const operand<T>& c) {
  dk::dim_group g;
  g.rank = s[r].size();
  for (std::size_t d = 0; d < g.rank; ++d) {
    g.extents[d] = s[r][d];
    if (!a.stride[r].empty()) g.stride_a[d] = a.stride[r][d];
    if (!b.stride[r].empty()) g.stride_b[d] = b.stride[r][d];
    if (!c.stride[r].empty()) g.stride_c[d] = c.stride[r][d];
  }
  return g;
}

// A complete test problem: operands filled with random values where the
// contraction addresses them and `fill` elsewhere, plus the expected C
// storage (reference values where addressed, the untouched fill elsewhere).
template <class T>
struct problem {
  shape s;
  operand<T> a, b, c;
  T alpha = 1, beta = 0;
  std::vector<double> expected;  // per element of c.data
  std::vector<double> bound;     // allowed |error| per element of c.data

  dk::contraction_args<T> args() {
    dk::contraction_args<T> x;
    x.a = a.origin();
    x.b = b.origin();
    x.c = c.origin();
    x.batch = make_group(s, batch_role, a, b, c);
    x.m = make_group(s, m_role, a, b, c);
    x.n = make_group(s, n_role, a, b, c);
    x.k = make_group(s, k_role, a, b, c);
    x.alpha = alpha;
    x.beta = beta;
    return x;
  }
};

struct problem_options {
  layout_options la, lb, lc;
  double alpha = 1, beta = 0;
  bool c_nan = false;  // start with NaN in C's addressed elements
  bool a_batch_broadcast = false;  // A's batch strides are 0: one A for all
  unsigned seed = 1;
};

template <class T>
problem<T> make_problem(const shape& s, const problem_options& o) {
  std::mt19937 rng(o.seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  const T nan = std::numeric_limits<T>::quiet_NaN();
  problem<T> p;
  p.s = s;
  p.alpha = static_cast<T>(o.alpha);
  p.beta = static_cast<T>(o.beta);
  // NaN in the inputs' padding: a read outside the operand poisons C.
  p.a = make_operand<T>(s, {batch_role, m_role, k_role}, o.la, rng, nan);
  if (o.a_batch_broadcast) std::fill(p.a.stride[batch_role].begin(), p.a.stride[batch_role].end(), 0);
  p.b = make_operand<T>(s, {batch_role, k_role, n_role}, o.lb, rng, nan);
  p.c = make_operand<T>(s, {batch_role, m_role, n_role}, o.lc, rng, T(777));

  const std::size_t nb = group_size(s[batch_role]), nm = group_size(s[m_role]),
                    nn = group_size(s[n_role]), nk = group_size(s[k_role]);
  for (std::size_t bi = 0; bi < nb; ++bi) {
    for (std::size_t i = 0; i < nm; ++i)
      for (std::size_t k = 0; k < nk; ++k)
        p.a.origin()[p.a.offset(s, batch_role, bi) + p.a.offset(s, m_role, i) +
                     p.a.offset(s, k_role, k)] = static_cast<T>(u(rng));
    for (std::size_t k = 0; k < nk; ++k)
      for (std::size_t j = 0; j < nn; ++j)
        p.b.origin()[p.b.offset(s, batch_role, bi) + p.b.offset(s, k_role, k) +
                     p.b.offset(s, n_role, j)] = static_cast<T>(u(rng));
    for (std::size_t i = 0; i < nm; ++i)
      for (std::size_t j = 0; j < nn; ++j)
        p.c.origin()[p.c.offset(s, batch_role, bi) + p.c.offset(s, m_role, i) +
                     p.c.offset(s, n_role, j)] = o.c_nan ? nan : static_cast<T>(u(rng));
  }

  p.expected.assign(p.c.data.begin(), p.c.data.end());
  p.bound.assign(p.c.data.size(), 0.0);
  // Error bound of a length-K dot product in T plus the scaling, doubled to
  // cover the reference's own rounding: gamma_{K+2} * sum of magnitudes.
  const double gamma = 2.0 * double(nk + 2) * double(std::numeric_limits<T>::epsilon());
  for (std::size_t bi = 0; bi < nb; ++bi)
    for (std::size_t i = 0; i < nm; ++i)
      for (std::size_t j = 0; j < nn; ++j) {
        double sum = 0, mag = 0;
        for (std::size_t k = 0; k < nk; ++k) {
          const double x = double(p.a.origin()[p.a.offset(s, batch_role, bi) +
                                               p.a.offset(s, m_role, i) + p.a.offset(s, k_role, k)]) *
                           double(p.b.origin()[p.b.offset(s, batch_role, bi) +
                                               p.b.offset(s, k_role, k) + p.b.offset(s, n_role, j)]);
          sum += x;
          mag += std::fabs(x);
        }
        const std::ptrdiff_t at = p.c.base + p.c.offset(s, batch_role, bi) +
                                  p.c.offset(s, m_role, i) + p.c.offset(s, n_role, j);
        const auto e = static_cast<std::size_t>(at);
        const double old = p.c.data[e];
        const double scaled_old = o.beta == 0 ? 0.0 : o.beta * old;
        p.expected[e] = o.alpha * sum + scaled_old;
        p.bound[e] = gamma * (std::fabs(o.alpha) * mag + std::fabs(scaled_old)) +
                     4 * double(std::numeric_limits<T>::min());
      }
  return p;
}

// Number of C elements that differ from the expectation (addressed elements
// within the bound, every other element bit-for-bit untouched).
template <class T>
std::size_t mismatches(const problem<T>& p) {
  std::size_t bad = 0;
  for (std::size_t e = 0; e < p.c.data.size(); ++e) {
    const double got = p.c.data[e], want = p.expected[e];
    const bool ok = std::isnan(want) ? std::isnan(got) : std::fabs(got - want) <= p.bound[e];
    if (!ok) {
      if (bad < 5) UNSCOPED_INFO("C storage[" << e << "] = " << got << ", expected " << want);
      ++bad;
    }
  }
  return bad;
}

// ---------------------------------------------------------------------------
// Arch paths: test::for_each_arch (arch_paths.hpp)

using test::for_each_arch;

template <class Arch, class T>
void check_on(problem<T> p) {  // by value: each arch gets fresh storage
  dk::contract_on<Arch>(p.args());
  CHECK(mismatches(p) == 0);
}

shape mnk(std::size_t m, std::size_t n, std::size_t k) { return {{{}, {m}, {n}, {k}}}; }

/// Whether two problems' C storage is bit-for-bit the same.
template <class T>
bool same_c(const problem<T>& x, const problem<T>& y) {
  return x.c.data.size() == y.c.data.size() &&
         std::memcmp(x.c.data.data(), y.c.data.data(), x.c.data.size() * sizeof(T)) == 0;
}

using test::thread_count_guard;

}  // namespace

TEMPLATE_TEST_CASE("kernels/gemm: row-major matrix products of odd sizes match the reference",
                   "[kernels][gemm]", float, double) {
  thread_count_guard one(1);
  std::vector<std::array<std::size_t, 3>> sizes;
  for (std::size_t m : {1, 7, 17, 33})
    for (std::size_t n : {1, 7, 17, 33})
      for (std::size_t k : {1, 7, 17, 33}) sizes.push_back({m, n, k});
  // Exact register tiles, and sizes past one cache block in M (MC) and K (KC).
  sizes.push_back({6, 16, 256});
  sizes.push_back({12, 32, 1});
  sizes.push_back({131, 67, 259});
  sizes.push_back({250, 45, 300});
  // N edges of exactly one and of three vectors (AVX2 floats), past four
  // B panels (A packed, not read in place).
  sizes.push_back({13, 8, 9});
  sizes.push_back({13, 24, 9});
  sizes.push_back({13, 70, 9});
  for_each_arch([&](auto arch) {
    using Arch = decltype(arch);
    for (auto [m, n, k] : sizes) {
      INFO("arch " << Arch::name() << ", M=" << m << " N=" << n << " K=" << k);
      check_on<Arch>(make_problem<TestType>(mnk(m, n, k), {}));
    }
  });
}

TEMPLATE_TEST_CASE("kernels/gemm: tiny cache blocks exercise every blocking loop and edge",
                   "[kernels][gemm]", float, double) {
  thread_count_guard one(1);
  namespace kd = dimsum::kernels::detail;
  for_each_arch([&](auto arch) {
    using Arch = decltype(arch);
    constexpr std::size_t w = kd::simd_ops<TestType, Arch>::width;
    // MC = 2 tiles, KC = 5, NC = 2 tiles: many blocks in every loop even for
    // small problems, and partial blocks and tiles at every edge.
    using tiny = kd::gemm_blocking<3, 2 * w, 6, 5, 4 * w>;
    for (auto [m, n, k] : {std::array<std::size_t, 3>{37, 53, 29}, {6, 16, 5}, {1, 1, 11}, {13, 9 * w + 1, 10}}) {
      INFO("arch " << Arch::name() << ", M=" << m << " N=" << n << " K=" << k);
      for (double beta : {0.0, 0.5}) {
        problem_options o;
        o.beta = beta;
        o.alpha = 1.5;
        o.lb.permute = o.lc.permute = true;
        o.seed = static_cast<unsigned>(m * 131 + k);
        auto p = make_problem<TestType>(mnk(m, n, k), o);
        kd::contract_blocked<TestType, Arch, tiny>(p.args());
        CHECK(mismatches(p) == 0);
      }
    }
  });
}

TEMPLATE_TEST_CASE("kernels/gemm: every combination of present and absent batch/M/N/K groups",
                   "[kernels][gemm]", float, double) {
  thread_count_guard one(1);
  // Bit r of `present` says role r has dims; an absent role is a rank-0 group
  // (one index): no K is an outer product, only K is a dot product.
  for_each_arch([&](auto arch) {
    using Arch = decltype(arch);
    for (unsigned present = 0; present < 16; ++present) {
      shape s;
      const std::array<std::vector<std::size_t>, 4> dims{
          {{3}, {5, 2}, {19}, {4, 9}}};
      for (std::size_t r = 0; r < 4; ++r)
        if (present & (1u << r)) s[r] = dims[r];
      INFO("arch " << Arch::name() << ", present roles mask " << present);
      problem_options o;
      o.seed = present;
      o.beta = 0.25;
      check_on<Arch>(make_problem<TestType>(s, o));
    }
  });
}

TEMPLATE_TEST_CASE("kernels/gemm: multi-dim groups with permuted, padded and reversed layouts",
                   "[kernels][gemm]", float, double) {
  thread_count_guard one(1);
  for_each_arch([&](auto arch) {
    using Arch = decltype(arch);
    std::mt19937 rng(42);
    for (int trial = 0; trial < 40; ++trial) {
      shape s;
      for (std::size_t r = 0; r < 4; ++r) {
        const std::size_t rank = rng() % (r == batch_role ? 3 : 4);
        for (std::size_t d = 0; d < rank; ++d) s[r].push_back(1 + rng() % 6);  // extents of 1 too
      }
      problem_options o;
      o.seed = static_cast<unsigned>(trial);
      o.la = {true, trial % 2 == 0, trial % 3 == 0};
      o.lb = {true, trial % 3 != 0, trial % 2 == 0};
      o.lc = {trial % 4 != 0, trial % 2 == 1, trial % 5 == 0};
      o.alpha = trial % 3 == 0 ? -0.75 : 1.0;
      o.beta = trial % 2 == 0 ? 0.0 : 2.0;
      INFO("arch " << Arch::name() << ", trial " << trial);
      check_on<Arch>(make_problem<TestType>(s, o));
    }
  });
}

TEMPLATE_TEST_CASE("kernels/gemm: C may be a transposed or strided view", "[kernels][gemm]",
                   float, double) {
  thread_count_guard one(1);
  for_each_arch([&](auto arch) {
    using Arch = decltype(arch);
    problem_options transposed;
    transposed.beta = 1.0;
    transposed.lc.column_major = true;
    {
      INFO("arch " << Arch::name() << ", column-major C");
      check_on<Arch>(make_problem<TestType>(mnk(37, 41, 23), transposed));
    }
    problem_options padded;
    padded.lc.pad = true;
    padded.lc.reverse = true;
    padded.lc.column_major = true;
    INFO("arch " << Arch::name() << ", padded, reversed, column-major C");
    check_on<Arch>(make_problem<TestType>(shape{{{2}, {3, 7}, {5, 4}, {9}}}, padded));
  });
}

TEMPLATE_TEST_CASE("kernels/gemm: alpha scales the product and beta the old C",
                   "[kernels][gemm]", float, double) {
  thread_count_guard one(1);
  for_each_arch([&](auto arch) {
    using Arch = decltype(arch);
    for (auto [alpha, beta] : {std::pair{1.0, 1.0}, {0.5, -2.0}, {0.0, 3.0}, {-1.0, 0.0}}) {
      problem_options o;
      o.alpha = alpha;
      o.beta = beta;
      INFO("arch " << Arch::name() << ", alpha " << alpha << " beta " << beta);
      check_on<Arch>(make_problem<TestType>(mnk(29, 35, 300), o));
    }
  });
}

TEMPLATE_TEST_CASE("kernels/gemm: beta == 0 never reads C, so NaNs in C do not leak",
                   "[kernels][gemm]", float, double) {
  thread_count_guard one(1);
  for_each_arch([&](auto arch) {
    using Arch = decltype(arch);
    for (auto s : {mnk(17, 33, 7), mnk(6, 16, 300), shape{{{2}, {5, 3}, {4, 6}, {}}}}) {
      problem_options o;
      o.c_nan = true;
      o.lc.permute = true;
      INFO("arch " << Arch::name());
      auto p = make_problem<TestType>(s, o);
      dk::contract_on<Arch>(p.args());
      CHECK(mismatches(p) == 0);
      const std::size_t nan_left = static_cast<std::size_t>(std::count_if(
          p.c.data.begin(), p.c.data.end(), [](TestType x) { return std::isnan(x); }));
      CHECK(nan_left == 0);
    }
  });
}

TEMPLATE_TEST_CASE("kernels/gemm: an empty K scales C by beta, an empty M or batch leaves C alone",
                   "[kernels][gemm]", float, double) {
  thread_count_guard one(1);
  for_each_arch([&](auto arch) {
    using Arch = decltype(arch);
    std::vector<TestType> a(8, 1), b(8, 1), c{1, 2, 3, 4, 5, 6};
    dk::contraction_args<TestType> x;
    x.a = a.data();
    x.b = b.data();
    x.c = c.data();
    x.m.rank = x.n.rank = x.k.rank = 1;
    x.m.extents[0] = 2;
    x.m.stride_c[0] = 3;
    x.n.extents[0] = 3;
    x.n.stride_c[0] = 1;
    x.k.extents[0] = 0;
    x.beta = 2;
    dk::contract_on<Arch>(x);
    CHECK(c == std::vector<TestType>{2, 4, 6, 8, 10, 12});
    x.beta = 0;
    c.assign(6, std::numeric_limits<TestType>::quiet_NaN());
    dk::contract_on<Arch>(x);
    CHECK(c == std::vector<TestType>(6, 0));

    c = {1, 2, 3, 4, 5, 6};
    x.k.extents[0] = 2;
    x.m.extents[0] = 0;
    dk::contract_on<Arch>(x);
    x.m.extents[0] = 2;
    x.batch.rank = 1;  // a batch dim of extent 0
    dk::contract_on<Arch>(x);
    CHECK(c == std::vector<TestType>{1, 2, 3, 4, 5, 6});
  });
}

TEMPLATE_TEST_CASE("kernels/gemm: an operand broadcast along a dim (stride 0)",
                   "[kernels][gemm]", float, double) {
  thread_count_guard one(1);
  // A[b, m, k] with stride 0 along b: one matrix shared by the whole batch.
  for_each_arch([&](auto arch) {
    using Arch = decltype(arch);
    problem_options o;
    o.a_batch_broadcast = true;
    o.beta = -1.0;
    INFO("arch " << Arch::name());
    check_on<Arch>(make_problem<TestType>(shape{{{4}, {9}, {21}, {13}}}, o));
  });
}

/// Runs one problem on 1, then 2 and 3 threads, under blocking Blk (or the
/// GEMM's own when !use_blk): each result right, and 2 and 3 threads
/// bit-identical to 1.
template <class T, class Blk>
void check_thread_counts_agree(const shape& s, const problem_options& o, bool use_blk) {
  auto run = [&](problem<T>& p, int threads) {
    thread_count_guard g(threads);
    if (use_blk)
      dimsum::kernels::detail::contract_blocked<T, dk::best_gemm_arch, Blk>(p.args());
    else
      dk::contract(p.args());
  };
  auto one = make_problem<T>(s, o);
  run(one, 1);
  CHECK(mismatches(one) == 0);
  for (int threads : {2, 3}) {
    INFO(threads << " threads");
    auto more = make_problem<T>(s, o);
    run(more, threads);
    CHECK(mismatches(more) == 0);
    CHECK(same_c(one, more));
  }
}

TEMPLATE_TEST_CASE("kernels/gemm: results are bit-identical on 1, 2 and 3 threads",
                   "[kernels][gemm][threads]", float, double) {
  namespace kd = dimsum::kernels::detail;
  using tiny = kd::gemm_blocking<3, 2 * kd::simd_ops<TestType, dk::best_gemm_arch>::width, 6, 5,
                                 4 * kd::simd_ops<TestType, dk::best_gemm_arch>::width>;
  // Each shape is big enough to be split, and picks one split: a team
  // sharing packed B over MC blocks of M (tall: one matrix; with tiny
  // blocks many B blocks, so the double-buffered B and the waits between
  // K blocks are exercised; the last with B and C padded and permuted),
  // batch entries x ranges of M (odd batch), ranges of N (few rows), whole
  // batch entries (even batch). 3 threads on a 2-core machine: a team
  // member often starts late or is descheduled mid-call.
  const std::vector<shape> shapes{mnk(203, 61, 97),        shape{{{3}, {60}, {70}, {50}}},
                                  mnk(9, 400, 300),        shape{{{4}, {40}, {50}, {70}}},
                                  shape{{{}, {150}, {7, 13}, {71}}}};
  for (bool tiny_blocks : {false, true}) {
    for (const auto& s : shapes) {
      INFO("shape #" << (&s - shapes.data()) << (tiny_blocks ? ", tiny blocks" : ""));
      problem_options o;
      o.beta = 0.5;
      o.la.permute = true;
      o.lb.pad = o.lc.permute = &s == &shapes.back();
      check_thread_counts_agree<TestType, tiny>(s, o, tiny_blocks);
    }
  }
}

TEMPLATE_TEST_CASE("kernels/gemm: a team splitting B blocks by columns (A read in place) matches 1 thread",
                   "[kernels][gemm][threads]", float, double) {
  // A team's pieces are an M block times half of a B block's columns when A
  // is read in place and a block has 4 or more panels; M blocks are equal
  // runs of MR tiles, as many as a multiple of the threads. Row-major A (K
  // contiguous) under a tiny blocking of 4 panels per B block (three B
  // blocks in N, the last one's last panel partial, and several in K), and
  // under the GEMM's own blocking (one block of 5 panels for float).
  namespace kd = dimsum::kernels::detail;
  constexpr std::size_t w = kd::simd_ops<TestType, dk::best_gemm_arch>::width;
  using four_panels = kd::gemm_blocking<3, 2 * w, 6, 5, 8 * w>;
  STATIC_REQUIRE(four_panels::nc <= kd::unpacked_a_max_cols<four_panels>);
  const std::vector<shape> shapes{mnk(203, 24 * w - 5, 23), mnk(300, 300, 70)};
  for (bool tiny_blocks : {true, false}) {
    for (const auto& s : shapes) {
      INFO("shape #" << (&s - shapes.data()) << (tiny_blocks ? ", four-panel blocks" : ""));
      problem_options o;
      o.beta = 0.5;
      check_thread_counts_agree<TestType, four_panels>(s, o, tiny_blocks);
    }
  }
}

TEMPLATE_TEST_CASE("kernels/gemm: the team's M blocks are equal runs of tiles", "[kernels][gemm][threads]",
                   float) {
  namespace kd = dimsum::kernels::detail;
  // 1024 rows, MC 60, MR 6, 2 threads: 18 blocks of 9 or 10 tiles (not 17
  // blocks of 60 rows and one of 4).
  const kd::team_m_blocks b(1024, 6, 60, 2);
  CHECK(b.count == 18);
  CHECK(b.max_rows == 60);
  std::size_t rows = 0;
  for (std::size_t j = 0; j < b.count; ++j) {
    const std::size_t n = b.first(j + 1) - b.first(j);
    CHECK(n <= 60);
    CHECK(n >= (j + 1 == b.count ? 1u : 54u));
    rows += n;
  }
  CHECK(rows == 1024);
  CHECK(b.first(0) == 0);
  // 3 threads, 7 rows of MR 6 under MC 6: 3 blocks of whole tiles, one empty.
  const kd::team_m_blocks c(7, 6, 6, 3);
  CHECK(c.count == 3);
  CHECK(c.first(3) == 7);
}

TEMPLATE_TEST_CASE("kernels/gemm: A read in place and A packed give bit-identical results",
                   "[kernels][gemm]", float, double) {
  // A K-contiguous A is read in place when a column block has at most four
  // B micro-panels, and packed otherwise. The same problem under blockings
  // with narrow and wide column blocks takes each path once N is past four
  // panels (the last two N; the first two run in place under both), on
  // every arch, with edge tiles in M and N (narrow ones of at most one
  // vector among them) and beta != 0.
  namespace kd = dimsum::kernels::detail;
  thread_count_guard one(1);
  for_each_arch([&](auto arch) {
    using Arch = decltype(arch);
    constexpr std::size_t w = kd::simd_ops<TestType, Arch>::width;
    using narrow = kd::gemm_blocking<4, 2 * w, 8, 16, 4 * w>;   // every block in place
    using wide = kd::gemm_blocking<4, 2 * w, 8, 16, 16 * w>;    // 8 panels per block: packed
    STATIC_REQUIRE(narrow::nc <= kd::unpacked_a_max_cols<narrow>);
    STATIC_REQUIRE(wide::nc > kd::unpacked_a_max_cols<wide>);
    for (std::size_t n : {w, 3 * w, 11 * w + 1, 11 * w + w / 2 + 1}) {
      INFO("arch " << Arch::name() << ", N=" << n);
      problem_options o;
      o.alpha = 1.5;
      o.beta = 0.5;
      o.seed = static_cast<unsigned>(n);
      auto in_place = make_problem<TestType>(mnk(23, n, 37), o);
      auto packed = in_place;
      kd::contract_blocked<TestType, Arch, narrow>(in_place.args());
      kd::contract_blocked<TestType, Arch, wide>(packed.args());
      CHECK(mismatches(in_place) == 0);
      CHECK(mismatches(packed) == 0);
      CHECK(same_c(in_place, packed));
    }
  });
}

TEMPLATE_TEST_CASE("kernels/gemm: a bias along N is added in the store, as accumulating onto it would",
                   "[kernels][gemm]", float, double) {
  // C = alpha A B + beta C + bias[n], the bias laid out on its own (N dims
  // permuted, padded, reversed) so its dims merge differently from C's.
  // With beta == 0 the result is bit-identical to writing the bias into C
  // and accumulating (beta == 1), on every arch (each multiply-add is
  // fused or not by construction, whatever -ffp-contract). Multi-dim and narrow N, several K blocks
  // (tiny blocking), an empty K (C = bias), on every arch.
  namespace kd = dimsum::kernels::detail;
  thread_count_guard one(1);
  const std::vector<shape> shapes{shape{{{2}, {7}, {3, 5}, {9}}}, mnk(13, 4, 20), mnk(5, 40, 3),
                                  shape{{{}, {6}, {2, 3}, {0}}}};
  for_each_arch([&](auto arch) {
    using Arch = decltype(arch);
    constexpr std::size_t w = kd::simd_ops<TestType, Arch>::width;
    using tiny = kd::gemm_blocking<3, 2 * w, 6, 5, 4 * w>;
    for (const shape& s : shapes)
      for (double beta : {0.0, 0.5})
        for (bool tiny_blocks : {false, true}) {
          INFO("arch " << Arch::name() << ", shape #" << (&s - shapes.data()) << ", beta " << beta
                       << (tiny_blocks ? ", tiny blocks" : ""));
          problem_options o;
          o.alpha = 1.25;
          o.beta = beta;
          o.lc.pad = true;
          o.seed = static_cast<unsigned>(7 + (&s - shapes.data()));
          auto with_bias = make_problem<TestType>(s, o);
          std::mt19937 rng(99);
          layout_options lbias;
          lbias.permute = lbias.pad = lbias.reverse = true;
          auto bias = make_operand<TestType>(s, {n_role}, lbias, rng, TestType(0));
          const std::size_t nn = group_size(s[n_role]);
          std::uniform_real_distribution<double> u(-2.0, 2.0);
          for (std::size_t j = 0; j < nn; ++j) bias.origin()[bias.offset(s, n_role, j)] = static_cast<TestType>(u(rng));
          auto prefilled = with_bias;
          const std::size_t nb = group_size(s[batch_role]), nm = group_size(s[m_role]);
          for (std::size_t bi = 0; bi < nb; ++bi)
            for (std::size_t i = 0; i < nm; ++i)
              for (std::size_t j = 0; j < nn; ++j) {
                const TestType bj = bias.origin()[bias.offset(s, n_role, j)];
                const std::ptrdiff_t at = with_bias.c.base + with_bias.c.offset(s, batch_role, bi) +
                                          with_bias.c.offset(s, m_role, i) + with_bias.c.offset(s, n_role, j);
                const auto e = static_cast<std::size_t>(at);
                with_bias.expected[e] += double(bj);
                with_bias.bound[e] += 4 * std::fabs(double(bj)) * double(std::numeric_limits<TestType>::epsilon());
                prefilled.c.data[e] = bj;
              }
          auto args = with_bias.args();
          args.bias = bias.origin();
          for (std::size_t d = 0; d < s[n_role].size(); ++d) args.bias_n[d] = bias.stride[n_role][d];
          auto pre = prefilled.args();
          pre.beta = 1;
          if (tiny_blocks) {
            kd::contract_blocked<TestType, Arch, tiny>(args);
            kd::contract_blocked<TestType, Arch, tiny>(pre);
          } else {
            dk::contract_on<Arch>(args);
            dk::contract_on<Arch>(pre);
          }
          CHECK(mismatches(with_bias) == 0);
          if (beta == 0.0)
            CHECK(same_c(with_bias, prefilled));
        }
  });
}

TEMPLATE_TEST_CASE("kernels/gemm: contract runs best_gemm_arch", "[kernels][gemm]", float,
                   double) {
  STATIC_REQUIRE(dk::best_gemm_arch::supported());
  INFO("best_gemm_arch is " << dk::best_gemm_arch::name());
  for (int threads : {1, 2}) {
    thread_count_guard g(threads);
    problem_options o;
    o.la.permute = o.lb.pad = o.lc.reverse = true;
    auto p = make_problem<TestType>(shape{{{2}, {30, 3}, {7, 11}, {5, 20}}}, o);
    dk::contract(p.args());
    CHECK(mismatches(p) == 0);
  }
}

TEMPLATE_TEST_CASE("kernels/gemm: the AVX-512 register shapes (12 x 32 attention, 6 x 64 GEMM) run on AVX2 registers",
                   "[kernels][gemm]", float, double) {
  // The AVX-512 path cannot run on a machine without AVX-512; its tile shapes
  // and blocking logic can, on AVX2 batches (with register spills).
  thread_count_guard one(1);
  namespace kd = dimsum::kernels::detail;
  using Arch = xsimd::fma3<xsimd::avx2>;
  if constexpr (Arch::supported()) {
    if (!test::runnable<Arch>()) return;
    using attention_like = kd::default_blocking<TestType, xsimd::avx512f>;
    using gemm_like = kd::contract_blocking<TestType, xsimd::avx512f>;
    // N of 1..4 vectors and over: every vector-column count of the 6 x 64
    // tile (an edge tile runs only the columns it needs).
    for (auto s : {mnk(131, 67, 259), mnk(12, 32, 3), mnk(25, 97, 1), mnk(13, 20, 9), mnk(7, 40, 17), mnk(19, 57, 5)}) {
      auto p = make_problem<TestType>(s, {});
      kd::contract_blocked<TestType, Arch, attention_like>(p.args());
      CHECK(mismatches(p) == 0);
      auto q = make_problem<TestType>(s, {});
      kd::contract_blocked<TestType, Arch, gemm_like>(q.args());
      CHECK(mismatches(q) == 0);
    }
  }
}

TEST_CASE("kernels/gemm: no heap allocation for small problems, none after warm-up",
          "[kernels][gemm]") {
  if (!DIMSUM_TEST_COUNT_ALLOCATIONS) {
    WARN("allocation counting is off under AddressSanitizer");
    return;
  }
  thread_count_guard one(1);
  // The seed attention's score shape: (b h) q_posn k_posn <- d_head.
  auto small = make_problem<float>(shape{{{12, 2}, {20}, {20}, {10}}}, {});
  auto args = small.args();
  long before = heap_watch::allocations.load();
  dk::contract(args);
  CHECK(heap_watch::allocations.load() - before == 0);

  auto large = make_problem<float>(mnk(300, 300, 300), {});
  auto big = large.args();
  dk::contract(big);  // grows this thread's packing buffer once
  before = heap_watch::allocations.load();
  dk::contract(big);
  CHECK(heap_watch::allocations.load() - before == 0);
  CHECK(mismatches(large) == 0);
}

TEST_CASE("kernels/threads: set_num_threads sets what num_threads reports", "[kernels][threads]") {
  const int initial = dimsum::num_threads();
  CHECK(initial >= 1);
  dimsum::set_num_threads(2);
  CHECK(dimsum::num_threads() == 2);
  dimsum::set_num_threads(0);
  CHECK(dimsum::num_threads() == initial);
}
