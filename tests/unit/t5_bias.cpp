// T5's learned relative-position bias (ops/lookup.hpp, ops/relative_bucket.hpp):
// bucketed key-minus-query distances gathered from a learned table
// (bucket, head), added to the scores. Checked against PyTorch float64 of
// HF transformers' T5 code (fixtures of
// tests/reference/make_t5_bias_fixtures.py): the bucket function over
// distances -300..300 for several configurations, the attention output
// bidirectional (encoder) and causal (decoder) on the fused kernel, and
// the gradients of q, k, v and the table on vars (one fused node); the
// same chain with the bias evaluated into a tensor first (unfused), and
// central finite differences of the table's gradient. Ids out of range
// throw shape_error, eagerly for a tensor of ids and when read for a lazy
// expression, in the fused kernel too. A lazy lookup of a var used
// outside attention is recorded as the eager lookup (gradient: bucket counts).
// In float with threads at p = 1024 the fused path allocates nothing of
// O(p^2) (operator new watched) and agrees with the unfused chain.

#include <dimsum/dimsum.hpp>
#include <dimsum/grad/grad.hpp>
#include <dimsum/ops/lookup.hpp>
#include <dimsum/ops/relative_bucket.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <new>
#include <string>

#include <catch2/catch.hpp>

#include "golden.hpp"
#include "support.hpp"

// The largest single heap allocation while heap_watch::watching is set shows that the
// fused path allocates nothing of O(p^2) (not under sanitizers: heap_watch.hpp).
#include "heap_watch.hpp"

namespace {

using namespace dimsum;

DIMSUM_DIM(batch);
DIMSUM_DIM(head);
DIMSUM_DIM(q_posn);
DIMSUM_DIM(k_posn);
DIMSUM_DIM(d_head);
DIMSUM_DIM(d_value);
DIMSUM_DIM(bucket);
DIMSUM_DIM(distance);

using test::differ;

using Q = tensor<double, batch, head, q_posn, d_head>;
using K = tensor<double, batch, head, k_posn, d_head>;
using V = tensor<double, batch, head, k_posn, d_value>;
using O = tensor<double, batch, head, q_posn, d_value>;
using Table = tensor<double, bucket, head>;
using Ids = tensor<std::int64_t, q_posn, k_posn>;

constexpr double ninf = -std::numeric_limits<double>::infinity();

/// A T5 case of the fixtures.
struct t5_case {
  std::string name;
  bool bidirectional;
  std::int64_t num_buckets, max_distance;
  std::size_t p;
};
const t5_case bidirectional_case{"bidirectional", true, 16, 20, 48};
const t5_case causal_case{"causal", false, 12, 24, 64};

/// The buckets of the case, lazily (no p x p tensor).
auto buckets(const t5_case& c) {
  return t5_relative_bucket(relative_positions<int>(q_posn{c.p}, k_posn{c.p}), c.bidirectional, c.num_buckets,
                            c.max_distance);
}

template <class Q0, class K0>
auto t5_scores(const Q0& q, const K0& k) {
  return einsum<"batch head q_posn d_head, batch head k_posn d_head -> batch head q_posn k_posn">(q, k);
}

/// T5 encoder attention: scores plus the gathered bias (lazy or
/// evaluated), no scale; on tensors or vars.
template <class Q0, class K0, class V0, class B>
auto t5_attention(const Q0& q, const K0& k, const V0& v, B&& bias) {
  return einsum<"batch head q_posn k_posn, batch head k_posn d_value -> batch head q_posn d_value">(
      softmax<k_posn>(t5_scores(q, k) + std::forward<B>(bias)), v);
}
/// T5 decoder self-attention: the same, causal.
template <class Q0, class K0, class V0, class B>
auto t5_causal_attention(const Q0& q, const K0& k, const V0& v, B&& bias) {
  return einsum<"batch head q_posn k_posn, batch head k_posn d_value -> batch head q_posn d_value">(
      softmax<k_posn>(causal_mask<q_posn, k_posn>(t5_scores(q, k) + std::forward<B>(bias), ninf)), v);
}

}  // namespace

