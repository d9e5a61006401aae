// Attention variants on the fused path (plan/fusion_patterns.hpp,
// kernels/attention.hpp): sliding windows and causal masks with an offset,
// padding masks written with where/masked_fill, an additive ALiBi bias,
// grouped-query and multi-query heads. Each spelling is asserted to take
// the fused path (uses_fused_attention_v) and checked against the same
// expression evaluated unfused (the scores materialised) and against plain
// loops in double: odd lengths, windows and masks crossing the kernel's
// 64-row and 128-key tiles, finite and -inf masked values, fully masked
// rows, NaN and inf in the inputs; and against the PyTorch fixtures of
// tests/reference/make_variant_fixtures.py.

#include <dimsum/dimsum.hpp>
#include <dimsum/ops/alibi.hpp>
#include <dimsum/ops/window_mask.hpp>
#include <dimsum/kernels/attention_backward.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "arch_paths.hpp"

namespace {

using namespace dimsum;

DIMSUM_DIM(batch);
DIMSUM_DIM(q_posn);
DIMSUM_DIM(k_posn);
DIMSUM_DIM(nheads);
DIMSUM_DIM(kv_heads);
DIMSUM_DIM(group);
DIMSUM_DIM(d_head);

constexpr double inf = std::numeric_limits<double>::infinity();

struct sizes {
  std::size_t b, kvh, g, nq, nk, d;
};

/// What the chain does to a raw score at (b, kv head, group member, i, j).
using score_fn = std::function<double(double, std::size_t, std::size_t, std::size_t, std::size_t, std::size_t)>;

/// Grouped-query inputs: Q (batch, q_posn, kv_heads, group, d_head), K and V
/// (batch, k_posn, kv_heads, d_head); g = 1 is plain multi-head attention.
template <class T>
struct inputs {
  sizes s;
  tensor<T, batch, q_posn, kv_heads, group, d_head> q;
  tensor<T, batch, k_posn, kv_heads, d_head> k, v;
  explicit inputs(sizes sz, std::uint64_t seed = 11)
      : s(sz),
        q(decltype(q)::random_normal(seed, batch{sz.b}, q_posn{sz.nq}, kv_heads{sz.kvh}, group{sz.g}, d_head{sz.d})),
        k(decltype(k)::random_normal(seed + 1, batch{sz.b}, k_posn{sz.nk}, kv_heads{sz.kvh}, d_head{sz.d})),
        v(decltype(v)::random_normal(seed + 2, batch{sz.b}, k_posn{sz.nk}, kv_heads{sz.kvh}, d_head{sz.d})) {}

  /// out(b, i, h, g, c) by plain loops in double; a row of only -inf is NaN
  /// and a weight of 0 still multiplies V (0 * inf is NaN), as in PyTorch.
  std::vector<double> ref(const score_fn& f) const {
    std::vector<double> out(s.b * s.nq * s.kvh * s.g * s.d, 0.0), row(s.nk);
    for (std::size_t b = 0; b < s.b; ++b)
      for (std::size_t h = 0; h < s.kvh; ++h)
        for (std::size_t g = 0; g < s.g; ++g)
          for (std::size_t i = 0; i < s.nq; ++i) {
            double m = -inf;
            for (std::size_t j = 0; j < s.nk; ++j) {
              double raw = 0;
              for (std::size_t d = 0; d < s.d; ++d)
                raw += double(q(batch{b}, q_posn{i}, kv_heads{h}, group{g}, d_head{d})) *
                       double(k(batch{b}, k_posn{j}, kv_heads{h}, d_head{d}));
              row[j] = f(raw, b, h, g, i, j);
              m = std::max(m, row[j]);
            }
            double sum = 0;
            for (std::size_t j = 0; j < s.nk; ++j) sum += (row[j] = std::exp(row[j] - m));
            for (std::size_t c = 0; c < s.d; ++c) {
              double acc = 0;
              for (std::size_t j = 0; j < s.nk; ++j) acc += row[j] / sum * double(v(batch{b}, k_posn{j}, kv_heads{h}, d_head{c}));
              out[(((b * s.nq + i) * s.kvh + h) * s.g + g) * s.d + c] = acc;
            }
          }
    return out;
  }
};

template <class Q, class K>
auto scores_of(const Q& q, const K& k) {
  return einsum<"batch q_posn kv_heads group d_head, batch k_posn kv_heads d_head -> batch kv_heads group q_posn k_posn">(
      q, k);
}
// The named spelling: a where or a bias puts its other operand's dims first,
// so the pattern's dim order varies with the spelling.
template <class P, class V>
auto attend(P&& pattern, const V& v) {
  return einsum<batch, q_posn, kv_heads, group, d_head>(std::forward<P>(pattern), v);
}
template <class T>
using out_t = tensor<T, batch, q_posn, kv_heads, group, d_head>;
template <class T>
using pattern_t = tensor<T, batch, kv_heads, group, q_posn, k_posn>;

/// Every element within atol + rtol |expected|; NaN exactly where expected is.
template <class P>
std::size_t mismatches(const P* got, const std::vector<double>& want, double atol, double rtol) {
  std::size_t bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double g = double(got[i]), e = want[i];
    if (std::isnan(e) ? !std::isnan(g) : !(g == e || std::fabs(g - e) <= atol + rtol * std::fabs(e))) ++bad;
  }
  return bad;
}

