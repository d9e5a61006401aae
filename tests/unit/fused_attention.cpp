// Fused attention (ops/detail/fused_attention.hpp, kernels/attention.hpp):
// which spellings take the fused path (uses_fused_attention_v), and that its
// results equal both the unfused path (the scores materialised) and a
// plain-loops reference in double: odd lengths, q_posn != k_posn, tiles
// partly and fully masked, all-masked rows, finite and -inf masked values,
// huge scores, permuted dims, a broadcast V, float and double, 1 and 2
// threads, and every kernel arch path.

#include <dimsum/dimsum.hpp>
#include <dimsum/kernels/attention.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include <catch2/catch.hpp>

#include "arch_paths.hpp"

namespace {

using namespace dimsum;

DIMSUM_DIM(batch);
DIMSUM_DIM(q_posn);
DIMSUM_DIM(k_posn);
DIMSUM_DIM(nheads);
DIMSUM_DIM(d_head);
DIMSUM_DIM(d_value);

constexpr float inf = std::numeric_limits<float>::infinity();

// ---------------------------------------------------------------------------
// The plain-loops reference, in double.

/// What the chain does to a raw score at (b, h, i, j).
using score_fn = std::function<double(double raw, std::size_t b, std::size_t h, std::size_t i, std::size_t j)>;

struct sizes {
  std::size_t b, h, nq, nk, d, dv;
};

/// out(b, i, h, c) = sum_j softmax_j(f(q(b,i,h,:) . k(b,j,h,:))) v(b,j,h,c), all
/// row-major in those dims; a row of only -inf gives NaN, like PyTorch.
template <class T>
std::vector<double> reference(const sizes& s, const T* q, const T* k, const T* v, const score_fn& f) {
  std::vector<double> out(s.b * s.nq * s.h * s.dv, 0.0);
  std::vector<double> row(s.nk);
  for (std::size_t b = 0; b < s.b; ++b)
    for (std::size_t h = 0; h < s.h; ++h)
      for (std::size_t i = 0; i < s.nq; ++i) {
        double m = -std::numeric_limits<double>::infinity();
        for (std::size_t j = 0; j < s.nk; ++j) {
          double raw = 0;
          for (std::size_t d = 0; d < s.d; ++d)
            raw += double(q[((b * s.nq + i) * s.h + h) * s.d + d]) * double(k[((b * s.nk + j) * s.h + h) * s.d + d]);
          row[j] = f(raw, b, h, i, j);
          m = std::max(m, row[j]);
        }
        double sum = 0;
        for (std::size_t j = 0; j < s.nk; ++j) sum += (row[j] = std::exp(row[j] - m));
        for (std::size_t c = 0; c < s.dv; ++c) {
          double acc = 0;
          for (std::size_t j = 0; j < s.nk; ++j) acc += row[j] / sum * double(v[((b * s.nk + j) * s.h + h) * s.dv + c]);
          out[((b * s.nq + i) * s.h + h) * s.dv + c] = acc;
        }
      }
  return out;
}

/// Every element within atol + rtol * |expected| (an infinity: equal); NaN
/// exactly where expected is NaN.
template <class A>
std::size_t mismatches(const A& got, const std::vector<double>& expected, double atol, double rtol = 0) {
  std::size_t bad = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const double g = double(got[i]), e = double(expected[i]);
    if (std::isnan(e) ? !std::isnan(g) : !(g == e || std::fabs(g - e) <= atol + rtol * std::fabs(e))) ++bad;
  }
  return bad;
}

template <class T>
std::vector<double> flat(const T& t) {
  return std::vector<double>(t.data(), t.data() + t.size());
}

template <class T>
struct inputs {
  sizes s;
  tensor<T, batch, q_posn, nheads, d_head> q;
  tensor<T, batch, k_posn, nheads, d_head> k;
  tensor<T, batch, k_posn, nheads, d_value> v;
  explicit inputs(sizes sz, std::uint64_t seed = 7, T q_scale = T(1))
      : s(sz),
        q(tensor<T, batch, q_posn, nheads, d_head>::random_normal(seed, batch{sz.b}, q_posn{sz.nq}, nheads{sz.h},
                                                                  d_head{sz.d}) *
          q_scale),
        k(tensor<T, batch, k_posn, nheads, d_head>::random_normal(seed + 1, batch{sz.b}, k_posn{sz.nk},
                                                                  nheads{sz.h}, d_head{sz.d})),
        v(tensor<T, batch, k_posn, nheads, d_value>::random_normal(seed + 2, batch{sz.b}, k_posn{sz.nk},
                                                                   nheads{sz.h}, d_value{sz.dv})) {}
  std::vector<double> ref(const score_fn& f) const { return reference(s, q.data(), k.data(), v.data(), f); }
};

