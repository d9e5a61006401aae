// Attention written as plain contractions on grad::vars, with no wrapper:
// the score einsum of two vars, scales, masks and softmax are lazy, and the
// einsum with V that completes the pattern records one fused tape node
// (the scores never materialised; uses_fused_attention_v holds on the var).
// Checked against PyTorch float64 autograd of the unfused chain (fixtures of
// tests/reference/make_grad_fixtures.py), the same chain recorded unfused
// (the scores materialised into a var first), the same lines on tensors
// (forward), and central finite differences of the tensor forward. Shapes:
// causal, a padding mask with -1e9f and a query row masked whole, a sliding
// window, grouped-query attention; a mask that is a local of a function
// which returned before backward (owned, not referenced). Score
// modifications (fixtures of tests/reference/make_score_mod_fixtures.py):
// soft-capping, a learned per-head temperature, learned ALiBi slopes and
// attention sinks, a user's map with its derivative, each fused on tensors
// and on vars with the gradient of its learned tensor, and all of them at
// once in float.

#include <dimsum/grad/grad.hpp>
#include <dimsum/ops/alibi.hpp>
#include <dimsum/ops/math.hpp>
#include <dimsum/ops/window_mask.hpp>

#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "golden.hpp"
#include "support.hpp"

namespace {

using namespace dimsum;

DIMSUM_DIM(batch);
DIMSUM_DIM(q_posn);
DIMSUM_DIM(k_posn);
DIMSUM_DIM(d_head);
DIMSUM_DIM(d_value);
DIMSUM_DIM(kv_head);
DIMSUM_DIM(group);
DIMSUM_DIM(head);

constexpr double ninf = -std::numeric_limits<double>::infinity();

template <class Q, class K>
auto scores(const Q& q, const K& k) {
  return einsum<"batch q_posn d_head, batch k_posn d_head -> batch q_posn k_posn">(q, k);
}
template <class P, class V>
auto attend(P&& p, const V& v) {
  return einsum<"batch q_posn k_posn, batch k_posn d_value -> batch q_posn d_value">(softmax<k_posn>(std::forward<P>(p)), v);
}

/// The causal chain of the fixtures, on tensors or vars.
template <class Q, class K, class V>
auto causal(const Q& q, const K& k, const V& v, double value) {
  return attend(causal_mask<q_posn, k_posn>(scores(q, k) * 0.5, value), v);
}

/// The same on vars, line by line with named locals (on tensors the lazy
/// result would refer to them after they are gone; a lazy var owns what
/// it reads).
template <class Q, class K, class V>
auto causal_lines(const Q& q, const K& k, const V& v, double value) {
  auto s = scores(q, k);
  auto scaled = s * 0.5;
  auto masked = causal_mask<q_posn, k_posn>(scaled, value);
  return attend(masked, v);
}

using test::differ;
using test::random_tensor;

/// Central differences (step 1e-6) of sum(f(x) * r) along every element of x,
/// f evaluated on tensors.
template <class X, class F, class R>
X finite_difference(X x, F f, const R& r) {
  X g = X::from_extents(x.extents());
  auto loss = [&] {
    const R out = f(x);
    double s = 0;
    for (std::size_t n = 0; n < out.size(); ++n) s += out.data()[n] * r.data()[n];
    return s;
  };
  for (std::size_t n = 0; n < x.size(); ++n) {
    const double x0 = x.data()[n];
    x.data()[n] = x0 + 1e-6;
    const double up = loss();
    x.data()[n] = x0 - 1e-6;
    const double down = loss();
    x.data()[n] = x0;
    g.data()[n] = (up - down) / 2e-6;
  }
  return g;
}

using QT = tensor<double, batch, q_posn, d_head>;
using KT = tensor<double, batch, k_posn, d_head>;
using VT = tensor<double, batch, k_posn, d_value>;
using OT = tensor<double, batch, q_posn, d_value>;

}  // namespace

TEST_CASE("attention on vars with no wrapper: one fused node; equals PyTorch, the unfused chain, the tensor forward") {
  for (double value : {ninf, -3.0}) {
    const std::string name = value == ninf ? "fused_attn_causal" : "fused_attn_causal_finite";
    INFO(name);
    const QT q0 = golden::load<QT>("grad/" + name + "_q.npy");
    const KT k0 = golden::load<KT>("grad/" + name + "_k.npy");
    const VT v0 = golden::load<VT>("grad/" + name + "_v.npy");
    const OT r = golden::load<OT>("grad/" + name + "_r.npy");

    grad::tape fused;
    auto q = fused.watch(q0);
    auto k = fused.watch(k0);
    auto v = fused.watch(v0);
    const std::size_t leaves = fused.size();
    auto z = causal_lines(q, k, v, value);
    static_assert(uses_fused_attention_v<decltype(z)>);  // on the var expression
    CHECK(fused.size() == leaves + 1);                   // one node: no p x p scores recorded
    const OT on_tensors = causal(q0, k0, v0, value);
    CHECK(differ(z.value(), on_tensors, 0.0) == 0);  // the same kernel, the same values
    fused.backward(sum<batch, q_posn, d_value>(z * r));
    golden::check(gradient(q), "grad/" + name + "_grad_q.npy", 1e-12, 1e-12);
    golden::check(gradient(k), "grad/" + name + "_grad_k.npy", 1e-12, 1e-12);
    golden::check(gradient(v), "grad/" + name + "_grad_v.npy", 1e-12, 1e-12);

    // The same chain with the scores materialised first: recorded unfused.
    grad::tape unfused;
    auto uq = unfused.watch(q0);
    auto uk = unfused.watch(k0);
    auto uv = unfused.watch(v0);
    grad::var<double, batch, q_posn, k_posn> s = scores(uq, uk);
    auto uz = attend(causal_mask<q_posn, k_posn>(s * 0.5, value), uv);
    static_assert(!uses_fused_attention_v<decltype(uz)>);
    CHECK(unfused.size() > leaves + 1);
    unfused.backward(sum<batch, q_posn, d_value>(uz * r));
    CHECK(differ(gradient(q), gradient(uq), 1e-12) == 0);
    CHECK(differ(gradient(k), gradient(uk), 1e-12) == 0);
    CHECK(differ(gradient(v), gradient(uv), 1e-12) == 0);
  }
}