/// `make(q, k)` builds the softmax's operand (the masked, biased scores);
/// checks that attending it takes the fused path, and that fused, unfused
/// (pattern evaluated first) and the loops agree, on 1 and 2 threads.
template <class T, class Make>
void check_variant(const inputs<T>& in, Make make, const score_fn& f) {
  auto z = attend(softmax<k_posn>(make(in.q, in.k)), in.v);
  static_assert(uses_fused_attention_v<decltype(z)>);
  const pattern_t<T> pattern = softmax<k_posn>(make(in.q, in.k));
  const out_t<T> unfused = attend(pattern, in.v);
  const auto want = in.ref(f);
  const double tol = std::is_same_v<T, float> ? 2e-5 : 1e-11;
  CHECK(mismatches(unfused.data(), want, tol, tol * 10) == 0);
  for (int threads : {1, 2}) {
    INFO("threads " << threads);
    test::thread_count_guard guard(threads);
    const out_t<T> fused = attend(softmax<k_posn>(make(in.q, in.k)), in.v);
    CHECK(mismatches(fused.data(), want, tol, tol * 10) == 0);
    std::vector<double> u(unfused.data(), unfused.data() + unfused.size());
    CHECK(mismatches(fused.data(), u, tol, tol * 10) == 0);
  }
}

bool in_window(std::size_t i, std::size_t j, std::size_t window, std::size_t offset) {
  return j <= i + offset && i + offset - j < window;
}

}  // namespace

TEMPLATE_TEST_CASE("fused variants: sliding windows crossing tile edges, offsets, both masked values", "[fused][variants]",
                   float, double) {
  using T = TestType;
  const inputs<T> in(sizes{2, 2, 1, 150, 197, 24});
  const T s = T(0.2);
  for (std::size_t window : {std::size_t(1), std::size_t(5), std::size_t(70), std::size_t(129), std::size_t(1000)})
    for (std::size_t offset : {std::size_t(0), std::size_t(3), std::size_t(47)})
      for (double fill : {-inf, -3.0}) {
        INFO("window " << window << ", offset " << offset << ", masked value " << fill);
        check_variant(
            in,
            [&](const auto& q, const auto& k) {
              return window_mask<q_posn, k_posn>(scores_of(q, k) * s, window, T(fill), offset);
            },
            [&](double x, auto, auto, auto, std::size_t i, std::size_t j) {
              return in_window(i, j, window, offset) ? x * double(s) : fill;
            });
      }
}

TEST_CASE("fused variants: a causal mask with an offset is an unbounded window", "[fused][variants]") {
  const inputs<float> in(sizes{1, 3, 1, 9, 140, 16});  // 9 new queries after 131 cached keys
  check_variant(
      in,
      [](const auto& q, const auto& k) {
        return window_mask<q_posn, k_posn>(scores_of(q, k) / 4.0f, kernels::unbounded_window, -INFINITY, 131);
      },
      [](double x, auto, auto, auto, std::size_t i, std::size_t j) { return j <= i + 131 ? x / 4 : -inf; });
}