TEST_CASE("t5_bias: t5_relative_bucket matches HF's _relative_position_bucket on -300..300") {
  const auto rel64 = golden::load<tensor<std::int64_t, distance>>("t5_bias/distances.npy");
  tensor<int, distance> rel(distance{rel64.size()});
  for (std::size_t n = 0; n < rel.size(); ++n) rel.data()[n] = static_cast<int>(rel64.data()[n]);
  struct config {
    bool bidirectional;
    std::int64_t num_buckets, max_distance;
    const char* file;
  };
  for (const config c : {config{true, 32, 128, "bi_32_128"}, config{false, 32, 128, "causal_32_128"},
                         config{true, 16, 20, "bi_16_20"}, config{false, 12, 24, "causal_12_24"},
                         config{true, 8, 6, "bi_8_6"}}) {
    INFO(c.file);
    const tensor<std::int64_t, distance> got = t5_relative_bucket(rel, c.bidirectional, c.num_buckets, c.max_distance);
    const auto want = golden::load<tensor<std::int64_t, distance>>(std::string("t5_bias/buckets_") + c.file + ".npy");
    CHECK(differ(got, want, 0.0) == 0);
  }
  CHECK(t5_bucket{true, 32, 128}(-3) == 3);
  CHECK(t5_bucket{true, 32, 128}(3) == 19);
  CHECK(t5_bucket{false, 32, 128}(3) == 0);
  CHECK_THROWS_AS(t5_relative_bucket(rel, true, 2, 128), shape_error);
}

TEST_CASE("t5_bias: buckets of relative_positions, precomputed by distance, equal the bucket function of each distance") {
  // queries after a cache (offset), more keys than queries, distances well
  // past max_distance on both sides
  for (const bool bidirectional : {true, false})
    for (const std::size_t offset : {std::size_t(0), std::size_t(50)}) {
      INFO("bidirectional " << bidirectional << ", offset " << offset);
      const auto rel = relative_positions<int>(q_posn{30}, k_posn{200}, offset);
      const tensor<std::int64_t, q_posn, k_posn> got = t5_relative_bucket(rel, bidirectional, 16, 20);
      const tensor<std::int64_t, q_posn, k_posn> want = map(t5_bucket{bidirectional, 16, 20}, rel);
      CHECK(differ(got, want, 0.0) == 0);
      const tensor<std::int64_t, k_posn, q_posn> transposed = t5_relative_bucket(rel, bidirectional, 16, 20);  // read by name
      CHECK(transposed(k_posn{3}, q_posn{29}) == want(q_posn{29}, k_posn{3}));
    }
}

TEST_CASE("t5_bias: lookup on tensors gathers lazily, by name, with ids checked") {
  Table table(bucket{4}, head{2});
  for (std::size_t n = 0; n < table.size(); ++n) table.data()[n] = double(10 * (n / 2) + n % 2);  // table[b, h] = 10 b + h
  Ids ids(q_posn{2}, k_posn{3});
  const std::int64_t values[] = {0, 3, 1, 2, 2, 0};
  for (std::size_t n = 0; n < 6; ++n) ids.data()[n] = values[n];
  const tensor<double, head, q_posn, k_posn> b = lookup<bucket>(table, ids);  // placed by name
  for (std::size_t h = 0; h < 2; ++h)
    for (std::size_t i = 0; i < 2; ++i)
      for (std::size_t j = 0; j < 3; ++j) CHECK(b(head{h}, q_posn{i}, k_posn{j}) == double(10 * values[i * 3 + j] + h));
  static_assert(std::is_same_v<dims_of_t<decltype(lookup<bucket>(table, ids))>, dim_list<q_posn, k_posn, head>>);

  // out of range: a tensor of ids when the gather is built, a lazy one when read
  ids.data()[4] = 4;
  CHECK_THROWS_AS(lookup<bucket>(table, ids), shape_error);
  ids.data()[4] = -1;
  CHECK_THROWS_AS(lookup<bucket>(table, ids), shape_error);
  auto lazy = lookup<bucket>(table, t5_relative_bucket(relative_positions<int>(q_posn{3}, k_posn{3}), true, 32, 128));
  CHECK_THROWS_AS((tensor<double, q_posn, k_posn, head>(lazy)), shape_error);  // buckets up to 31, table has 4
}