TEST_CASE("attention on vars with no wrapper: gradients equal central finite differences") {
  const QT q0 = random_tensor(QT(batch{2}, q_posn{7}, d_head{3}), 1);
  const KT k0 = random_tensor(KT(batch{2}, k_posn{9}, d_head{3}), 2);
  const VT v0 = random_tensor(VT(batch{2}, k_posn{9}, d_value{2}), 3);
  const OT r = random_tensor(OT(batch{2}, q_posn{7}, d_value{2}), 4);
  // einsum(k, q) order and a division: the kernel's q is the einsum's second operand
  auto chain = [](const auto& q, const auto& k, const auto& v) {
    return attend(window_mask<q_posn, k_posn>(
                      einsum<"batch k_posn d_head, batch q_posn d_head -> batch q_posn k_posn">(k, q) / 1.7, 4, ninf, 2),
                  v);
  };
  grad::tape t;
  auto q = t.watch(q0);
  auto k = t.watch(k0);
  auto v = t.watch(v0);
  auto z = chain(q, k, v);
  static_assert(uses_fused_attention_v<decltype(z)>);
  CHECK(t.size() == 4);
  {  // V first in the outer einsum: the same node
    grad::tape other;
    auto v2 = einsum<"batch k_posn d_value, batch q_posn k_posn -> batch q_posn d_value">(
        other.watch(v0), softmax<k_posn>(scores(other.watch(q0), other.watch(k0)) * 0.5));
    static_assert(uses_fused_attention_v<decltype(v2)>);
    CHECK(other.size() == 4);
    CHECK(differ(v2.value(), OT(attend(scores(q0, k0) * 0.5, v0)), 1e-12) == 0);
  }
  t.backward(sum<batch, q_posn, d_value>(z * r));
  CHECK(differ(gradient(q), finite_difference(q0, [&](const QT& x) { return OT(chain(x, k0, v0)); }, r), 1e-7) == 0);
  CHECK(differ(gradient(k), finite_difference(k0, [&](const KT& x) { return OT(chain(q0, x, v0)); }, r), 1e-7) == 0);
  CHECK(differ(gradient(v), finite_difference(v0, [&](const VT& x) { return OT(chain(q0, k0, x)); }, r), 1e-7) == 0);
}

namespace {

using FQ = tensor<float, batch, q_posn, d_head>;
using FK = tensor<float, batch, k_posn, d_head>;
using FV = tensor<float, batch, k_posn, d_value>;
using FO = tensor<float, batch, q_posn, d_value>;

/// Seed 003's padding: masked_fill of the scores where !keep with -1e9f;
/// `keep` is a local of this function, gone before backward runs.
template <class Q, class K, class V>
auto padded(const Q& q, const K& k, const V& v, const std::vector<int>& lengths, std::size_t nq, std::size_t nk) {
  tensor<bool, batch, q_posn, k_posn> keep(batch{lengths.size()}, q_posn{nq}, k_posn{nk});
  for (std::size_t b = 0; b < lengths.size(); ++b)
    for (std::size_t i = 0; i < nq; ++i)
      for (std::size_t j = 0; j < nk; ++j)
        keep(batch{b}, q_posn{i}, k_posn{j}) = int(j) < lengths[b] && int(i) < lengths[b];
  return attend(masked_fill(scores(q, k) * 0.5f, !keep, -1e9f), v);
}

}  // namespace

TEST_CASE("attention on vars with no wrapper: 2 queries, 3 keys, ones, one query row masked with -1e9f") {
  FQ q0(batch{1}, q_posn{2}, d_head{1});
  FK k0(batch{1}, k_posn{3}, d_head{1});
  FV v0(batch{1}, k_posn{3}, d_value{1});
  std::fill_n(q0.data(), 2, 1.0f);
  std::fill_n(k0.data(), 3, 1.0f);
  std::fill_n(v0.data(), 3, 1.0f);
  grad::tape t;
  auto q = t.watch(q0);
  auto k = t.watch(k0);
  auto v = t.watch(v0);
  auto z = padded(q, k, v, {1}, 2, 3);  // query 1 and keys 1, 2 are padding
  static_assert(uses_fused_attention_v<decltype(z)>);
  CHECK(t.size() == 4);
  t.backward(sum<batch, q_posn, d_value>(z));
  // row 0 keeps key 0 alone (weight 1); row 1's three fills weigh 1/3 each
  const float want[3] = {1.0f + 1.0f / 3, 1.0f / 3, 1.0f / 3};
  for (std::size_t j = 0; j < 3; ++j) CHECK(gradient(v).data()[j] == Approx(want[j]).epsilon(1e-6));
  for (std::size_t i = 0; i < 2; ++i) CHECK(gradient(q).data()[i] == 0.0f);
  for (std::size_t j = 0; j < 3; ++j) CHECK(gradient(k).data()[j] == 0.0f);
}