TEMPLATE_TEST_CASE("fused variants: padding masks by where and masked_fill, fully masked rows", "[fused][variants]", float,
                   double) {
  using T = TestType;
  const inputs<T> in(sizes{3, 2, 1, 67, 131, 8});
  // keep(batch, k_posn): batch 0 keeps all keys, batch 1 the first 100,
  // batch 2 none (every row fully masked).
  tensor<bool, batch, k_posn> keep(batch{3}, k_posn{131});
  for (std::size_t j = 0; j < 131; ++j) {
    keep(batch{0}, k_posn{j}) = true;
    keep(batch{1}, k_posn{j}) = j < 100;
    keep(batch{2}, k_posn{j}) = false;
  }
  auto kept = [&](std::size_t b, std::size_t j) { return keep(batch{b}, k_posn{j}); };
  for (double fill : {-inf, -1e9, 2.0}) {
    INFO("masked value " << fill);
    const score_fn f = [&](double x, std::size_t b, auto, auto, auto, std::size_t j) { return kept(b, j) ? x : fill; };
    SECTION("where(keep, scores, value)") {
      check_variant(in, [&](const auto& q, const auto& k) { return where(keep, scores_of(q, k), T(fill)); }, f);
    }
    SECTION("where(!keep, value, scores)") {
      check_variant(in, [&](const auto& q, const auto& k) { return where(!keep, T(fill), scores_of(q, k)); }, f);
    }
    SECTION("masked_fill(scores, !keep, value), after a causal mask") {
      check_variant(
          in,
          [&](const auto& q, const auto& k) {
            return masked_fill(causal_mask<q_posn, k_posn>(scores_of(q, k), T(-inf)), !keep, T(fill));
          },
          [&](double x, std::size_t b, auto, auto, std::size_t i, std::size_t j) {
            return kept(b, j) ? (j > i ? -inf : x) : fill;
          });
    }
  }
}

TEMPLATE_TEST_CASE("fused variants: an ALiBi bias (slope times distance) before the causal mask", "[fused][variants]",
                   float, double) {
  using T = TestType;
  const inputs<T> in(sizes{2, 3, 1, 130, 130, 16});
  const auto slopes = alibi_slopes<T>(kv_heads{3});
  const auto distance = relative_positions<T>(q_posn{130}, k_posn{130});
  const T s = T(0.25);
  auto f = [&](double x, auto, std::size_t h, auto, std::size_t i, std::size_t j) {
    return j > i ? -inf : x * double(s) + double(slopes.data()[h]) * (double(j) - double(i));
  };
  SECTION("scores * s + bias") {
    check_variant(
        in,
        [&](const auto& q, const auto& k) {
          return causal_mask<q_posn, k_posn>(scores_of(q, k) * s + outer(slopes, distance), T(-inf));
        },
        f);
  }
  SECTION("bias + scores * s") {
    check_variant(
        in,
        [&](const auto& q, const auto& k) {
          return causal_mask<q_posn, k_posn>(outer(slopes, distance) + scores_of(q, k) * s, T(-inf));
        },
        f);
  }
  SECTION("a bias after the mask: the masked keys are still read (a bias could be inf there)") {
    check_variant(
        in,
        [&](const auto& q, const auto& k) {
          return causal_mask<q_posn, k_posn>(scores_of(q, k) * s, T(-inf)) + outer(slopes, distance);
        },
        f);
  }
  SECTION("distance * slopes, the other operand order, and alibi(): the same affine bias") {
    check_variant(
        in,
        [&](const auto& q, const auto& k) {
          return causal_mask<q_posn, k_posn>(scores_of(q, k) * s + outer(distance, slopes), T(-inf));
        },
        f);
    check_variant(
        in,
        [&](const auto& q, const auto& k) {
          return causal_mask<q_posn, k_posn>(
              scores_of(q, k) * s + alibi<T>(kv_heads{3}, q_posn{130}, k_posn{130}), T(-inf));
        },
        f);
  }
  SECTION("the generic fallback: the distances stored as a table, read row by row") {
    const tensor<T, q_posn, k_posn> table = distance;
    STATIC_REQUIRE(!plan::fusion::affine_bias<decltype(outer(slopes, table)), T>::ok);
    check_variant(
        in,
        [&](const auto& q, const auto& k) {
          return causal_mask<q_posn, k_posn>(scores_of(q, k) * s + outer(slopes, table), T(-inf));
        },
        f);
  }
  SECTION("the generic fallback: a stored (heads, q_posn, k_posn) bias, copied a row at a time") {
    const tensor<T, kv_heads, q_posn, k_posn> full = outer(slopes, distance);
    check_variant(
        in,
        [&](const auto& q, const auto& k) { return causal_mask<q_posn, k_posn>(scores_of(q, k) * s + full, T(-inf)); },
        f);
  }
  // slope * relative_positions is recognised as affine (computed by the
  // kernel from the slope, the row and an iota), in either order
  STATIC_REQUIRE(plan::fusion::affine_bias<decltype(outer(slopes, distance)), T>::ok);
  STATIC_REQUIRE(plan::fusion::affine_bias<decltype(outer(distance, slopes)), T>::ok);
  STATIC_REQUIRE(plan::fusion::affine_bias<decltype(alibi<T>(kv_heads{3}, q_posn{130}, k_posn{130})), T>::ok);
  // a slope over the position dims is not a per-head slope: generic
  STATIC_REQUIRE(!plan::fusion::affine_bias<decltype(outer(distance, distance * T(2))), T>::ok);
}