template <class Q, class K>
auto scores_of(const Q& q, const K& k) {
  return einsum<"batch q_posn nheads d_head, batch k_posn nheads d_head -> batch nheads q_posn k_posn">(q, k);
}
template <class P, class V>
auto attend(P&& pattern, const V& v) {
  return einsum<"batch nheads q_posn k_posn, batch k_posn nheads d_value -> batch q_posn nheads d_value">(
      std::forward<P>(pattern), v);
}

/// The causal rule of causal_mask: key index above query index.
double causal(double x, std::size_t i, std::size_t j, double fill) { return j > i ? fill : x; }

/// Runs kernels::attention_on on every arch path, 1 and 2 threads, over `in`
/// (h = 1; V laid out (b, k, h, c), out as (b, q, c) with padded rows),
/// scores divided by 3 then causally masked with -inf (query i at position
/// i + offset), and checks the result against the loops and that the row
/// padding is untouched.
template <class T>
void check_causal_kernel_on_every_arch(const inputs<T>& in, std::size_t offset = 0) {
  const sizes sz = in.s;
  REQUIRE(sz.h == 1);
  kernels::attention_args<T> a;
  a.q = in.q.data();
  a.k = in.k.data();
  a.v = in.v.data();
  a.nq = sz.nq;
  a.nk = sz.nk;
  a.dk = sz.d;
  a.dv = sz.dv;
  a.q_row = std::ptrdiff_t(sz.d);
  a.q_col = 1;
  a.k_row = std::ptrdiff_t(sz.d);
  a.k_col = 1;
  a.v_row = std::ptrdiff_t(sz.dv);
  a.v_col = 1;
  const std::ptrdiff_t out_row = std::ptrdiff_t(sz.dv) + 3;
  a.out_row = out_row;
  a.out_col = 1;
  a.batch_rank = 1;
  a.batch_extents[0] = sz.b;
  a.q_batch[0] = std::ptrdiff_t(sz.nq * sz.d);
  a.k_batch[0] = std::ptrdiff_t(sz.nk * sz.d);
  a.v_batch[0] = std::ptrdiff_t(sz.nk * sz.dv);
  a.out_batch[0] = std::ptrdiff_t(sz.nq) * out_row;
  a.n_stages = 2;
  a.stages[0].op = kernels::score_op::divide;
  a.stages[0].value = T(3);
  a.stages[1].op = kernels::score_op::causal;
  a.stages[1].value = -std::numeric_limits<T>::infinity();
  a.stages[1].offset = offset;
  const auto ref =
      in.ref([&](double x, auto, auto, auto i, auto j) { return causal(x / 3, i + offset, j, -INFINITY); });
  test::for_each_arch([&](auto arch) {
    using Arch = decltype(arch);
    for (int threads : {1, 2}) {
      INFO("arch " << Arch::name() << ", threads " << threads);
      test::thread_count_guard guard(threads);
      std::vector<T> out(sz.b * sz.nq * std::size_t(out_row), T(-7));
      a.out = out.data();
      kernels::attention_on<Arch>(a);
      std::vector<double> got;
      for (std::size_t r = 0; r < sz.b * sz.nq; ++r)
        for (std::size_t c = 0; c < sz.dv; ++c) got.push_back(double(out[r * std::size_t(out_row) + c]));
      CHECK(mismatches(got, ref, 1e-5, 1e-4) == 0);
      // The padding past each output row is untouched.
      for (std::size_t r = 0; r < sz.b * sz.nq; ++r) CHECK(out[r * std::size_t(out_row) + sz.dv] == T(-7));
    }
  });
}