TEST_CASE("attention on vars with no wrapper: padding with -1e9f from a function's local mask, fused == unfused") {
  const FQ q0 = random_tensor(FQ(batch{2}, q_posn{70}, d_head{5}), 5);
  const FK k0 = random_tensor(FK(batch{2}, k_posn{70}, d_head{5}), 6);
  const FV v0 = random_tensor(FV(batch{2}, k_posn{70}, d_value{3}), 7);
  const FO r = random_tensor(FO(batch{2}, q_posn{70}, d_value{3}), 8);
  const std::vector<int> lengths{70, 41};
  grad::tape t, u;
  auto q = t.watch(q0);
  auto k = t.watch(k0);
  auto v = t.watch(v0);
  auto z = padded(q, k, v, lengths, 70, 70);
  CHECK(t.size() == 4);
  t.backward(sum<batch, q_posn, d_value>(z * r));
  auto uq = u.watch(q0);
  auto uk = u.watch(k0);
  auto uv = u.watch(v0);
  grad::var<float, batch, q_posn, k_posn> s = scores(uq, uk);  // the scores materialised: unfused
  tensor<bool, batch, q_posn, k_posn> keep(batch{2}, q_posn{70}, k_posn{70});
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t i = 0; i < 70; ++i)
      for (std::size_t j = 0; j < 70; ++j) keep(batch{b}, q_posn{i}, k_posn{j}) = int(j) < lengths[b] && int(i) < lengths[b];
  auto uz = attend(masked_fill(s * 0.5f, !keep, -1e9f), uv);
  u.backward(sum<batch, q_posn, d_value>(uz * r));
  CHECK(differ(z.value(), uz.value(), 2e-5) == 0);
  CHECK(differ(gradient(q), gradient(uq), 2e-5) == 0);
  CHECK(differ(gradient(k), gradient(uk), 2e-5) == 0);
  CHECK(differ(gradient(v), gradient(uv), 2e-5) == 0);
}

TEST_CASE("attention on vars with no wrapper: grouped-query attention (K and V shared by a group of query heads)") {
  using GQ = tensor<double, batch, q_posn, kv_head, group, d_head>;
  using GK = tensor<double, batch, k_posn, kv_head, d_head>;
  using GV = tensor<double, batch, k_posn, kv_head, d_value>;
  using GO = tensor<double, batch, q_posn, kv_head, group, d_value>;
  const GQ q0 = random_tensor(GQ(batch{1}, q_posn{6}, kv_head{2}, group{2}, d_head{3}), 9);
  const GK k0 = random_tensor(GK(batch{1}, k_posn{6}, kv_head{2}, d_head{3}), 10);
  const GV v0 = random_tensor(GV(batch{1}, k_posn{6}, kv_head{2}, d_value{2}), 11);
  const GO r = random_tensor(GO(batch{1}, q_posn{6}, kv_head{2}, group{2}, d_value{2}), 12);
  auto chain = [](const auto& q, const auto& k, const auto& v) {
    return einsum<"batch kv_head group q_posn k_posn, batch k_posn kv_head d_value -> batch q_posn kv_head group d_value">(
        softmax<k_posn>(causal_mask<q_posn, k_posn>(
            einsum<"batch q_posn kv_head group d_head, batch k_posn kv_head d_head -> batch kv_head group q_posn k_posn">(q, k) *
                0.6,
            ninf)),
        v);
  };
  grad::tape t;
  auto q = t.watch(q0);
  auto k = t.watch(k0);
  auto v = t.watch(v0);
  auto z = chain(q, k, v);
  static_assert(uses_fused_attention_v<decltype(z)>);
  CHECK(t.size() == 4);
  CHECK(differ(z.value(), GO(chain(q0, k0, v0)), 0.0) == 0);
  t.backward(sum<batch, q_posn, kv_head, group, d_value>(z * r));
  CHECK(differ(gradient(q), finite_difference(q0, [&](const GQ& x) { return GO(chain(x, k0, v0)); }, r), 1e-7) == 0);
  CHECK(differ(gradient(k), finite_difference(k0, [&](const GK& x) { return GO(chain(q0, x, v0)); }, r), 1e-7) == 0);
  CHECK(differ(gradient(v), finite_difference(v0, [&](const GV& x) { return GO(chain(q0, k0, x)); }, r), 1e-7) == 0);
}

TEST_CASE("a lazy var chain used any other way is recorded unfused, once") {
  const QT q0 = random_tensor(QT(batch{1}, q_posn{4}, d_head{3}), 13);
  const KT k0 = random_tensor(KT(batch{1}, k_posn{5}, d_head{3}), 14);
  grad::tape t;
  auto q = t.watch(q0);
  auto k = t.watch(k0);
  auto s = scores(q, k) * 2.0;
  CHECK(t.size() == 2);                       // nothing recorded yet
  auto total = sum<batch, q_posn, k_posn>(s);  // an operation that does not continue the chain
  CHECK(t.size() == 5);                       // einsum, * 2, sum
  auto again = sum<batch, q_posn, k_posn>(s * s);
  CHECK(t.size() == 7);  // s is recorded once: s * s and the sum
  t.backward(total + again);
  // d/dq of sum(2 qk) + sum(4 (qk)^2): 2 sum_j k_j + 8 sum_j (q.k_j) k_j
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t d = 0; d < 3; ++d) {
      double want = 0;
      for (std::size_t j = 0; j < 5; ++j) {
        double dot = 0;
        for (std::size_t x = 0; x < 3; ++x) dot += q0(batch{0}, q_posn{i}, d_head{x}) * k0(batch{0}, k_posn{j}, d_head{x});
        want += 2 * k0(batch{0}, k_posn{j}, d_head{d}) + 8 * dot * k0(batch{0}, k_posn{j}, d_head{d});
      }
      CHECK(gradient(q)(batch{0}, q_posn{i}, d_head{d}) == Approx(want).epsilon(1e-12));
    }
}