TEMPLATE_TEST_CASE("fused variants: ALiBi with a slope per batch and head, keys crossing tiles, more keys than queries",
                   "[fused][variants]", float, double) {
  using T = TestType;
  const inputs<T> in(sizes{2, 2, 3, 67, 300, 8});
  // a slope over (group, batch): any per-batch-index expression is a slope
  tensor<T, group, batch> slope(group{3}, batch{2});
  for (std::size_t g = 0; g < 3; ++g)
    for (std::size_t b = 0; b < 2; ++b) slope(group{g}, batch{b}) = T(0.05) * T(g + 1) - T(0.03) * T(b);
  const auto distance = relative_positions<T>(q_posn{67}, k_posn{300}, 233);  // query i at position i + 233
  STATIC_REQUIRE(plan::fusion::affine_bias<decltype(outer(slope, distance)), T>::ok);
  check_variant(
      in,
      [&](const auto& q, const auto& k) {
        return window_mask<q_posn, k_posn>(scores_of(q, k) * T(0.3) + outer(slope, distance), 150, T(-inf), 233);
      },
      [&](double x, std::size_t b, auto, std::size_t g, std::size_t i, std::size_t j) {
        return in_window(i, j, 150, 233) ? x * 0.3 + double(slope(group{g}, batch{b})) * (double(j) - double(i + 233))
                                         : -inf;
      });
}

TEMPLATE_TEST_CASE("fused variants: grouped-query and multi-query heads, K and V shared by the group", "[fused][variants]",
                   float, double) {
  using T = TestType;
  for (sizes sz : {sizes{2, 2, 3, 70, 70, 16}, sizes{1, 1, 4, 65, 129, 8}}) {  // GQA, then MQA
    INFO("kv heads " << sz.kvh << ", group " << sz.g);
    const inputs<T> in(sz);
    check_variant(
        in, [](const auto& q, const auto& k) { return causal_mask<q_posn, k_posn>(scores_of(q, k) * T(0.3), T(-inf)); },
        [](double x, auto, auto, auto, std::size_t i, std::size_t j) { return j > i ? -inf : x * 0.3; });
  }
}

TEMPLATE_TEST_CASE("fused variants: NaN and inf in Q and V, inside and outside the window", "[fused][variants]", float,
                   double) {
  using T = TestType;
  inputs<T> in(sizes{1, 2, 2, 140, 140, 8});
  in.v(batch{0}, k_posn{3}, kv_heads{0}, d_head{1}) = std::numeric_limits<T>::infinity();     // before every late window
  in.v(batch{0}, k_posn{135}, kv_heads{1}, d_head{2}) = std::numeric_limits<T>::quiet_NaN();  // after early queries
  in.q(batch{0}, q_posn{100}, kv_heads{1}, group{1}, d_head{0}) = std::numeric_limits<T>::quiet_NaN();
  check_variant(
      in,
      [](const auto& q, const auto& k) { return window_mask<q_posn, k_posn>(scores_of(q, k) * T(0.3), 9, T(-inf)); },
      [](double x, auto, auto, auto, std::size_t i, std::size_t j) { return in_window(i, j, 9, 0) ? x * 0.3 : -inf; });
}