TEST_CASE("t5_bias: the T5 bias fuses into attention on tensors and matches PyTorch") {
  for (const t5_case& c : {bidirectional_case, causal_case}) {
    INFO(c.name);
    const std::string f = "t5_bias/" + c.name + "_";
    const Q q = golden::load<Q>(f + "q.npy");
    const K k = golden::load<K>(f + "k.npy");
    const V v = golden::load<V>(f + "v.npy");
    const Table table = golden::load<Table>(f + "table.npy");
    // the bucket function over the case's positions equals PyTorch's
    golden::check(tensor<std::int64_t, q_posn, k_posn>(buckets(c)), f + "buckets.npy", 0, 0);

    const auto gathered = lookup<bucket>(table, buckets(c));
    const tensor<double, q_posn, k_posn, head> bias = gathered;  // evaluated: the unfused chain
    if (c.bidirectional) {
      using E = decltype(t5_attention(q, k, v, gathered));
      static_assert(uses_fused_attention_v<E>);
      static_assert(!uses_fused_attention_v<decltype(einsum<"batch head q_posn k_posn, batch head k_posn d_value -> batch head q_posn d_value">(
                        softmax<k_posn>(eval(t5_scores(q, k) + gathered)), v))>);
      const O fused = t5_attention(q, k, v, gathered);
      golden::check(fused, f + "out.npy", 1e-12, 1e-12);
      const O unfused = einsum<"batch head q_posn k_posn, batch head k_posn d_value -> batch head q_posn d_value">(
          softmax<k_posn>(eval(t5_scores(q, k) + bias)), v);
      CHECK(differ(fused, unfused, 1e-12) == 0);
    } else {
      static_assert(uses_fused_attention_v<decltype(t5_causal_attention(q, k, v, gathered))>);
      const O fused = t5_causal_attention(q, k, v, gathered);
      golden::check(fused, f + "out.npy", 1e-12, 1e-12);
      const O unfused = einsum<"batch head q_posn k_posn, batch head k_posn d_value -> batch head q_posn d_value">(
          softmax<k_posn>(eval(causal_mask<q_posn, k_posn>(t5_scores(q, k) + bias, ninf))), v);
      CHECK(differ(fused, unfused, 1e-12) == 0);
    }
  }
}

TEST_CASE("t5_bias: an id out of range inside the fused kernel is a shape_error") {
  const Q q = golden::load<Q>("t5_bias/bidirectional_q.npy");
  const K k = golden::load<K>("t5_bias/bidirectional_k.npy");
  const V v = golden::load<V>("t5_bias/bidirectional_v.npy");
  const Table small(bucket{8}, head{3});  // the case's 16 buckets do not fit
  auto gathered = lookup<bucket>(small, buckets(bidirectional_case));
  static_assert(uses_fused_attention_v<decltype(t5_attention(q, k, v, gathered))>);
  CHECK_THROWS_AS((O(t5_attention(q, k, v, gathered))), shape_error);
}