TEST_CASE("grad::fused_attention: f runs once on the vars; a local f reads and a mask it captures may be gone") {
  const QT q0 = random_tensor(QT(batch{2}, q_posn{9}, d_head{3}), 15);
  const KT k0 = random_tensor(KT(batch{2}, k_posn{11}, d_head{3}), 16);
  const VT v0 = random_tensor(VT(batch{2}, k_posn{11}, d_value{2}), 17);
  const OT r = random_tensor(OT(batch{2}, q_posn{9}, d_value{2}), 18);
  auto hidden_at = [](std::size_t b, std::size_t i, std::size_t j) { return (i + 2 * j + b) % 5 == 0; };
  grad::tape t;
  auto q = t.watch(q0);
  auto k = t.watch(k0);
  auto v = t.watch(v0);
  auto make = [&] {
    tensor<bool, batch, q_posn, k_posn> hidden(batch{2}, q_posn{9}, k_posn{11});  // gone when make returns
    for (std::size_t b = 0; b < 2; ++b)
      for (std::size_t i = 0; i < 9; ++i)
        for (std::size_t j = 0; j < 11; ++j) hidden(batch{b}, q_posn{i}, k_posn{j}) = hidden_at(b, i, j);
    return grad::fused_attention(q, k, v, [&hidden](const auto& q, const auto& k, const auto& v) {
      auto s = scores(q, k) * 0.5;  // a named local of f
      return attend(masked_fill(s, hidden, ninf), v);
    });
  };
  auto z = make();
  CHECK(t.size() == 4);
  t.backward(sum<batch, q_posn, d_value>(z * r));

  grad::tape u;
  auto uq = u.watch(q0);
  auto uk = u.watch(k0);
  auto uv = u.watch(v0);
  tensor<bool, batch, q_posn, k_posn> hidden(batch{2}, q_posn{9}, k_posn{11});
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t i = 0; i < 9; ++i)
      for (std::size_t j = 0; j < 11; ++j) hidden(batch{b}, q_posn{i}, k_posn{j}) = hidden_at(b, i, j);
  grad::var<double, batch, q_posn, k_posn> s = scores(uq, uk);  // materialised: unfused
  auto uz = attend(masked_fill(s * 0.5, hidden, ninf), uv);
  u.backward(sum<batch, q_posn, d_value>(uz * r));
  CHECK(differ(z.value(), uz.value(), 1e-12) == 0);
  CHECK(differ(gradient(q), gradient(uq), 1e-12) == 0);
  CHECK(differ(gradient(k), gradient(uk), 1e-12) == 0);
  CHECK(differ(gradient(v), gradient(uv), 1e-12) == 0);
}

TEST_CASE("attention_not_fused_reason_v names the part of an attention-shaped expression that blocked fusion") {
  const QT q(batch{1}, q_posn{2}, d_head{3});
  const KT k(batch{1}, k_posn{2}, d_head{3});
  const VT v(batch{1}, k_posn{2}, d_value{1});
  const tensor<double, batch, q_posn> per_query(batch{1}, q_posn{2});
  using fused = decltype(attend(scores(q, k) * 0.5, v));
  STATIC_REQUIRE(uses_fused_attention_v<fused>);
  STATIC_REQUIRE(attention_not_fused_reason_v<fused>.empty());
  using minus = decltype(attend(scores(q, k) - 0.5, v));
  STATIC_REQUIRE(!uses_fused_attention_v<minus>);
  STATIC_REQUIRE(attention_not_fused_reason_v<minus>.starts_with("the softmax's operand is not"));
  using scaled_per_query = decltype(attend(scores(q, k) * per_query, v));
  STATIC_REQUIRE(!uses_fused_attention_v<scaled_per_query>);
  STATIC_REQUIRE(attention_not_fused_reason_v<scaled_per_query> ==
                 "a factor on the scores has the query or key dim (it must be one value per batch index)");
  using no_softmax = decltype(einsum<"batch q_posn k_posn, batch k_posn d_value -> batch q_posn d_value">(scores(q, k), v));
  STATIC_REQUIRE(attention_not_fused_reason_v<no_softmax> == "neither operand of the outer einsum is a softmax");
  using keeps_keys =
      decltype(einsum<"batch q_posn k_posn, batch k_posn d_value -> batch q_posn k_posn d_value">(softmax<k_posn>(scores(q, k)), v));
  STATIC_REQUIRE(attention_not_fused_reason_v<keeps_keys> ==
                 "the outer einsum does not sum exactly the key dim and keep every other dim");
}

namespace {

using HQ = tensor<double, batch, head, q_posn, d_head>;
using HK = tensor<double, batch, head, k_posn, d_head>;
using HV = tensor<double, batch, head, k_posn, d_value>;
using HO = tensor<double, batch, head, q_posn, d_value>;
using HT = tensor<double, head>;

enum class score_mod { softcap, temperature, alibi, sink, map };

/// The scores over heads; `Unfused` evaluates them (the unfused chain).
template <bool Unfused, class Q, class K>
auto head_scores(const Q& q, const K& k) {
  auto s = einsum<"batch head q_posn d_head, batch head k_posn d_head -> batch head q_posn k_posn">(q, k);
  if constexpr (Unfused)
    return dimsum::eval(std::move(s));
  else
    return s;
}

/// Runs chain(unfused, vars...) of the inputs x on two tapes, fused
/// (std::false_type) and with the scores evaluated first (std::true_type),
/// and checks that the values and the gradients of every input agree
/// within tol (1 + |unfused|); r weighs the output in the loss.
template <class R, class Chain, class... X>
void check_fused_equals_unfused(Chain chain, const R& r, double tol, const X&... x) {
  grad::tape t, u;
  auto fused = std::make_tuple(t.watch(x)...);
  auto unfused = std::make_tuple(u.watch(x)...);
  auto z = std::apply([&](const auto&... v) { return chain(std::false_type{}, v...); }, fused);
  auto uz = std::apply([&](const auto&... v) { return chain(std::true_type{}, v...); }, unfused);
  static_assert(uses_fused_attention_v<decltype(z)>);
  static_assert(!uses_fused_attention_v<decltype(uz)>);
  t.backward(sum<batch, head, q_posn, d_value>(z * r));
  u.backward(sum<batch, head, q_posn, d_value>(uz * r));
  CHECK(differ(z.value(), uz.value(), tol) == 0);
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (
        [&] {
          INFO("input " << I);
          CHECK(differ(gradient(std::get<I>(fused)), gradient(std::get<I>(unfused)), tol) == 0);
        }(),
        ...);
  }(std::index_sequence_for<X...>{});
}