namespace {
using q_t = tensor<double, batch, q_posn, nheads, d_head>;
using k_t = tensor<double, batch, k_posn, nheads, d_head>;
using kv_t = tensor<double, batch, k_posn, kv_heads, d_head>;

template <class TT>
TT fixture(const std::string& name) {
  return load_npy<TT>(std::string(DIMSUM_SOURCE_DIR) + "/tests/reference/fixtures/variants/" + name + ".npy");
}
void expect_near(const q_t& got, const q_t& want) {
  REQUIRE(got.extents() == want.extents());
  double worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(got.data()[i] - want.data()[i]));
  INFO("worst abs error " << worst);
  CHECK(worst <= 1e-12);
}
template <class Q, class K>
auto mh_scores(const Q& q, const K& k) {
  const double scale = 1.0 / std::sqrt(double(q.template extent<d_head>()));
  return einsum<"batch q_posn nheads d_head, batch k_posn nheads d_head -> batch nheads q_posn k_posn">(q, k) * scale;
}
template <class P>
auto mh_attend(P&& p, const k_t& v) {
  return einsum<"batch nheads q_posn k_posn, batch k_posn nheads d_head -> batch q_posn nheads d_head">(
      softmax<k_posn>(std::forward<P>(p)), v);
}
}  // namespace

TEST_CASE("fused variants against PyTorch: window, ALiBi, GQA, MQA", "[fused][variants][fixtures]") {
  SECTION("sliding window") {
    const auto q = fixture<q_t>("window_q");
    const auto k = fixture<k_t>("window_k");
    const auto v = fixture<k_t>("window_v");
    auto z = mh_attend(window_mask<q_posn, k_posn>(mh_scores(q, k), 4, -inf), v);
    static_assert(uses_fused_attention_v<decltype(z)>);
    expect_near(z, fixture<q_t>("window_out"));
  }
  SECTION("ALiBi") {
    const auto q = fixture<q_t>("alibi_q");
    const auto k = fixture<k_t>("alibi_k");
    const auto v = fixture<k_t>("alibi_v");
    const auto slopes = alibi_slopes<double>(nheads{6});
    const auto distance = relative_positions<double>(q_posn{9}, k_posn{9});
    auto z = mh_attend(causal_mask<q_posn, k_posn>(mh_scores(q, k) + outer(slopes, distance), -inf), v);
    static_assert(uses_fused_attention_v<decltype(z)>);
    expect_near(z, fixture<q_t>("alibi_out"));
  }
  for (const char* which : {"gqa", "mqa"}) {
    DYNAMIC_SECTION(which) {
      const auto q = fixture<q_t>(std::string(which) + "_q");
      const auto k = fixture<kv_t>(std::string(which) + "_k");
      const auto v = fixture<kv_t>(std::string(which) + "_v");
      const auto qg = rearrange<"batch q_posn (kv_heads group) d_head -> batch q_posn kv_heads group d_head">(
          q, kv_heads{k.extent<kv_heads>()});
      const double scale = 1.0 / std::sqrt(double(q.extent<d_head>()));
      auto z = attend(softmax<k_posn>(causal_mask<q_posn, k_posn>(scores_of(qg, k) * scale, -inf)), v);
      static_assert(uses_fused_attention_v<decltype(z)>);
      const out_t<double> out = z;
      const q_t flat = rearrange<"batch q_posn kv_heads group d_head -> batch q_posn nheads(kv_heads group) d_head">(out);
      expect_near(flat, fixture<q_t>(std::string(which) + "_out"));
    }
  }
}

TEST_CASE("fused variants: the fused backward differentiates every one", "[fused][variants][grad]") {
  // grad::fused_attention differentiates each (tests/unit/grad_fused_variants.cpp)
  const inputs<float> in(sizes{1, 1, 1, 3, 3, 2});
  tensor<bool, batch, k_posn> keep(batch{1}, k_posn{3});
  const auto slopes = alibi_slopes<float>(kv_heads{1});
  const auto distance = relative_positions<float>(q_posn{3}, k_posn{3});
  auto causal = attend(softmax<k_posn>(causal_mask<q_posn, k_posn>(scores_of(in.q, in.k), -INFINITY)), in.v);
  auto padded = attend(softmax<k_posn>(where(keep, scores_of(in.q, in.k), -INFINITY)), in.v);
  auto window = attend(softmax<k_posn>(window_mask<q_posn, k_posn>(scores_of(in.q, in.k), 2, -INFINITY)), in.v);
  auto biased = attend(softmax<k_posn>(scores_of(in.q, in.k) + outer(slopes, distance)), in.v);
  STATIC_REQUIRE(fused_attention_is_differentiable_v<decltype(causal)>);
  STATIC_REQUIRE(fused_attention_is_differentiable_v<decltype(padded)>);
  STATIC_REQUIRE(fused_attention_is_differentiable_v<decltype(window)>);
  STATIC_REQUIRE(fused_attention_is_differentiable_v<decltype(biased)>);
  // not fused, so not differentiable by grad::fused_attention
  auto plain = attend(softmax<k_posn>(scores_of(in.q, in.k)) * 2.0f, in.v);
  STATIC_REQUIRE(!uses_fused_attention_v<decltype(plain)>);
  STATIC_REQUIRE(!fused_attention_is_differentiable_v<decltype(plain)>);
}