/// The causal pattern over `in` (scores * 0.3, masked with `fill`) on the
/// fused path and, with the pattern evaluated first, on the unfused path:
/// each checked against the loops, and against each other. Returns the
/// fused result.
template <class T>
tensor<T, batch, q_posn, nheads, d_value> check_fused_causal(const inputs<T>& in, T fill) {
  auto z = attend(softmax<k_posn>(causal_mask<q_posn, k_posn>(scores_of(in.q, in.k) * T(0.3), fill)), in.v);
  static_assert(uses_fused_attention_v<decltype(z)>);
  tensor<T, batch, q_posn, nheads, d_value> got = z;
  tensor<T, batch, nheads, q_posn, k_posn> pattern =
      softmax<k_posn>(causal_mask<q_posn, k_posn>(scores_of(in.q, in.k) * T(0.3), fill));
  tensor<T, batch, q_posn, nheads, d_value> unfused = attend(pattern, in.v);
  const auto ref = in.ref([&](double x, auto, auto, auto i, auto j) { return causal(x * 0.3, i, j, double(fill)); });
  CHECK(mismatches(got.data(), flat(unfused), 1e-5) == 0);
  CHECK(mismatches(got.data(), ref, 1e-5, 1e-4) == 0);
  CHECK(mismatches(unfused.data(), ref, 1e-5, 1e-4) == 0);
  return got;
}

}  // namespace

// ---------------------------------------------------------------------------
// Which spellings fuse

TEST_CASE("fused attention: every supported spelling takes the fused path and matches the loops", "[fused]") {
  const inputs<float> in({2, 3, 37, 41, 5, 7});
  const float s = 0.4f;
  tensor<bool, batch, k_posn> pad(batch{2}, k_posn{41});
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t j = 0; j < 41; ++j) pad(batch{b}, k_posn{j}) = (j * 7 + b) % 5 == 0 && j != 0;
  auto padded = [&](std::size_t b, std::size_t j) { return bool(pad(batch{b}, k_posn{j})); };

  auto check = [&](const auto& expr, const score_fn& f) {
    static_assert(std::remove_cvref_t<decltype(expr)>::uses_fused_attention);
    static_assert(uses_fused_attention_v<decltype(expr)>);
    tensor<float, batch, q_posn, nheads, d_value> got = expr;
    CHECK(mismatches(got.data(), in.ref(f), 1e-5, 1e-4) == 0);
  };

  SECTION("one expression, scale on the right, causal mask of -inf") {
    check(attend(softmax<k_posn>(causal_mask<q_posn, k_posn>(scores_of(in.q, in.k) * s, -inf)), in.v),
          [&](double x, auto, auto, auto i, auto j) { return causal(x * s, i, j, -INFINITY); });
  }
  SECTION("lazy auto intermediates") {
    auto scores = scores_of(in.q, in.k);
    auto scaled = scores * s;
    auto masked = causal_mask<q_posn, k_posn>(scaled, -inf);
    auto pattern = softmax<k_posn>(masked);
    auto z = attend(pattern, in.v);
    check(z, [&](double x, auto, auto, auto i, auto j) { return causal(x * s, i, j, -INFINITY); });
  }
  SECTION("scale on the left") {
    check(attend(softmax<k_posn>(causal_mask<q_posn, k_posn>(s * scores_of(in.q, in.k), -inf)), in.v),
          [&](double x, auto, auto, auto i, auto j) { return causal(x * s, i, j, -INFINITY); });
  }
  SECTION("divided by sqrt(d_head)") {
    const float r = std::sqrt(5.0f);
    check(attend(softmax<k_posn>(causal_mask<q_posn, k_posn>(scores_of(in.q, in.k) / r, -inf)), in.v),
          [&](double x, auto, auto, auto i, auto j) { return causal(x / r, i, j, -INFINITY); });
  }
  SECTION("scale after the mask scales the finite masked value too") {
    check(attend(softmax<k_posn>(causal_mask<q_posn, k_posn>(scores_of(in.q, in.k), -3.0f) * s), in.v),
          [&](double x, auto, auto, auto i, auto j) { return causal(x, i, j, -3.0) * s; });
  }
  SECTION("scale folded into the queries") {
    check(attend(softmax<k_posn>(causal_mask<q_posn, k_posn>(scores_of(in.q * s, in.k), -inf)), in.v),
          [&](double x, auto, auto, auto i, auto j) { return causal(x * s, i, j, -INFINITY); });
  }
  SECTION("no mask, no scale") {
    check(attend(softmax<k_posn>(scores_of(in.q, in.k)), in.v), [](double x, auto...) { return x; });
  }
  SECTION("a padding mask broadcast by name") {
    check(attend(softmax<k_posn>(masked_fill(scores_of(in.q, in.k) * s, pad, -inf)), in.v),
          [&](double x, auto b, auto, auto, auto j) { return padded(b, j) ? -INFINITY : x * s; });
  }
  SECTION("causal and padding masks, with a finite value") {
    check(attend(softmax<k_posn>(masked_fill(causal_mask<q_posn, k_posn>(scores_of(in.q, in.k) * s, -inf), pad,
                                             -1e9f)),
                 in.v),
          [&](double x, auto b, auto, auto i, auto j) { return padded(b, j) ? -1e9 : causal(x * s, i, j, -INFINITY); });
  }
  SECTION("the pattern as the second operand, and the named einsum spelling") {
    auto pattern = softmax<k_posn>(causal_mask<q_posn, k_posn>(scores_of(in.q, in.k) * s, -inf));
    check(einsum<"batch k_posn nheads d_value, batch nheads q_posn k_posn -> batch q_posn nheads d_value">(in.v, pattern),
          [&](double x, auto, auto, auto i, auto j) { return causal(x * s, i, j, -INFINITY); });
    check(einsum<batch, q_posn, nheads, d_value>(pattern, in.v),
          [&](double x, auto, auto, auto i, auto j) { return causal(x * s, i, j, -INFINITY); });
  }
}