/// s + 0.1 s^3 with its derivative, the user's function of the map case.
inline auto cubic() {
  return with_derivative([](double s) { return s + 0.1 * s * s * s; }, [](double s) { return 1 + 0.3 * s * s; });
}

/// Causal attention over heads with one score modification, on tensors or
/// vars, in one expression; `Unfused` evaluates the scores first (the
/// unfused chain). `learned` is the temperature, the ALiBi slopes or the
/// sink logits (read by name over `head`), unused by soft-capping.
template <score_mod M, bool Unfused = false, class Q, class K, class V, class L>
auto modded(const Q& q, const K& k, const V& v, const L& learned) {
  auto mod = [&](auto&& s) {
    using S = decltype(s);
    if constexpr (M == score_mod::softcap)  // Gemma 2: c * tanh(s / c), c = 2, after the 1/2 scale
      return 2.0 * tanh(std::forward<S>(s) * 0.5 / 2.0);
    else if constexpr (M == score_mod::temperature)
      return std::forward<S>(s) * learned;
    else if constexpr (M == score_mod::alibi)  // learned ALiBi slopes
      return std::forward<S>(s) / 2.0 + outer(learned, relative_positions<double>(q_posn{5}, k_posn{6}));
    else if constexpr (M == score_mod::map)  // a user's function with its derivative
      return map(cubic(), std::forward<S>(s) * 0.5);
    else
      return std::forward<S>(s) * 0.5;
  };
  auto pattern = [&](auto&& masked) {
    using X = decltype(masked);
    if constexpr (M == score_mod::sink)  // gpt-oss: a logit per head in the denominator
      return softmax<k_posn>(std::forward<X>(masked), learned);
    else
      return softmax<k_posn>(std::forward<X>(masked));
  };
  return einsum<"batch head q_posn k_posn, batch head k_posn d_value -> batch head q_posn d_value">(
      pattern(causal_mask<q_posn, k_posn>(mod(head_scores<Unfused>(q, k)), ninf)), v);
}

template <score_mod M>
void check_score_mod(const std::string& name) {
  INFO(name);
  const std::string f = "score_mod/" + name + "_";
  const HQ q0 = golden::load<HQ>(f + "q.npy");
  const HK k0 = golden::load<HK>(f + "k.npy");
  const HV v0 = golden::load<HV>(f + "v.npy");
  const HO r = golden::load<HO>(f + "r.npy");
  const bool learns = M != score_mod::softcap && M != score_mod::map;
  const HT l0 = learns ? golden::load<HT>(f + "learned.npy") : HT(head{2});

  // On tensors (inference): fused, equal to PyTorch and to the unfused chain.
  static_assert(uses_fused_attention_v<decltype(modded<M>(q0, k0, v0, l0))>);
  static_assert(!uses_fused_attention_v<decltype(modded<M, true>(q0, k0, v0, l0))>);
  const HO on_tensors = modded<M>(q0, k0, v0, l0);
  golden::check(on_tensors, f + "out.npy", 1e-12, 1e-12);
  CHECK(differ(on_tensors, HO(modded<M, true>(q0, k0, v0, l0)), 1e-12) == 0);

  // On vars (training): one fused node, gradients of q, k, v and the learned tensor.
  grad::tape t;
  auto q = t.watch(q0);
  auto k = t.watch(k0);
  auto v = t.watch(v0);
  auto l = t.watch(l0);
  const std::size_t leaves = t.size();
  auto z = modded<M>(q, k, v, l);
  static_assert(uses_fused_attention_v<decltype(z)>);
  CHECK(t.size() == leaves + 1);
  CHECK(differ(z.value(), on_tensors, 0.0) == 0);
  t.backward(sum<batch, head, q_posn, d_value>(z * r));
  golden::check(gradient(q), f + "grad_q.npy", 1e-12, 1e-12);
  golden::check(gradient(k), f + "grad_k.npy", 1e-12, 1e-12);
  golden::check(gradient(v), f + "grad_v.npy", 1e-12, 1e-12);
  if (learns) golden::check(gradient(l), f + "grad_learned.npy", 1e-12, 1e-12);

  // The unfused chain on vars: the same gradients.
  grad::tape u;
  auto uq = u.watch(q0);
  auto uk = u.watch(k0);
  auto uv = u.watch(v0);
  auto ul = u.watch(l0);
  auto uz = modded<M, true>(uq, uk, uv, ul);
  static_assert(!uses_fused_attention_v<decltype(uz)>);
  u.backward(sum<batch, head, q_posn, d_value>(uz * r));
  CHECK(differ(z.value(), uz.value(), 1e-12) == 0);
  CHECK(differ(gradient(q), gradient(uq), 1e-12) == 0);
  CHECK(differ(gradient(k), gradient(uk), 1e-12) == 0);
  CHECK(differ(gradient(v), gradient(uv), 1e-12) == 0);
  if (learns) CHECK(differ(gradient(l), gradient(ul), 1e-12) == 0);

  // Central finite differences of the tensor forward.
  auto fd = [&](const auto& x, auto f) { return finite_difference(x, [&](const auto& y) { return HO(f(y)); }, r); };
  CHECK(differ(gradient(q), fd(q0, [&](const HQ& x) { return modded<M>(x, k0, v0, l0); }), 1e-7) == 0);
  CHECK(differ(gradient(k), fd(k0, [&](const HK& x) { return modded<M>(q0, x, v0, l0); }), 1e-7) == 0);
  if (learns) CHECK(differ(gradient(l), fd(l0, [&](const HT& x) { return modded<M>(q0, k0, v0, x); }), 1e-7) == 0);
}

}  // namespace