TEMPLATE_TEST_CASE("fused variants: incremental decoding, new queries against a kv_cache on the few-rows path",
                   "[fused][variants][decode]", float, double) {
  using T = TestType;
  for (std::size_t m : {std::size_t(1), std::size_t(3), std::size_t(4), std::size_t(5)}) {  // 5: the tile path
    for (std::size_t window : {kernels::unbounded_window, std::size_t(40)}) {
      INFO(m << " new queries, window " << window);
      const std::size_t len = 203;  // keys after the append: the new ones are the last m
      const inputs<T> in(sizes{2, 2, 2, m, len, 16});
      kv_cache<T, k_posn, batch, k_posn, kv_heads, d_head> cache(batch{2}, k_posn{256}, kv_heads{2}, d_head{16});
      cache.append(slice<k_posn>(in.k, 0, len - m), slice<k_posn>(in.v, 0, len - m));  // the prompt
      cache.append(slice<k_posn>(in.k, len - m, len), slice<k_posn>(in.v, len - m, len));
      const auto keys = cache.keys();  // views of the filled prefix; z refers to them
      const auto values = cache.values();
      auto z = attend(
          softmax<k_posn>(window_mask<q_posn, k_posn>(scores_of(in.q, keys) * T(0.25), window, T(-inf), len - m)),
          values);
      static_assert(uses_fused_attention_v<decltype(z)>);
      const auto want = in.ref([&](double x, auto, auto, auto, std::size_t i, std::size_t j) {
        return in_window(i, j, window, len - m) ? x * 0.25 : -inf;
      });
      const double tol = std::is_same_v<T, float> ? 2e-5 : 1e-11;
      for (int threads : {1, 2}) {
        test::thread_count_guard guard(threads);
        const out_t<T> got = z;
        CHECK(mismatches(got.data(), want, tol, tol * 10) == 0);
      }
      // ALiBi after a cache: the new queries sit at positions len - m + i
      const auto bias = alibi<T>(kv_heads{2}, q_posn{m}, k_posn{len}, len - m);
      auto za = attend(softmax<k_posn>(window_mask<q_posn, k_posn>(scores_of(in.q, keys) * T(0.25) + bias, window,
                                                                   T(-inf), len - m)),
                       values);
      static_assert(uses_fused_attention_v<decltype(za)>);
      const auto slopes = alibi_slopes<double>(kv_heads{2});
      const auto want_a = in.ref([&](double x, auto, std::size_t h, auto, std::size_t i, std::size_t j) {
        return in_window(i, j, window, len - m) ? x * 0.25 + double(T(slopes.data()[h])) * (double(j) - double(i + len - m))
                                                : -inf;
      });
      const out_t<T> got_a = za;
      CHECK(mismatches(got_a.data(), want_a, tol, tol * 10) == 0);
    }
  }
}

namespace {
/// The generic form of the affine bias below, as a row callback: slope of
/// head bi % heads times (j - (i + offset)). The slopes are powers of two,
/// so the kernel's fma form computes the same values exactly.
template <class T>
struct slope_rows {
  const T* slopes;
  std::size_t heads, offset;
  static void add(const void* ctx, std::size_t bi, std::size_t i, std::size_t j0, std::size_t n, T* out) {
    const auto& s = *static_cast<const slope_rows*>(ctx);
    for (std::size_t x = 0; x < n; ++x)
      out[x] = s.slopes[bi % s.heads] * static_cast<T>(double(j0 + x) - double(i + s.offset));
  }
};
}  // namespace