TEST_CASE("fused attention: batch and head dims in any order, and a V broadcast over heads", "[fused]") {
  const sizes sz{2, 3, 19, 23, 4, 6};
  const inputs<float> in(sz);
  // The same data laid out with permuted dims.
  tensor<float, nheads, d_head, batch, q_posn> qp = rearrange<"batch q_posn nheads d_head -> nheads d_head batch q_posn">(in.q);
  tensor<float, k_posn, nheads, batch, d_head> kp = rearrange<"batch k_posn nheads d_head -> k_posn nheads batch d_head">(in.k);
  tensor<float, d_value, batch, nheads, k_posn> vp = rearrange<"batch k_posn nheads d_value -> d_value batch nheads k_posn">(in.v);
  auto z = einsum<"q_posn k_posn nheads batch, d_value batch nheads k_posn -> d_value q_posn batch nheads">(
      softmax<k_posn>(causal_mask<q_posn, k_posn>(
          einsum<"nheads d_head batch q_posn, k_posn nheads batch d_head -> q_posn k_posn nheads batch">(qp, kp) * 0.5f,
          -inf)),
      vp);
  static_assert(uses_fused_attention_v<decltype(z)>);
  tensor<float, batch, q_posn, nheads, d_value> got = rearrange<"d_value q_posn batch nheads -> batch q_posn nheads d_value">(z);
  CHECK(mismatches(got.data(),
                   in.ref([](double x, auto, auto, auto i, auto j) { return causal(x * 0.5, i, j, -INFINITY); }),
                   1e-5, 1e-4) == 0);

  // Multi-query attention: one V for every head (V lacks nheads).
  tensor<float, batch, k_posn, d_value> v1 = tensor<float, batch, k_posn, d_value>::random_normal(9, batch{2}, k_posn{23}, d_value{6});
  auto z1 = einsum<"batch nheads q_posn k_posn, batch k_posn d_value -> batch q_posn nheads d_value">(
      softmax<k_posn>(scores_of(in.q, in.k)), v1);
  static_assert(uses_fused_attention_v<decltype(z1)>);
  tensor<float, batch, q_posn, nheads, d_value> got1 = z1;
  tensor<float, batch, k_posn, nheads, d_value> v1h(batch{2}, k_posn{23}, nheads{3}, d_value{6});
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t j = 0; j < 23; ++j)
      for (std::size_t h = 0; h < 3; ++h)
        for (std::size_t c = 0; c < 6; ++c) v1h(batch{b}, k_posn{j}, nheads{h}, d_value{c}) = v1(batch{b}, k_posn{j}, d_value{c});
  CHECK(mismatches(got1.data(), reference(sz, in.q.data(), in.k.data(), v1h.data(), [](double x, auto...) { return x; }),
                   1e-5, 1e-4) == 0);
}