namespace {

/// Central differences (step 1e-6) of sum(f(x) * r) along every element of
/// x, f evaluated on tensors.
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

/// T5 attention (causal: the decoder's) on tensors or vars, the bias
/// given (lazy or a recorded var) or gathered lazily from the table.
template <bool Causal, class Q0, class K0, class V0, class B>
auto t5_biased(const Q0& q, const K0& k, const V0& v, B&& bias) {
  if constexpr (Causal)
    return t5_causal_attention(q, k, v, std::forward<B>(bias));
  else
    return t5_attention(q, k, v, std::forward<B>(bias));
}
template <bool Causal, class Q0, class K0, class V0, class T0>
auto t5_case_attention(const t5_case& c, const Q0& q, const K0& k, const V0& v, const T0& table) {
  return t5_biased<Causal>(q, k, v, lookup<bucket>(table, buckets(c)));
}

/// The fused node on vars against PyTorch, the unfused chain and finite
/// differences.
template <bool Causal>
void check_on_vars(const t5_case& c) {
  INFO(c.name);
  const std::string f = "t5_bias/" + c.name + "_";
  const Q q0 = golden::load<Q>(f + "q.npy");
  const K k0 = golden::load<K>(f + "k.npy");
  const V v0 = golden::load<V>(f + "v.npy");
  const Table table0 = golden::load<Table>(f + "table.npy");
  const O r = golden::load<O>(f + "r.npy");

  grad::tape t;
  auto q = t.watch(q0);
  auto k = t.watch(k0);
  auto v = t.watch(v0);
  auto table = t.watch(table0);
  const std::size_t leaves = t.size();
  auto z = t5_case_attention<Causal>(c, q, k, v, table);
  static_assert(uses_fused_attention_v<decltype(z)>);
  CHECK(t.size() == leaves + 1);  // one fused node: the bias is never recorded
  golden::check(z.value(), f + "out.npy", 1e-12, 1e-12);
  t.backward(sum<batch, head, q_posn, d_value>(z * r));
  golden::check(gradient(q), f + "grad_q.npy", 1e-12, 1e-12);
  golden::check(gradient(k), f + "grad_k.npy", 1e-12, 1e-12);
  golden::check(gradient(v), f + "grad_v.npy", 1e-12, 1e-12);
  golden::check(gradient(table), f + "grad_table.npy", 1e-12, 1e-12);

  // The unfused chain on vars (the gathered bias recorded as a var, the
  // scores materialised): the same values and gradients.
  grad::tape u;
  auto uq = u.watch(q0);
  auto uk = u.watch(k0);
  auto uv = u.watch(v0);
  auto utable = u.watch(table0);
  const tensor<std::int64_t, q_posn, k_posn> ids = buckets(c);
  auto ubias = lookup<bucket>(utable, ids);  // eager: a recorded var (q_posn, k_posn, head)
  auto uz = t5_biased<Causal>(uq, uk, uv, ubias);
  static_assert(!uses_fused_attention_v<decltype(uz)>);
  u.backward(sum<batch, head, q_posn, d_value>(uz * r));
  CHECK(differ(z.value(), uz.value(), 1e-12) == 0);
  CHECK(differ(gradient(q), gradient(uq), 1e-12) == 0);
  CHECK(differ(gradient(k), gradient(uk), 1e-12) == 0);
  CHECK(differ(gradient(v), gradient(uv), 1e-12) == 0);
  CHECK(differ(gradient(table), gradient(utable), 1e-12) == 0);

  // Central finite differences of the fused tensor forward, table element by element.
  const Table fd = finite_difference(table0, [&](const Table& x) { return O(t5_case_attention<Causal>(c, q0, k0, v0, x)); }, r);
  CHECK(differ(gradient(table), fd, 1e-7) == 0);
}

}  // namespace

TEST_CASE("t5_bias: on vars the learned table's bias fuses and its gradient matches PyTorch (bidirectional)") {
  check_on_vars<false>(bidirectional_case);
}

TEST_CASE("t5_bias: on vars the learned table's bias fuses and its gradient matches PyTorch (causal)") {
  check_on_vars<true>(causal_case);
}