TEMPLATE_TEST_CASE("fused variants: the kernel's affine bias on every arch path equals the row callback and the loops",
                   "[fused][variants][kernel]", float, double) {
  using T = TestType;
  const std::size_t nb = 2, heads = 3, nk = 150, d = 8, offset = 5, window = 60;
  for (std::size_t nq : {std::size_t(70), std::size_t(3)}) {  // tiles; the few-rows path
    INFO(nq << " queries");
    std::mt19937 gen(17);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    std::vector<T> q(nb * nq * heads * d), k(nb * nk * heads * d), v(nb * nk * heads * d);
    for (auto* x : {&q, &k, &v})
      for (T& e : *x) e = T(u(gen));
    const std::vector<T> slopes = {T(0.5), T(0.125), T(-0.03125)};
    kernels::attention_args<T> a;
    a.q = q.data();
    a.k = k.data();
    a.v = v.data();
    a.nq = nq;
    a.nk = nk;
    a.dk = a.dv = d;
    a.q_row = a.k_row = a.v_row = a.out_row = std::ptrdiff_t(heads * d);
    a.q_col = a.k_col = a.v_col = a.out_col = 1;
    a.batch_rank = 2;
    a.batch_extents = {nb, heads};
    a.q_batch = {std::ptrdiff_t(nq * heads * d), std::ptrdiff_t(d)};
    a.k_batch = a.v_batch = {std::ptrdiff_t(nk * heads * d), std::ptrdiff_t(d)};
    a.out_batch = a.q_batch;
    a.n_stages = 2;
    a.stages[0].op = kernels::score_op::multiply;
    a.stages[0].value = T(0.3);
    a.stages[1].op = kernels::score_op::causal;  // keys (i + 5 - 60, i + 5]
    a.stages[1].value = -std::numeric_limits<T>::infinity();
    a.stages[1].window = window;
    a.stages[1].offset = offset;
    a.bias.at = 1;  // after the scale, before the window
    // plain loops in double
    std::vector<double> want(nb * nq * heads * d);
    for (std::size_t b = 0; b < nb; ++b)
      for (std::size_t h = 0; h < heads; ++h)
        for (std::size_t i = 0; i < nq; ++i) {
          std::vector<double> w(nk);
          double m = -inf, l = 0;
          for (std::size_t j = 0; j < nk; ++j) {
            double raw = 0;
            for (std::size_t x = 0; x < d; ++x)
              raw += double(q[((b * nq + i) * heads + h) * d + x]) * double(k[((b * nk + j) * heads + h) * d + x]);
            w[j] = in_window(i, j, window, offset) ? raw * double(T(0.3)) + double(slopes[h]) * (double(j) - double(i + offset))
                                                   : -inf;
            m = std::max(m, w[j]);
          }
          for (double& e : w) l += (e = std::exp(e - m));
          for (std::size_t c = 0; c < d; ++c) {
            double o = 0;
            for (std::size_t j = 0; j < nk; ++j) o += w[j] / l * double(v[((b * nk + j) * heads + h) * d + c]);
            want[((b * nq + i) * heads + h) * d + c] = o;
          }
        }
    const slope_rows<T> rows{slopes.data(), heads, offset};
    const double tol = std::is_same_v<T, float> ? 2e-5 : 1e-11;
    test::for_each_arch([&](auto arch) {
      using Arch = decltype(arch);
      for (int threads : {1, 2}) {
        INFO("arch " << Arch::name() << ", threads " << threads);
        test::thread_count_guard guard(threads);
        std::vector<T> affine(want.size(), T(-7)), callback(want.size(), T(-7));
        kernels::attention_args<T> x = a;
        x.bias.slope = slopes.data();
        x.bias.slope_batch = {0, 1};
        x.bias.offset = offset;
        x.out = affine.data();
        std::vector<T> lse(nb * heads * nq), stats(lse.size());
        x.lse = lse.data();  // the forward's row statistics
        kernels::attention_on<Arch>(x);
        x.lse = nullptr;
        kernels::attention_row_stats(x, stats.data());  // the backward's score loops, one key at a time
        for (std::size_t r = 0; r < lse.size(); ++r)
          CHECK(std::abs(double(lse[r]) - double(stats[r])) <= tol * (1 + std::abs(double(stats[r]))));
        kernels::attention_args<T> y = a;
        y.bias.add = &slope_rows<T>::add;
        y.bias.ctx = &rows;
        y.out = callback.data();
        kernels::attention_on<Arch>(y);
        CHECK(affine == callback);  // the same products, the same sums
        CHECK(mismatches(affine.data(), want, tol, tol * 10) == 0);
      }
    });
  }
}