TEST_CASE("fused attention: the unfused path runs when scores or pattern are evaluated, with the same result",
          "[fused]") {
  const inputs<float> in({2, 3, 29, 31, 5, 5});
  auto fused = attend(softmax<k_posn>(causal_mask<q_posn, k_posn>(scores_of(in.q, in.k) * 0.3f, -inf)), in.v);
  static_assert(uses_fused_attention_v<decltype(fused)>);
  tensor<float, batch, q_posn, nheads, d_value> expected = fused;

  SECTION("scores evaluated (seed 003 returns them)") {
    tensor<float, batch, nheads, q_posn, k_posn> scores = scores_of(in.q, in.k);
    auto z = attend(softmax<k_posn>(causal_mask<q_posn, k_posn>(scores * 0.3f, -inf)), in.v);
    static_assert(!uses_fused_attention_v<decltype(z)>);
    tensor<float, batch, q_posn, nheads, d_value> got = z;
    CHECK(mismatches(got.data(), flat(expected), 1e-5) == 0);
  }
  SECTION("pattern evaluated") {
    tensor<float, batch, nheads, q_posn, k_posn> pattern =
        softmax<k_posn>(causal_mask<q_posn, k_posn>(scores_of(in.q, in.k) * 0.3f, -inf));
    auto z = attend(pattern, in.v);
    static_assert(!uses_fused_attention_v<decltype(z)>);
    tensor<float, batch, q_posn, nheads, d_value> got = z;
    CHECK(mismatches(got.data(), flat(expected), 1e-5) == 0);
  }
  SECTION("shapes the kernel does not cover stay unfused") {
    // A causal mask with the dims swapped (the upper triangle kept).
    auto swapped = attend(softmax<k_posn>(causal_mask<k_posn, q_posn>(scores_of(in.q, in.k), -inf)), in.v);
    static_assert(!uses_fused_attention_v<decltype(swapped)>);
    // Softmax along the query dim.
    auto along_q = attend(softmax<q_posn>(scores_of(in.q, in.k)), in.v);
    static_assert(!uses_fused_attention_v<decltype(along_q)>);
    // An element-wise op the kernel does not know (an added bias).
    auto biased = attend(softmax<k_posn>(scores_of(in.q, in.k) + 1.0f), in.v);
    static_assert(!uses_fused_attention_v<decltype(biased)>);
    // Two dims summed by the score einsum (heads and d_head).
    auto two_sums = einsum<batch, q_posn, nheads, d_value>(
        softmax<k_posn>(einsum<"batch q_posn nheads d_head, batch k_posn nheads d_head -> batch q_posn k_posn">(in.q, in.k)),
        in.v);
    static_assert(!uses_fused_attention_v<decltype(two_sums)>);
    // The plain contraction of two tensors.
    static_assert(!uses_fused_attention_v<decltype(scores_of(in.q, in.k))>);
    // And the unfused results are right: the swapped mask against the loops.
    tensor<float, batch, q_posn, nheads, d_value> got = swapped;
    CHECK(mismatches(got.data(), in.ref([](double x, auto, auto, auto i, auto j) { return i > j ? -INFINITY : x; }),
                     1e-5, 1e-4) == 0);
  }
}

// ---------------------------------------------------------------------------
// Numbers

TEMPLATE_TEST_CASE("fused attention: odd lengths, partly and fully masked tiles, 1 and 2 threads", "[fused]", float,
                   double) {
  using T = TestType;
  const T tinf = std::numeric_limits<T>::infinity();
  // Tiles are 64+ query rows by 128+ keys: these cover one and many tiles,
  // q_posn < k_posn (key tiles past every query: fully masked) and q_posn >
  // k_posn, and extents of 1.
  const std::vector<sizes> shapes{{1, 1, 1, 1, 1, 1},   {2, 3, 37, 41, 5, 7},  {1, 2, 150, 300, 16, 16},
                                  {2, 1, 300, 150, 8, 3}, {1, 1, 67, 129, 64, 64}, {3, 2, 5, 200, 3, 9}};
  for (const sizes& sz : shapes)
    for (int threads : {1, 2}) {
      test::thread_count_guard guard(threads);
      const inputs<T> in(sz, 11 + sz.nq);
      INFO("b " << sz.b << " h " << sz.h << " q " << sz.nq << " k " << sz.nk << " d " << sz.d << " dv " << sz.dv
                << ", threads " << threads);
      for (T fill : {-tinf, T(-1e4), T(0.5)}) {
        INFO("masked value " << fill);
        check_fused_causal(in, fill);
      }
    }
}