TEST_CASE("score modifications fuse on tensors and vars: soft-capping; PyTorch, unfused chain, finite differences") {
  check_score_mod<score_mod::softcap>("softcap");
}

TEST_CASE("score modifications fuse on tensors and vars: a learned per-head temperature and its gradient") {
  check_score_mod<score_mod::temperature>("temperature");
}

TEST_CASE("score modifications fuse on tensors and vars: learned ALiBi slopes and their gradient") {
  check_score_mod<score_mod::alibi>("alibi");
}

TEST_CASE("score modifications fuse on tensors and vars: attention sinks (a learned logit per head) and their gradient") {
  check_score_mod<score_mod::sink>("sink");
}

TEST_CASE("score modifications fuse on tensors and vars: a user's map with its derivative") {
  check_score_mod<score_mod::map>("map");
}

TEST_CASE("a learned temperature after a padding mask with a finite fill: fused gradients equal the unfused chain's") {
  // the temperature multiplies the fill (-3, whose weight is not 0) where the mask hid a key
  const HQ q0 = random_tensor(HQ(batch{2}, head{2}, q_posn{5}, d_head{4}), 21);
  const HK k0 = random_tensor(HK(batch{2}, head{2}, k_posn{6}, d_head{4}), 22);
  const HV v0 = random_tensor(HV(batch{2}, head{2}, k_posn{6}, d_value{3}), 23);
  const HO r = random_tensor(HO(batch{2}, head{2}, q_posn{5}, d_value{3}), 24);
  HT temp0(head{2});
  temp0(head{0}) = 0.7;
  temp0(head{1}) = 1.6;
  tensor<bool, batch, k_posn> keep(batch{2}, k_posn{6});
  for (std::size_t j = 0; j < 6; ++j) {
    keep(batch{0}, k_posn{j}) = j < 4;
    keep(batch{1}, k_posn{j}) = j > 0;
  }
  auto chain = [&](auto unfused, const auto& q, const auto& k, const auto& v, const auto& t) {
    return einsum<"batch head q_posn k_posn, batch head k_posn d_value -> batch head q_posn d_value">(
        softmax<k_posn>(masked_fill(head_scores<decltype(unfused)::value>(q, k), !keep, -3.0) * t), v);
  };
  check_fused_equals_unfused(chain, r, 1e-12, q0, k0, v0, temp0);
}

TEST_CASE("softmax with sinks: a finite sink takes a row whose keys are all masked (zeros); -inf sinks are softmax") {
  using ST = tensor<double, batch, q_posn, k_posn>;
  ST x(batch{1}, q_posn{2}, k_posn{3});
  const double row0[3] = {0.5, -1.0, 2.0};
  for (std::size_t j = 0; j < 3; ++j) {
    x(batch{0}, q_posn{0}, k_posn{j}) = row0[j];
    x(batch{0}, q_posn{1}, k_posn{j}) = ninf;
  }
  tensor<double, batch> sink(batch{1});
  sink(batch{0}) = 1.0;
  const ST y = softmax<k_posn>(x, sink);
  const double denominator = std::exp(1.0) + std::exp(0.5) + std::exp(-1.0) + std::exp(2.0);  // by hand
  for (std::size_t j = 0; j < 3; ++j) {
    CHECK(y(batch{0}, q_posn{0}, k_posn{j}) == Approx(std::exp(row0[j]) / denominator).epsilon(1e-14));
    CHECK(y(batch{0}, q_posn{1}, k_posn{j}) == 0.0);
  }
  sink(batch{0}) = ninf;
  const ST plain = softmax<k_posn>(x, sink);
  const ST want = softmax<k_posn>(x);
  CHECK(differ(plain, want, 1e-15) == 0);  // NaN in the row of only -inf, as softmax
}