TEST_CASE("t5_bias: the fused forward and backward on vars allocate nothing of O(p^2), in float with threads") {
  // p = 1024, 4 batch indices: the scores of one batch index would be 4 MiB
  // in float; threads run the batch indices (each with its own copy of the
  // table's gradient).
  constexpr std::size_t p = 1024;
  using QF = tensor<float, batch, head, q_posn, d_head>;
  using KF = tensor<float, batch, head, k_posn, d_head>;
  using VF = tensor<float, batch, head, k_posn, d_value>;
  using OF = tensor<float, batch, head, q_posn, d_value>;
  using TF = tensor<float, bucket, head>;
  const QF q0 = test::random_tensor(QF(batch{2}, head{2}, q_posn{p}, d_head{16}), 1);
  const KF k0 = test::random_tensor(KF(batch{2}, head{2}, k_posn{p}, d_head{16}), 2);
  const VF v0 = test::random_tensor(VF(batch{2}, head{2}, k_posn{p}, d_value{8}), 3);
  const TF table0 = test::random_tensor(TF(bucket{32}, head{2}), 4);
  const OF r = test::random_tensor(OF(batch{2}, head{2}, q_posn{p}, d_value{8}), 5);
  auto ids = [] { return t5_relative_bucket(relative_positions<int>(q_posn{p}, k_posn{p}), true, 32, 128); };

  grad::tape t;
  auto q = t.watch(q0);
  auto k = t.watch(k0);
  auto v = t.watch(v0);
  auto table = t.watch(table0);
  const std::size_t quadratic = p * p * sizeof(float);
  heap_watch::largest = 0;
  heap_watch::watching = true;
  auto z = t5_attention(q, k, v, lookup<bucket>(table, ids()));
  static_assert(uses_fused_attention_v<decltype(z)>);
  t.backward(sum<batch, head, q_posn, d_value>(z * r));
  heap_watch::watching = false;
  if (DIMSUM_TEST_COUNT_ALLOCATIONS) CHECK(heap_watch::largest.load() < quadratic / 4);

  // The unfused chain: the same gradients (float), and the measure sees
  // its scores.
  grad::tape u;
  auto uq = u.watch(q0);
  auto uk = u.watch(k0);
  auto uv = u.watch(v0);
  auto utable = u.watch(table0);
  heap_watch::largest = 0;
  heap_watch::watching = true;
  const tensor<std::int64_t, q_posn, k_posn> uids = ids();
  auto uz = t5_attention(uq, uk, uv, lookup<bucket>(utable, uids));
  u.backward(sum<batch, head, q_posn, d_value>(uz * r));
  heap_watch::watching = false;
  if (DIMSUM_TEST_COUNT_ALLOCATIONS) CHECK(heap_watch::largest.load() >= quadratic);
  CHECK(differ(z.value(), uz.value(), 1e-5) == 0);
  CHECK(differ(gradient(q), gradient(uq), 1e-4) == 0);
  CHECK(differ(gradient(k), gradient(uk), 1e-4) == 0);
  CHECK(differ(gradient(v), gradient(uv), 1e-4) == 0);
  CHECK(differ(gradient(table), gradient(utable), 1e-3) == 0);
}

TEST_CASE("t5_bias: a lazy lookup of a var used outside attention is recorded as the eager lookup") {
  const Table table0 = golden::load<Table>("t5_bias/bidirectional_table.npy");
  const Ids ids = golden::load<Ids>("t5_bias/bidirectional_buckets.npy");  // PyTorch's buckets
  grad::tape t;
  auto table = t.watch(table0);
  auto bias = lookup<bucket>(table, buckets(bidirectional_case));  // lazy: nothing recorded yet
  const grad::var<double, q_posn, k_posn, head> recorded = bias;   // recorded as the eager lookup
  for (std::size_t i = 0; i < 48; i += 7)
    for (std::size_t j = 0; j < 48; j += 5)
      CHECK(recorded.value()(q_posn{i}, k_posn{j}, head{2}) ==
            table0(bucket{std::size_t(ids(q_posn{i}, k_posn{j}))}, head{2}));
  t.backward(sum<q_posn, k_posn, head>(recorded));
  // d sum / d table[b, h] is the number of (query, key) pairs in bucket b
  Table count(bucket{16}, head{3});
  count.fill(0.0);
  for (std::size_t n = 0; n < ids.size(); ++n)
    for (std::size_t h = 0; h < 3; ++h) count(bucket{std::size_t(ids.data()[n])}, head{h}) += 1.0;
  CHECK(differ(gradient(table), count, 0.0) == 0);
}