TEMPLATE_TEST_CASE("fused attention: NaN and inf in V at keys the causal mask hides propagate as unfused (PyTorch)",
                   "[fused]", float, double) {
  // A masked key has weight 0, and 0 * NaN and 0 * inf are NaN: PyTorch's
  // softmax(masked) @ V and the unfused path give NaN in that value column
  // (inf where the key is visible and V is inf). The fused kernel skips key
  // tiles past a query tile's last row under a causal mask; it must give
  // the same. Non-finite values sit at query / key tile edges (tiles are
  // 64-72 query rows, 128+ keys on every arch) and at the last key; every
  // other column stays finite. Expected from the plain loops in double.
  using T = TestType;
  const T tinf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
  const sizes sz{2, 1, 150, 210, 8, 9};
  inputs<T> in(sz, 5);
  // (batch, key, value column, value): at a tile's last / first key, in
  // the middle of a key tile, the last key; key 1 is seen by almost every
  // row (inf there gives inf, not NaN, from row 1 on).
  struct poison {
    std::size_t b, j, c;
    T x;
  };
  const std::vector<poison> at{{0, 63, 0, nan},  {0, 64, 1, tinf},  {0, 72, 2, -tinf}, {0, 127, 3, nan},
                               {0, 128, 4, nan}, {0, 209, 5, tinf}, {1, 149, 6, nan},  {1, 1, 7, tinf},
                               {1, 190, 0, -tinf}};
  for (const poison& p : at) in.v(batch{p.b}, k_posn{p.j}, nheads{0}, d_value{p.c}) = p.x;
  for (int threads : {1, 2}) {
    test::thread_count_guard guard(threads);
    INFO("threads " << threads);
    for (T fill : {-tinf, T(-1e4)}) {
      INFO("masked value " << fill);
      auto got = check_fused_causal(in, fill);
      // The poisoned columns are NaN in every row that cannot see the key,
      // the column untouched by any poison (8) is finite everywhere.
      for (const poison& p : at)
        for (std::size_t i = 0; i < sz.nq; ++i)
          if (i < p.j) CHECK(std::isnan(got(batch{p.b}, q_posn{i}, nheads{0}, d_value{p.c})));
      for (std::size_t b = 0; b < sz.b; ++b)
        for (std::size_t i = 0; i < sz.nq; ++i) CHECK(std::isfinite(got(batch{b}, q_posn{i}, nheads{0}, d_value{8})));
    }
  }
  // The kernel itself, on every arch path.
  check_causal_kernel_on_every_arch(in);
}

TEST_CASE("fused attention: all-masked rows give NaN for -inf and uniform weights for a finite value", "[fused]") {
  const sizes sz{2, 2, 70, 140, 4, 5};
  const inputs<float> in(sz);
  // Batch 1 masks every key; batch 0 masks key 0, which is all query 0 sees
  // under the causal mask.
  tensor<bool, batch, k_posn> pad(batch{2}, k_posn{140});
  for (std::size_t j = 0; j < 140; ++j) {
    pad(batch{0}, k_posn{j}) = j == 0;
    pad(batch{1}, k_posn{j}) = true;
  }
  auto masked = [&](std::size_t b, std::size_t j) { return bool(pad(batch{b}, k_posn{j})); };
  for (float fill : {-inf, -1e9f}) {
    INFO("masked value " << fill);
    auto z = attend(softmax<k_posn>(masked_fill(causal_mask<q_posn, k_posn>(scores_of(in.q, in.k), fill), pad, fill)),
                    in.v);
    static_assert(uses_fused_attention_v<decltype(z)>);
    tensor<float, batch, q_posn, nheads, d_value> got = z;
    tensor<float, batch, nheads, q_posn, k_posn> pattern =
        softmax<k_posn>(masked_fill(causal_mask<q_posn, k_posn>(scores_of(in.q, in.k), fill), pad, fill));
    tensor<float, batch, q_posn, nheads, d_value> unfused = attend(pattern, in.v);
    const auto ref = in.ref([&](double x, auto b, auto, auto i, auto j) {
      return masked(b, j) ? double(fill) : causal(x, i, j, double(fill));
    });
    CHECK(mismatches(got.data(), flat(unfused), 1e-5) == 0);
    CHECK(mismatches(got.data(), ref, 1e-5, 1e-4) == 0);
    // The rows that are masked everywhere: NaN for -inf; for a finite value,
    // uniform weights (the mean of v over the keys).
    const float first = got(batch{1}, q_posn{3}, nheads{1}, d_value{2});
    if (fill == -inf) {
      CHECK(std::isnan(first));
      CHECK(std::isnan(float(got(batch{0}, q_posn{0}, nheads{0}, d_value{0}))));
      CHECK(!std::isnan(float(got(batch{0}, q_posn{1}, nheads{0}, d_value{0}))));
    } else {
      double mean = 0;
      for (std::size_t j = 0; j < 140; ++j) mean += in.v(batch{1}, k_posn{j}, nheads{1}, d_value{2});
      CHECK(first == Approx(mean / 140).margin(1e-5));
    }
  }
}