TEST_CASE("score modifications fuse together: soft-capping of tempered scores, learned ALiBi slopes, sinks") {
  // f32, more rows than one query tile and few-row decoding: the kernels' vector paths
  using FQ4 = tensor<float, batch, head, q_posn, d_head>;
  using FK4 = tensor<float, batch, head, k_posn, d_head>;
  using FV4 = tensor<float, batch, head, k_posn, d_value>;
  using FT = tensor<float, head>;
  for (std::size_t nq : {std::size_t(3), std::size_t(70)}) {
    INFO("queries " << nq);
    const std::size_t nk = nq + 5;
    const FQ4 q0 = random_tensor(FQ4(batch{2}, head{3}, q_posn{nq}, d_head{8}), 11);
    const FK4 k0 = random_tensor(FK4(batch{2}, head{3}, k_posn{nk}, d_head{8}), 12);
    const FV4 v0 = random_tensor(FV4(batch{2}, head{3}, k_posn{nk}, d_value{4}), 13);
    FT temp(head{3}), slope(head{3}), sink(head{3});
    for (std::size_t h = 0; h < 3; ++h) {
      temp(head{h}) = 0.8f + 0.3f * float(h);
      slope(head{h}) = 0.5f / float(h + 1);
      sink(head{h}) = 0.5f * float(h) - 0.4f;
    }
    auto all = [&](auto unfused, const auto& q, const auto& k, const auto& v, const auto& t, const auto& m,
                   const auto& sk) {
      auto capped = 3.0f * tanh(head_scores<decltype(unfused)::value>(q, k) * t / 3.0f);
      auto biased = capped + outer(m, relative_positions<float>(q_posn{nq}, k_posn{nk}, 5));
      return einsum<"batch head q_posn k_posn, batch head k_posn d_value -> batch head q_posn d_value">(
          softmax<k_posn>(causal_mask<q_posn, k_posn>(biased, -std::numeric_limits<float>::infinity()), sk), v);
    };
    const auto rr = random_tensor(tensor<float, batch, head, q_posn, d_value>(batch{2}, head{3}, q_posn{nq}, d_value{4}), 14);
    check_fused_equals_unfused(all, rr, 2e-4, q0, k0, v0, temp, slope, sink);
  }
}

TEST_CASE("score modifications replayed over rows: masks around tanh, a map, a learned temperature and ALiBi slopes") {
  // f32 over several query and key tiles: the backward replays the stages a
  // row at a time. A mask with a finite fill before the learned and
  // nonlinear stages hides keys whose scores are not finite (inf and NaN in
  // K): their gradients stop there, and the learned gradients stay finite;
  // a mask with -inf after them hides whole query rows (NaN rows).
  using FQ4 = tensor<float, batch, head, q_posn, d_head>;
  using FK4 = tensor<float, batch, head, k_posn, d_head>;
  using FV4 = tensor<float, batch, head, k_posn, d_value>;
  using FT = tensor<float, head>;
  constexpr std::size_t nq = 70, nk = 150;
  const FQ4 q0 = random_tensor(FQ4(batch{2}, head{2}, q_posn{nq}, d_head{8}), 31);
  FK4 k0 = random_tensor(FK4(batch{2}, head{2}, k_posn{nk}, d_head{8}), 32);
  const FV4 v0 = random_tensor(FV4(batch{2}, head{2}, k_posn{nk}, d_value{4}), 33);
  FT temp(head{2}), slope(head{2});
  temp(head{0}) = 0.9f;
  temp(head{1}) = 1.7f;
  slope(head{0}) = 0.25f;
  slope(head{1}) = 0.0625f;
  tensor<bool, batch, q_posn, k_posn> hidden(batch{2}, q_posn{nq}, k_posn{nk});
  tensor<bool, batch, q_posn> gone(batch{2}, q_posn{nq});
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t i = 0; i < nq; ++i) {
      gone(batch{b}, q_posn{i}) = b == 1 && i % 11 == 3;
      for (std::size_t j = 0; j < nk; ++j)
        hidden(batch{b}, q_posn{i}, k_posn{j}) = j >= 120 + 10 * b || (i + j) % 7 == 0;
    }
  k0(batch{0}, head{1}, k_posn{125}, d_head{3}) = std::numeric_limits<float>::infinity();
  k0(batch{1}, head{0}, k_posn{140}, d_head{0}) = std::numeric_limits<float>::quiet_NaN();
  const auto cube = with_derivative([](float s) { return s + 0.05f * s * s * s; },
                                    [](float s) { return 1.0f + 0.15f * s * s; });
  auto chain = [&](auto unfused, const auto& q, const auto& k, const auto& v, const auto& t, const auto& m) {
    auto s = masked_fill(head_scores<decltype(unfused)::value>(q, k), hidden, -30.0f);
    auto capped = 4.0f * tanh(s * t / 4.0f);
    auto biased = map(cube, capped) + outer(m, relative_positions<float>(q_posn{nq}, k_posn{nk}));
    return einsum<"batch head q_posn k_posn, batch head k_posn d_value -> batch head q_posn d_value">(
        softmax<k_posn>(masked_fill(biased, gone, -std::numeric_limits<float>::infinity())), v);
  };
  const auto rr = random_tensor(tensor<float, batch, head, q_posn, d_value>(batch{2}, head{2}, q_posn{nq}, d_value{4}), 34);
  check_fused_equals_unfused(chain, rr, 2e-4, q0, k0, v0, temp, slope);
  // the learned gradients are finite: the masked scores' gradients are exactly 0
  grad::tape t;
  auto q = t.watch(q0);
  auto k = t.watch(k0);
  auto v = t.watch(v0);
  auto tv = t.watch(temp);
  auto mv = t.watch(slope);
  t.backward(sum<batch, head, q_posn, d_value>(chain(std::false_type{}, q, k, v, tv, mv) * rr));
  for (std::size_t h = 0; h < 2; ++h) {
    CHECK(std::isfinite(gradient(tv)(head{h})));
    CHECK(std::isfinite(gradient(mv)(head{h})));
  }
}