TEST_CASE("t5_bias: a run of buckets along a row holds one bucket, with either position innermost and any offset") {
  // The fused kernel gathers and scatters the bias a run at a time
  // (`run`): every index of a run must have the bucket of its first
  // index, computed here by the bucket function of each distance.
  for (const bool bidirectional : {true, false})
    for (const auto& [num_buckets, max_distance] : {std::pair<std::int64_t, std::int64_t>{16, 20}, {12, 24}, {8, 5}})
      for (const std::size_t nq : {1u, 7u, 37u})
        for (const std::size_t nk : {5u, 37u, 70u})
          for (const std::size_t offset : {0u, 3u, 50u}) {
            INFO(bidirectional << " " << num_buckets << " " << max_distance << " nq " << nq << " nk " << nk << " offset "
                               << offset);
            const t5_bucket f{bidirectional, num_buckets, max_distance};
            const auto ids = t5_relative_bucket(relative_positions<int>(q_posn{nq}, k_posn{nk}, offset), bidirectional,
                                                num_buckets, max_distance);
            auto want = [&](std::size_t i, std::size_t j) {
              return f(static_cast<std::int64_t>(j) - static_cast<std::int64_t>(i + offset));
            };
            std::size_t bad = 0;
            // keys innermost (the fused kernel's rows), then queries innermost
            auto along = [&](auto ev, std::size_t outer, std::size_t inner, bool keys_inner) {
              for (std::size_t o = 0; o < outer; ++o) {
                const std::size_t idx[2] = {o, 0};
                ev.seek(idx);
                for (std::size_t j0 = 0; j0 < inner; ++j0)
                  for (const std::size_t end : {j0 + 1, std::min(inner, j0 + 9), inner}) {
                    const std::size_t len = ev.run(j0, end);
                    if (len < 1 || len > end - j0) ++bad;
                    for (std::size_t x = j0; x < j0 + std::min(len, end - j0); ++x)
                      if (ev[x] != (keys_inner ? want(o, j0) : want(j0, o)) ||
                          ev[x] != (keys_inner ? want(o, x) : want(x, o)))
                        ++bad;
                  }
              }
            };
            along(ids.template evaluator<dim_list<q_posn, k_posn>>(), nq, nk, true);
            along(ids.template evaluator<dim_list<k_posn, q_posn>>(), nk, nq, false);
            CHECK(bad == 0);
          }
}