TEST_CASE("fused attention: huge scores", "[fused]") {
  // Integer inputs make every raw score exact in float (|score| < 2^24), so
  // the loops see the same scores: up to ~5000, far past where exp overflows.
  const sizes sz{1, 2, 90, 150, 6, 4};
  inputs<float> in(sz);
  for (std::size_t i = 0; i < in.q.size(); ++i) in.q.data()[i] = float(int(i * 37 % 61) - 30);
  for (std::size_t i = 0; i < in.k.size(); ++i) in.k.data()[i] = float(int(i * 53 % 59) - 29);
  auto z = attend(softmax<k_posn>(causal_mask<q_posn, k_posn>(scores_of(in.q, in.k), -inf)), in.v);
  static_assert(uses_fused_attention_v<decltype(z)>);
  tensor<float, batch, q_posn, nheads, d_value> got = z;
  tensor<float, batch, nheads, q_posn, k_posn> pattern =
      softmax<k_posn>(causal_mask<q_posn, k_posn>(scores_of(in.q, in.k), -inf));
  tensor<float, batch, q_posn, nheads, d_value> unfused = attend(pattern, in.v);
  CHECK(mismatches(got.data(), flat(unfused), 1e-5) == 0);
  CHECK(mismatches(got.data(), in.ref([](double x, auto, auto, auto i, auto j) { return causal(x, i, j, -INFINITY); }),
                   1e-5, 1e-4) == 0);
  double biggest = 0;
  for (std::size_t i = 0; i < pattern.size(); ++i) biggest = std::max(biggest, double(pattern.data()[i]));
  CHECK(biggest == 1.0);  // some rows are one-hot: the scores really are huge
}

TEST_CASE("fused attention: empty extents", "[fused]") {
  for (const sizes& sz : {sizes{2, 3, 4, 0, 5, 6}, sizes{2, 3, 0, 4, 5, 6}, sizes{0, 3, 4, 4, 5, 6}}) {
    const inputs<float> in(sz);
    auto z = attend(softmax<k_posn>(causal_mask<q_posn, k_posn>(scores_of(in.q, in.k), -inf)), in.v);
    static_assert(uses_fused_attention_v<decltype(z)>);
    tensor<float, batch, q_posn, nheads, d_value> got = z;
    // An empty sum over keys is 0, as the unfused einsum gives.
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got.data()[i] == 0.0f);
  }
}

// ---------------------------------------------------------------------------
// The name-free kernel on every arch path

TEMPLATE_TEST_CASE("kernels/attention: every arch path matches the loops", "[fused][kernels]", float, double) {
  using T = TestType;
  const inputs<T> in({2, 1, 77, 203, 9, 11});
  check_causal_kernel_on_every_arch(in);
}

TEMPLATE_TEST_CASE("kernels/attention: the few-rows (decode) path on every arch, d and dv past a vector with a tail",
                   "[fused][kernels][decode]", float, double) {
  // 1 to 4 query rows run row by row (dot products over d, then O += p V[j]):
  // d = 21 and dv = 19 are a whole vector plus a tail at every width (2 to
  // 16 lanes), which d_head = 16 elsewhere never reaches. The queries are
  // the last positions (offset), so they see up to all 203 keys.
  using T = TestType;
  for (std::size_t nq : {std::size_t(1), std::size_t(4)}) {
    INFO(nq << " query rows");
    check_causal_kernel_on_every_arch(inputs<T>({2, 1, nq, 203, 21, 19}), 203 - nq);
  }
}