namespace {

/// A user's map the compiler cannot turn into vector arithmetic (a branch,
/// libm's sin and cos, a captured gain), in T, through the fused kernel's
/// row form of the map (`score_stage::fn_row`: the whole row in one call)
/// on `threads` threads: nk keys leave a tail of a 16-value block, a causal
/// mask and masked query rows (-inf: NaN rows) around it. Fused against the
/// unfused chain, whose map calls the function one element at a time.
template <class T>
void check_branchy_map(std::size_t nq, std::size_t nk, int threads, double tol) {
  INFO("nq " << nq << " nk " << nk << " threads " << threads);
  using Q4 = tensor<T, batch, head, q_posn, d_head>;
  using K4 = tensor<T, batch, head, k_posn, d_head>;
  using V4 = tensor<T, batch, head, k_posn, d_value>;
  const Q4 q0 = random_tensor(Q4(batch{2}, head{3}, q_posn{nq}, d_head{6}), 41);
  const K4 k0 = random_tensor(K4(batch{2}, head{3}, k_posn{nk}, d_head{6}), 42);
  const V4 v0 = random_tensor(V4(batch{2}, head{3}, k_posn{nk}, d_value{5}), 43);
  tensor<bool, batch, q_posn> gone(batch{2}, q_posn{nq});
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t i = 0; i < nq; ++i) gone(batch{b}, q_posn{i}) = b == 0 && i % 9 == 4;
  const T gain = T(0.3);
  const auto wavy = with_derivative([gain](T s) { return s > T(0) ? s + gain * std::sin(3 * s) : s / 2; },
                                    [gain](T s) { return s > T(0) ? 1 + 3 * gain * std::cos(3 * s) : T(0.5); });
  constexpr T minus_inf = -std::numeric_limits<T>::infinity();
  auto chain = [&](auto unfused, const auto& q, const auto& k, const auto& v) {
    auto s = map(wavy, head_scores<decltype(unfused)::value>(q, k) * T(0.4));
    return einsum<"batch head q_posn k_posn, batch head k_posn d_value -> batch head q_posn d_value">(
        softmax<k_posn>(masked_fill(causal_mask<q_posn, k_posn>(s, minus_inf), gone, minus_inf)), v);
  };
  const auto rr = random_tensor(tensor<T, batch, head, q_posn, d_value>(batch{2}, head{3}, q_posn{nq}, d_value{5}), 44);
  set_num_threads(threads);
  check_fused_equals_unfused(chain, rr, tol, q0, k0, v0);
  set_num_threads(0);
}

}  // namespace

TEST_CASE("a map the compiler cannot vectorise, a row at a time: row tails, masked rows, one and two threads") {
  check_branchy_map<double>(37, 37, 1, 1e-12);
  check_branchy_map<double>(45, 53, 2, 1e-12);
  check_branchy_map<float>(150, 203, 2, 2e-4);  // several query and key tiles
}

TEST_CASE("a map stage without its row functions (score_stage::fn and dfn only) runs score by score, same results") {
  // The kernels keep the per-score form for callers that fill a map stage
  // by hand: the planner's arguments with fn_row and dfn_row cleared, run
  // forward and backward through the kernel API, against the unfused chain
  // on vars (dO = r, the loss sum(z * r)).
  constexpr std::size_t nq = 21, nk = 37;
  const HQ q0 = random_tensor(HQ(batch{2}, head{2}, q_posn{nq}, d_head{5}), 51);
  const HK k0 = random_tensor(HK(batch{2}, head{2}, k_posn{nk}, d_head{5}), 52);
  const HV v0 = random_tensor(HV(batch{2}, head{2}, k_posn{nk}, d_value{3}), 53);
  const HO r = random_tensor(HO(batch{2}, head{2}, q_posn{nq}, d_value{3}), 54);
  const auto wavy = with_derivative([](double s) { return s > 0 ? s + 0.3 * std::sin(3 * s) : s / 2; },
                                    [](double s) { return s > 0 ? 1 + 0.9 * std::cos(3 * s) : 0.5; });
  // one expression: the lazy result owns its temporaries (a named local
  // scores expression would be referenced after the lambda returns)
  auto chain = [&](auto unfused, const auto& q, const auto& k, const auto& v) {
    return einsum<"batch head q_posn k_posn, batch head k_posn d_value -> batch head q_posn d_value">(
        softmax<k_posn>(causal_mask<q_posn, k_posn>(map(wavy, head_scores<decltype(unfused)::value>(q, k) * 0.4), ninf)),
        v);
  };
  HO out(batch{2}, head{2}, q_posn{nq}, d_value{3});
  HQ dq = HQ::from_extents(q0.extents());
  HK dk = HK::from_extents(k0.extents());
  HV dv = HV::from_extents(v0.extents());
  std::vector<double> lse(2 * 2 * 2 * nq);
  std::size_t maps = 0;
  const auto e = chain(std::false_type{}, q0, k0, v0);
  dimsum::detail::fused::with_args(e, strided<double, 4>{out.data(), out.extents(), out.strides()}, [&](const auto& a) {
    auto b = a;
    for (std::size_t s = 0; s < b.n_stages; ++s)
      if (b.stages[s].op == kernels::score_op::map) {
        ++maps;
        b.stages[s].fn_row = nullptr;
        b.stages[s].dfn_row = nullptr;
      }
    const std::size_t rows = b.batch_size() * b.nq;
    b.lse = lse.data();
    b.lse_low = lse.data() + rows;
    kernels::attention(b);
    kernels::attention_backward(
        kernels::attention_grad_args<double>{&b, lse.data(), r.data(), dq.data(), dk.data(), dv.data(), lse.data() + rows});
  });
  CHECK(maps == 1);
  grad::tape u;
  auto uq = u.watch(q0);
  auto uk = u.watch(k0);
  auto uv = u.watch(v0);
  auto uz = chain(std::true_type{}, uq, uk, uv);
  static_assert(!uses_fused_attention_v<decltype(uz)>);
  u.backward(sum<batch, head, q_posn, d_value>(uz * r));
  CHECK(differ(out, uz.value(), 1e-12) == 0);
  CHECK(differ(dq, gradient(uq), 1e-12) == 0);
  CHECK(differ(dk, gradient(uk), 1e-12) == 0);
  CHECK(differ(dv, gradient(uv), 1e-12) == 0);
}