namespace {

/// T5 attention whose buckets come from relative_positions with an offset
/// and unequal query and key counts (a key/value cache), the positions
/// given query first (QueryFirst) or key first (the kernel's rows then run
/// against the distances), with a padding-style mask (finite fill) that
/// masks whole query rows and scattered scores: on vars, fused (gathered
/// and scattered a run at a time) against the unfused chain with the ids
/// evaluated into a tensor (read one by one), on `threads` threads.
template <class T, bool QueryFirst>
void check_runs_on_vars(std::size_t nq, std::size_t nk, std::size_t offset, int threads, double tol) {
  INFO("nq " << nq << " nk " << nk << " offset " << offset << " query first " << QueryFirst << " threads " << threads);
  using QT = tensor<T, batch, head, q_posn, d_head>;
  using KT = tensor<T, batch, head, k_posn, d_head>;
  using VT = tensor<T, batch, head, k_posn, d_value>;
  using OT = tensor<T, batch, head, q_posn, d_value>;
  using TT = tensor<T, bucket, head>;
  const QT q0 = test::random_tensor(QT(batch{2}, head{3}, q_posn{nq}, d_head{5}), 11);
  const KT k0 = test::random_tensor(KT(batch{2}, head{3}, k_posn{nk}, d_head{5}), 12);
  const VT v0 = test::random_tensor(VT(batch{2}, head{3}, k_posn{nk}, d_value{3}), 13);
  const TT table0 = test::random_tensor(TT(bucket{16}, head{3}), 14);
  const OT r = test::random_tensor(OT(batch{2}, head{3}, q_posn{nq}, d_value{3}), 15);
  tensor<bool, q_posn, k_posn> masked(q_posn{nq}, k_posn{nk});
  for (std::size_t i = 0; i < nq; ++i)
    for (std::size_t j = 0; j < nk; ++j) masked(q_posn{i}, k_posn{j}) = i % 5 == 3 || (i * 7 + j * 3) % 11 == 0;
  auto ids = [&] {
    if constexpr (QueryFirst)
      return t5_relative_bucket(relative_positions<int>(q_posn{nq}, k_posn{nk}, offset), true, 16, 20);
    else
      return t5_relative_bucket(relative_positions<int>(k_posn{nk}, q_posn{nq}, offset), true, 16, 20);
  };
  auto attention = [&](const auto& q, const auto& k, const auto& v, auto&& bias) {
    return einsum<"batch head q_posn k_posn, batch head k_posn d_value -> batch head q_posn d_value">(
        softmax<k_posn>(masked_fill(t5_scores(q, k) + std::forward<decltype(bias)>(bias), masked, T(-1e9))), v);
  };
  set_num_threads(threads);
  grad::tape t;
  auto q = t.watch(q0);
  auto k = t.watch(k0);
  auto v = t.watch(v0);
  auto table = t.watch(table0);
  auto z = attention(q, k, v, lookup<bucket>(table, ids()));
  static_assert(uses_fused_attention_v<decltype(z)>);
  t.backward(sum<batch, head, q_posn, d_value>(z * r));

  grad::tape u;
  auto uq = u.watch(q0);
  auto uk = u.watch(k0);
  auto uv = u.watch(v0);
  auto utable = u.watch(table0);
  const tensor<std::int64_t, q_posn, k_posn> uids = ids();  // read one by one
  auto uz = attention(uq, uk, uv, lookup<bucket>(utable, uids));
  static_assert(!uses_fused_attention_v<decltype(uz)>);
  u.backward(sum<batch, head, q_posn, d_value>(uz * r));
  set_num_threads(0);
  CHECK(differ(z.value(), uz.value(), tol) == 0);
  CHECK(differ(gradient(q), gradient(uq), tol) == 0);
  CHECK(differ(gradient(k), gradient(uk), tol) == 0);
  CHECK(differ(gradient(v), gradient(uv), tol) == 0);
  CHECK(differ(gradient(table), gradient(utable), tol) == 0);
  if constexpr (std::is_same_v<T, double>) {  // and central finite differences of the fused tensor forward
    const TT fd = finite_difference(table0, [&](const TT& x) { return OT(attention(q0, k0, v0, lookup<bucket>(x, ids()))); }, r);
    CHECK(differ(gradient(table), fd, 1e-7) == 0);
  }
}

}  // namespace

TEST_CASE("t5_bias: buckets gathered and scattered a run at a time: cache offsets, either position first, masks, threads") {
  check_runs_on_vars<double, true>(37, 70, 5, 1, 1e-12);
  check_runs_on_vars<double, false>(37, 70, 5, 1, 1e-12);
  check_runs_on_vars<double, true>(70, 45, 0, 2, 1e-12);
  check_runs_on_vars<double, false>(70, 45, 0, 2, 1e-12);
  // float, several key tiles, on two threads (one batch index each)
  check_runs_on_vars<float, true>(150, 203, 30, 2, 1e-4);
  check_runs_on_vars<float, false>(150, 203, 30, 2, 1e-4);
}