TEMPLATE_TEST_CASE("kernels/attention: Q, V and out with a non-unit inner stride, and a boolean mask, on every arch",
                   "[fused][kernels]", float, double) {
  // Q and V transposed within each batch index (d and c outermost), out
  // column-major: Q is packed rather than read in place, V gathered
  // element by element, and the output stored through its stride. The mask
  // hides every third key; lengths are not multiples of any vector width.
  using T = TestType;
  const sizes sz{2, 1, 29, 45, 7, 5};
  const inputs<T> in(sz, 23);
  std::vector<T> qt(sz.b * sz.d * sz.nq), vt(sz.b * sz.dv * sz.nk);
  for (std::size_t b = 0; b < sz.b; ++b) {
    for (std::size_t i = 0; i < sz.nq; ++i)
      for (std::size_t d = 0; d < sz.d; ++d)
        qt[(b * sz.d + d) * sz.nq + i] = in.q.data()[(b * sz.nq + i) * sz.d + d];
    for (std::size_t j = 0; j < sz.nk; ++j)
      for (std::size_t c = 0; c < sz.dv; ++c)
        vt[(b * sz.dv + c) * sz.nk + j] = in.v.data()[(b * sz.nk + j) * sz.dv + c];
  }
  std::unique_ptr<bool[]> mask(new bool[sz.nq * sz.nk]);
  for (std::size_t i = 0; i < sz.nq; ++i)
    for (std::size_t j = 0; j < sz.nk; ++j) mask[i * sz.nk + j] = j % 3 == 1;
  kernels::attention_args<T> a;
  a.q = qt.data();
  a.k = in.k.data();
  a.v = vt.data();
  a.nq = sz.nq;
  a.nk = sz.nk;
  a.dk = sz.d;
  a.dv = sz.dv;
  a.q_row = 1;
  a.q_col = std::ptrdiff_t(sz.nq);
  a.k_row = std::ptrdiff_t(sz.d);
  a.k_col = 1;
  a.v_row = 1;
  a.v_col = std::ptrdiff_t(sz.nk);
  a.out_row = 1;
  a.out_col = std::ptrdiff_t(sz.nq);
  a.batch_rank = 1;
  a.batch_extents[0] = sz.b;
  a.q_batch[0] = std::ptrdiff_t(sz.nq * sz.d);
  a.k_batch[0] = std::ptrdiff_t(sz.nk * sz.d);
  a.v_batch[0] = std::ptrdiff_t(sz.nk * sz.dv);
  a.out_batch[0] = std::ptrdiff_t(sz.nq * sz.dv);
  a.n_stages = 2;
  a.stages[0].op = kernels::score_op::multiply;
  a.stages[0].value = T(0.5);
  a.stages[1].op = kernels::score_op::mask;
  a.stages[1].value = T(-2);
  a.stages[1].mask = mask.get();
  a.stages[1].mask_row = std::ptrdiff_t(sz.nk);
  a.stages[1].mask_col = 1;  // mask_batch stays 0: one mask for every batch index
  const auto ref =
      in.ref([](double x, auto, auto, auto, auto j) { return j % 3 == 1 ? -2.0 : x * 0.5; });
  test::for_each_arch([&](auto arch) {
    using Arch = decltype(arch);
    INFO("arch " << Arch::name());
    std::vector<T> out(sz.b * sz.nq * sz.dv, T(-7));
    a.out = out.data();
    kernels::attention_on<Arch>(a);
    std::vector<double> got(out.size());  // back to (b, i, c)
    for (std::size_t b = 0; b < sz.b; ++b)
      for (std::size_t i = 0; i < sz.nq; ++i)
        for (std::size_t c = 0; c < sz.dv; ++c)
          got[(b * sz.nq + i) * sz.dv + c] = double(out[(b * sz.dv + c) * sz.nq + i]);
    CHECK(mismatches(got, ref, 1e-5, 1e-4) == 0);
  });
}
