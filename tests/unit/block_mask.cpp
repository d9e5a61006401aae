// Document masks of packed sequences through the fused attention's block
// mask (kernels/attention.hpp `block_mask`): the mask is a boolean
// expression of per-position document ids broadcast by name
// (`masked_fill(scores, doc_q != doc_k, -inf)`), fused on tensors and on vars;
// prefix-LM and chunked local attention masks written the same way over
// position ids.
// Checked against PyTorch float64 autograd of the unfused chain (fixtures of
// tests/reference/make_block_mask_fixtures.py), the same chain with the
// scores materialised, and the kernel's block counts: blocks a document
// boundary empties are skipped in the forward and the backward (counted
// against a plain loop over the blocks), blocks inside one document do not
// read the mask. A query row whose keys are all masked keeps its meaning
// (NaN with -inf, the fill's uniform weights with -1e9), and a NaN in V
// under a skipped block still reaches the output (0 * NaN).
// A mask expression is evaluated a tile at a time (a mask source): at
// p = 8192 no allocation comes near the p x p bytes a materialised mask
// would take (a replaced operator new watches them), in the einsum's
// forward and in the kernels' forward and backward; a source gives the
// results of the same mask in memory bit for bit. The backward skips empty
// blocks at both ends of a key tile, decoding rows (at most four queries)
// skip empty key blocks, and a block that two masks empty only together is
// skipped: block counts against plain loops, outputs and dV against plain
// loops and the unfused chain.
// On vars the fused node keeps the mask as an expression over copies of
// the tensors it reads: a document-masked training step at p = 8192
// allocates nothing of the scores' size and gives outputs and gradients
// equal to plain loops, and masks (document, prefix-LM, chunked; masked_fill,
// both forms of where, grad::fused_attention) built from locals that are
// gone before backward give PyTorch's gradients (AddressSanitizer watches
// the reads in the asan stage).

#include <dimsum/grad/grad.hpp>
#include <dimsum/kernels/attention_backward.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <functional>
#include <limits>
#include <new>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "golden.hpp"
#include "support.hpp"

// The largest heap allocation of a pass, so a test can show that a mask
// costs no buffer of the scores' size.
#include "heap_watch.hpp"

// The sequence length of the allocation tests: under a sanitizer (no
// allocation hook, unoptimised builds) only their results are checked, at
// a quarter of the length.
constexpr std::size_t watched_length = DIMSUM_TEST_COUNT_ALLOCATIONS ? 8192 : 2048;

namespace {

using namespace dimsum;

DIMSUM_DIM(batch);
DIMSUM_DIM(head);
DIMSUM_DIM(posn);
DIMSUM_DIM(q_posn);
DIMSUM_DIM(k_posn);
DIMSUM_DIM(d_head);
DIMSUM_DIM(d_value);

constexpr double ninf = -std::numeric_limits<double>::infinity();

template <class Q, class K>
auto scores(const Q& q, const K& k) {
  return einsum<"batch head q_posn d_head, batch head k_posn d_head -> batch head q_posn k_posn">(q, k);
}
template <class P, class V>
auto attend(P&& p, const V& v) {
  return einsum<"batch head q_posn k_posn, batch head k_posn d_value -> batch head q_posn d_value">(
      softmax<k_posn>(std::forward<P>(p)), v);
}

/// Document ids per position: the documents of `lengths[b]` packed in order.
tensor<int, batch, posn> document_ids(const std::vector<std::vector<std::size_t>>& lengths, std::size_t p) {
  tensor<int, batch, posn> doc(batch{lengths.size()}, posn{p});
  for (std::size_t b = 0; b < lengths.size(); ++b) {
    std::size_t i = 0;
    for (std::size_t d = 0; d < lengths[b].size(); ++d)
      for (std::size_t x = 0; x < lengths[b][d]; ++x) doc(batch{b}, posn{i++}) = int(d);
  }
  return doc;
}

/// The document mask (and, when Causal, j <= i) on tensors or vars.
template <bool Causal, class Q, class K, class V, class Doc>
auto packed(const Q& q, const K& k, const V& v, const Doc& doc, double fill) {
  // doc_q != doc_k, broadcast by name over (batch, q_posn, k_posn); moved
  // into the expression, which outlives this function
  auto other = rename<posn, q_posn>(doc) != rename<posn, k_posn>(doc);
  if constexpr (Causal)
    return attend(causal_mask<q_posn, k_posn>(masked_fill(scores(q, k) * 0.5, std::move(other), fill), fill), v);
  else
    return attend(masked_fill(scores(q, k) * 0.5, std::move(other), fill), v);
}

using test::differ;
using test::random_tensor;

using QT = tensor<double, batch, head, q_posn, d_head>;
using KT = tensor<double, batch, head, k_posn, d_head>;
using VT = tensor<double, batch, head, k_posn, d_value>;
using OT = tensor<double, batch, head, q_posn, d_value>;

const std::vector<std::vector<std::size_t>> fixture_lengths{{70, 50, 80}, {128, 40, 32}};

}  // namespace

TEST_CASE("block mask: document masks equal PyTorch forward and gradients, fused on tensors and on vars") {
  const auto doc = document_ids(fixture_lengths, 200);
  auto check_case = [&](auto causal_c) {
    constexpr bool causal = decltype(causal_c)::value;
    const std::string name = causal ? "block_mask/document_causal" : "block_mask/document";
    INFO(name);
    const QT q0 = golden::load<QT>(name + "_q.npy");
    const KT k0 = golden::load<KT>(name + "_k.npy");
    const VT v0 = golden::load<VT>(name + "_v.npy");
    const OT r = golden::load<OT>(name + "_r.npy");
    auto fwd = packed<causal>(q0, k0, v0, doc, ninf);
    static_assert(uses_fused_attention_v<decltype(fwd)>);
    golden::check(OT(fwd), name + "_out.npy", 1e-12, 1e-12);

    grad::tape t;
    auto q = t.watch(q0);
    auto k = t.watch(k0);
    auto v = t.watch(v0);
    auto z = packed<causal>(q, k, v, doc, ninf);
    static_assert(uses_fused_attention_v<decltype(z)>);
    CHECK(t.size() == 4);  // one fused node: no p x p scores recorded
    golden::check(z.value(), name + "_out.npy", 1e-12, 1e-12);
    t.backward(sum<batch, head, q_posn, d_value>(z * r));
    golden::check(gradient(q), name + "_grad_q.npy", 1e-12, 1e-12);
    golden::check(gradient(k), name + "_grad_k.npy", 1e-12, 1e-12);
    golden::check(gradient(v), name + "_grad_v.npy", 1e-12, 1e-12);
  };
  check_case(std::false_type{});
  check_case(std::true_type{});
}

namespace {

/// Position ids over (batch, posn), as a data loader of packed sequences
/// gives them: pos[b, i] = i.
tensor<int, batch, posn> position_ids(std::size_t nb, std::size_t p) {
  tensor<int, batch, posn> pos(batch{nb}, posn{p});
  for (std::size_t b = 0; b < nb; ++b)
    for (std::size_t i = 0; i < p; ++i) pos(batch{b}, posn{i}) = int(i);
  return pos;
}

/// The fixture `name` with the mask `masked(q_ids, k_ids)` (a boolean
/// expression, true where the score is masked), on tensors and on vars.
template <class Masked>
void check_mask_fixture(const std::string& name, Masked masked) {
  INFO(name);
  const auto pos = position_ids(2, 200);
  const auto q_ids = rename<posn, q_posn>(pos);
  const auto k_ids = rename<posn, k_posn>(pos);
  const QT q0 = golden::load<QT>(name + "_q.npy");
  const KT k0 = golden::load<KT>(name + "_k.npy");
  const VT v0 = golden::load<VT>(name + "_v.npy");
  const OT r = golden::load<OT>(name + "_r.npy");
  auto fwd = attend(masked_fill(scores(q0, k0) * 0.5, masked(q_ids, k_ids), ninf), v0);
  static_assert(uses_fused_attention_v<decltype(fwd)>);
  golden::check(OT(fwd), name + "_out.npy", 1e-12, 1e-12);
  grad::tape t;
  auto q = t.watch(q0);
  auto k = t.watch(k0);
  auto v = t.watch(v0);
  auto z = attend(masked_fill(scores(q, k) * 0.5, masked(q_ids, k_ids), ninf), v);
  static_assert(uses_fused_attention_v<decltype(z)>);
  CHECK(t.size() == 4);
  t.backward(sum<batch, head, q_posn, d_value>(z * r));
  golden::check(gradient(q), name + "_grad_q.npy", 1e-12, 1e-12);
  golden::check(gradient(k), name + "_grad_k.npy", 1e-12, 1e-12);
  golden::check(gradient(v), name + "_grad_v.npy", 1e-12, 1e-12);
}

}  // namespace

TEST_CASE("block mask: prefix-LM and chunked local attention masks of position ids equal PyTorch") {
  tensor<int, batch> prefix(batch{2});
  prefix(batch{0}) = 50;
  prefix(batch{1}) = 130;
  // prefix-LM: key j kept when j < prefix[b] or j <= i
  check_mask_fixture("block_mask/prefix_lm", [&](const auto& qi, const auto& ki) { return !((ki < prefix) || (ki <= qi)); });
  // chunked local attention: causal within chunks of 48 positions
  check_mask_fixture("block_mask/chunked", [](const auto& qi, const auto& ki) { return (qi / 48 != ki / 48) || (ki > qi); });
}

TEST_CASE("block mask: fused == unfused chain, float, with a row masked whole (-inf: NaN; -1e9: uniform)") {
  using FQ = tensor<float, batch, head, q_posn, d_head>;
  using FK = tensor<float, batch, head, k_posn, d_head>;
  using FV = tensor<float, batch, head, k_posn, d_value>;
  using FO = tensor<float, batch, head, q_posn, d_value>;
  const FQ q0 = random_tensor(FQ(batch{2}, head{2}, q_posn{150}, d_head{8}), 1);
  const FK k0 = random_tensor(FK(batch{2}, head{2}, k_posn{150}, d_head{8}), 2);
  const FV v0 = random_tensor(FV(batch{2}, head{2}, k_posn{150}, d_value{5}), 3);
  const FO r = random_tensor(FO(batch{2}, head{2}, q_posn{150}, d_value{5}), 4);
  // Query rows hold one more id: query 149 of batch 1 is in a document no key has.
  auto doc_q = document_ids({{64, 86}, {20, 100, 30}}, 150);
  auto doc_k = doc_q;
  doc_q(batch{1}, posn{149}) = 7;
  for (float fill : {-std::numeric_limits<float>::infinity(), -1e9f}) {
    INFO("fill " << fill);
    auto chain = [&](const auto& s) {
      return masked_fill(s * 0.5f, rename<posn, q_posn>(doc_q) != rename<posn, k_posn>(doc_k), fill);
    };
    grad::tape t, u;
    auto q = t.watch(q0);
    auto k = t.watch(k0);
    auto v = t.watch(v0);
    auto z = attend(chain(scores(q, k)), v);
    static_assert(uses_fused_attention_v<decltype(z)>);
    t.backward(sum<batch, head, q_posn, d_value>(z * r));
    auto uq = u.watch(q0);
    auto uk = u.watch(k0);
    auto uv = u.watch(v0);
    grad::var<float, batch, head, q_posn, k_posn> s = scores(uq, uk);  // materialised: unfused
    auto uz = attend(chain(s), uv);
    static_assert(!uses_fused_attention_v<decltype(uz)>);
    u.backward(sum<batch, head, q_posn, d_value>(uz * r));
    CHECK(differ(z.value(), uz.value(), 1e-5) == 0);
    CHECK(differ(gradient(q), gradient(uq), 1e-5) == 0);
    CHECK(differ(gradient(k), gradient(uk), 1e-5) == 0);
    CHECK(differ(gradient(v), gradient(uv), 1e-5) == 0);
    const float last = z.value()(batch{1}, head{0}, q_posn{149}, d_value{0});
    if (fill < -1e30f)
      CHECK(std::isnan(last));  // every key masked with -inf: NaN, as PyTorch
    else
      CHECK(std::isfinite(last));  // the fill's uniform weights over all 150 keys
  }
}

TEST_CASE("block mask: a NaN in V under a skipped block still reaches the output (0 * NaN)") {
  const auto doc = document_ids({{64, 64, 72}}, 200);
  const QT q0 = random_tensor(QT(batch{1}, head{1}, q_posn{200}, d_head{4}), 5);
  const KT k0 = random_tensor(KT(batch{1}, head{1}, k_posn{200}, d_head{4}), 6);
  VT v0 = random_tensor(VT(batch{1}, head{1}, k_posn{200}, d_value{3}), 7);
  v0(batch{0}, head{0}, k_posn{150}, d_value{1}) = std::numeric_limits<double>::quiet_NaN();  // third document
  const OT fused = packed<false>(q0, k0, v0, doc, ninf);
  const tensor<double, batch, head, q_posn, k_posn> s = scores(q0, k0);
  const OT unfused = attend(masked_fill(s * 0.5, rename<posn, q_posn>(doc) != rename<posn, k_posn>(doc), ninf), v0);
  CHECK(differ(fused, unfused, 1e-12) == 0);
  CHECK(std::isnan(fused(batch{0}, head{0}, q_posn{0}, d_value{1})));  // first document: 0 * NaN
  CHECK(!std::isnan(fused(batch{0}, head{0}, q_posn{0}, d_value{0})));
}

namespace {

/// The blocks (rows x cols, as the kernel reports them) of a p x p document
/// mask with the given lengths, by kind, in plain loops: a block is empty
/// when no (i, j) in it shares a document, full when all do.
struct expected_blocks {
  std::size_t empty = 0, full = 0, partial = 0;
};
expected_blocks count_document_blocks(const std::vector<std::size_t>& lengths, std::size_t p, std::size_t rows,
                                      std::size_t cols) {
  std::vector<std::size_t> doc;
  for (std::size_t d = 0; d < lengths.size(); ++d) doc.insert(doc.end(), lengths[d], d);
  expected_blocks e;
  for (std::size_t i0 = 0; i0 < p; i0 += rows)
    for (std::size_t j0 = 0; j0 < p; j0 += cols) {
      std::size_t same = 0, all = 0;
      for (std::size_t i = i0; i < std::min(p, i0 + rows); ++i)
        for (std::size_t j = j0; j < std::min(p, j0 + cols); ++j, ++all) same += doc[i] == doc[j];
      (same == 0 ? e.empty : same == all ? e.full : e.partial) += 1;
    }
  return e;
}

}  // namespace

TEST_CASE("block mask: the kernels skip the empty blocks of a document mask in both passes, once per head") {
  // Kernel arguments by hand: 3 heads sharing one mask of 4 documents in p = 512.
  const std::vector<std::size_t> lengths{100, 156, 200, 56};
  const std::size_t p = 512, d = 16, nh = 3;
  std::vector<float> q(nh * p * d), k(nh * p * d), v(nh * p * d), out(nh * p * d), dout(nh * p * d);
  std::mt19937 gen(9);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (auto* x : {&q, &k, &v, &dout})
    for (float& y : *x) y = u(gen);
  std::vector<std::size_t> doc;
  for (std::size_t x = 0; x < lengths.size(); ++x) doc.insert(doc.end(), lengths[x], x);
  std::vector<char> masked_flags(p * p);
  auto* masked = reinterpret_cast<bool*>(masked_flags.data());
  for (std::size_t i = 0; i < p; ++i)
    for (std::size_t j = 0; j < p; ++j) masked[i * p + j] = doc[i] != doc[j];
  kernels::attention_args<float> a;
  a.q = q.data();
  a.k = k.data();
  a.v = v.data();
  a.out = out.data();
  a.nq = a.nk = p;
  a.dk = a.dv = d;
  a.q_row = a.k_row = a.v_row = a.out_row = std::ptrdiff_t(d);
  a.q_col = a.k_col = a.v_col = a.out_col = 1;
  a.batch_rank = 1;
  a.batch_extents[0] = nh;
  a.q_batch[0] = a.k_batch[0] = a.v_batch[0] = a.out_batch[0] = std::ptrdiff_t(p * d);
  a.n_stages = 2;
  a.stages[0].op = kernels::score_op::multiply;
  a.stages[0].value = 0.25f;
  a.stages[1].op = kernels::score_op::mask;
  a.stages[1].value = -std::numeric_limits<float>::infinity();
  a.stages[1].mask = masked;
  a.stages[1].mask_batch[0] = 0;  // one mask for every head
  a.stages[1].mask_row = std::ptrdiff_t(p);
  a.stages[1].mask_col = 1;
  std::vector<float> lse(nh * p), lse_low(nh * p);
  a.lse = lse.data();
  a.lse_low = lse_low.data();

  kernels::attention_tile_counts fwd;
  a.tile_counts = &fwd;
  kernels::attention(a);
  const expected_blocks ef = count_document_blocks(lengths, p, fwd.rows, fwd.cols);
  INFO("forward blocks " << fwd.rows << " x " << fwd.cols);
  CHECK(ef.empty > 0);
  CHECK(ef.full > 0);
  // A document's blocks are contiguous along each query tile: every empty
  // block is skipped; a tile of full blocks alone reads no mask.
  CHECK(fwd.skipped.load() == nh * ef.empty);
  CHECK(fwd.unmasked.load() + fwd.masked.load() == nh * (ef.full + ef.partial));
  CHECK(fwd.unmasked.load() > 0);
  CHECK(fwd.unmasked.load() <= nh * ef.full);

  // Every output row against plain loops over the keys of its document,
  // and dV = Pᵀ dO from the same weights.
  std::size_t bad = 0;
  std::vector<double> dv_ref(v.size());
  for (std::size_t h = 0; h < nh; ++h)
    for (std::size_t i = 0; i < p; ++i) {
      double m = -1e300, l = 0, o[16] = {};
      std::vector<double> sc(p);
      for (std::size_t j = 0; j < p; ++j) {
        double dot = 0;
        for (std::size_t c = 0; c < d; ++c) dot += double(q[(h * p + i) * d + c]) * k[(h * p + j) * d + c];
        sc[j] = 0.25 * dot;
        if (doc[i] == doc[j]) m = std::max(m, sc[j]);
      }
      for (std::size_t j = 0; j < p; ++j)
        if (doc[i] == doc[j]) {
          const double e = std::exp(sc[j] - m);
          l += e;
          for (std::size_t c = 0; c < d; ++c) o[c] += e * v[(h * p + j) * d + c];
        }
      for (std::size_t c = 0; c < d; ++c) bad += std::abs(out[(h * p + i) * d + c] - o[c] / l) > 1e-5;
      for (std::size_t j = 0; j < p; ++j)
        if (doc[i] == doc[j])
          for (std::size_t c = 0; c < d; ++c) dv_ref[(h * p + j) * d + c] += std::exp(sc[j] - m) / l * dout[(h * p + i) * d + c];
    }
  CHECK(bad == 0);

  kernels::attention_tile_counts bwd;
  a.tile_counts = &bwd;
  std::vector<float> dq(q.size()), dk(k.size()), dv(v.size());
  kernels::attention_grad_args<float> g;
  g.fwd = &a;
  g.lse = lse.data();
  g.lse_low = lse_low.data();
  g.dout = dout.data();
  g.dq = dq.data();
  g.dk = dk.data();
  g.dv = dv.data();
  kernels::attention_backward(g);
  const expected_blocks eb = count_document_blocks(lengths, p, bwd.rows, bwd.cols);
  INFO("backward blocks " << bwd.rows << " x " << bwd.cols);
  // The backward's key tiles start on a fixed grid: the empty blocks that
  // lead a key tile with live blocks are computed, the others skipped.
  CHECK(bwd.skipped.load() + bwd.unmasked.load() + bwd.masked.load() ==
        nh * (eb.empty + eb.full + eb.partial));
  CHECK(bwd.skipped.load() * 4 >= nh * eb.empty * 3);
  CHECK(bwd.unmasked.load() > 0);
  CHECK(bwd.unmasked.load() <= nh * eb.full);
  std::size_t bad_dv = 0;
  for (std::size_t x = 0; x < dv.size(); ++x) bad_dv += std::abs(dv[x] - dv_ref[x]) > 1e-4 * (1 + std::abs(dv_ref[x]));
  CHECK(bad_dv == 0);
}

namespace {

/// A mask as a kernel mask source: flag (i, j) is masked(i, j), the same
/// for every batch index.
struct predicate_source {
  std::function<bool(std::size_t, std::size_t)> masked;
  static void fill(const void* ctx, std::size_t, std::size_t i0, std::size_t rows, std::size_t j0, std::size_t n,
                   bool* out) {
    const auto& self = *static_cast<const predicate_source*>(ctx);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t x = 0; x < n; ++x) out[r * n + x] = self.masked(i0 + r, j0 + x);
  }
};

/// One fused attention by hand: nh heads, nq queries, nk keys, d = dk = dv,
/// contiguous, scores scaled by 0.25, then the stages a test adds.
struct kernel_case {
  std::size_t nh, nq, nk, d;
  std::vector<float> q, k, v, out, dout, lse, lse_low, dq, dk, dv;
  kernels::attention_args<float> a;

  kernel_case(std::size_t nh_, std::size_t nq_, std::size_t nk_, std::size_t d_, unsigned seed)
      : nh(nh_), nq(nq_), nk(nk_), d(d_), q(nh * nq * d), k(nh * nk * d), v(nh * nk * d), out(nh * nq * d),
        dout(nh * nq * d), lse(nh * nq), lse_low(nh * nq), dq(q.size()), dk(k.size()), dv(v.size()) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (auto* x : {&q, &k, &v, &dout})
      for (float& y : *x) y = u(gen);
    a.q = q.data();
    a.k = k.data();
    a.v = v.data();
    a.out = out.data();
    a.nq = nq;
    a.nk = nk;
    a.dk = a.dv = d;
    a.q_row = a.k_row = a.v_row = a.out_row = std::ptrdiff_t(d);
    a.q_col = a.k_col = a.v_col = a.out_col = 1;
    a.batch_rank = 1;
    a.batch_extents[0] = nh;
    a.q_batch[0] = a.out_batch[0] = std::ptrdiff_t(nq * d);
    a.k_batch[0] = a.v_batch[0] = std::ptrdiff_t(nk * d);
    a.n_stages = 1;
    a.stages[0].op = kernels::score_op::multiply;
    a.stages[0].value = 0.25f;
    a.lse = lse.data();
    a.lse_low = lse_low.data();
  }
  /// A mask stage (-inf where masked) reading `src`, one mask for every head.
  void add_source(const predicate_source& src) {
    kernels::score_stage<float>& st = a.stages[a.n_stages++];
    st.op = kernels::score_op::mask;
    st.value = -std::numeric_limits<float>::infinity();
    st.mask_fill = &predicate_source::fill;
    st.mask_ctx = &src;
    st.mask_row = st.mask_col = 1;  // varies along queries and keys; mask_batch 0: shared by the heads
  }
  void forward(kernels::attention_tile_counts* counts) {
    a.tile_counts = counts;
    kernels::attention(a);
  }
  void backward(kernels::attention_tile_counts* counts) {
    a.tile_counts = counts;
    kernels::attention_grad_args<float> g;
    g.fwd = &a;
    g.lse = lse.data();
    g.lse_low = lse_low.data();
    g.dout = dout.data();
    g.dq = dq.data();
    g.dk = dk.data();
    g.dv = dv.data();
    kernels::attention_backward(g);
  }
  /// Output row i of head h (and its share of dV) in plain loops over the
  /// keys `masked` keeps: NaN when it keeps none.
  std::vector<double> reference_row(std::size_t h, std::size_t i, const std::function<bool(std::size_t, std::size_t)>& masked,
                                    std::vector<double>* dv_ref = nullptr) const {
    std::vector<double> sc(nk), o(d, 0.0);
    double m = -std::numeric_limits<double>::infinity(), l = 0;
    for (std::size_t j = 0; j < nk; ++j) {
      double dot = 0;
      for (std::size_t c = 0; c < d; ++c) dot += double(q[(h * nq + i) * d + c]) * k[(h * nk + j) * d + c];
      sc[j] = 0.25 * dot;
      if (!masked(i, j)) m = std::max(m, sc[j]);
    }
    if (m == -std::numeric_limits<double>::infinity()) return std::vector<double>(d, std::nan(""));
    for (std::size_t j = 0; j < nk; ++j)
      if (!masked(i, j)) {
        const double e = std::exp(sc[j] - m);
        l += e;
        for (std::size_t c = 0; c < d; ++c) o[c] += e * v[(h * nk + j) * d + c];
      }
    for (std::size_t c = 0; c < d; ++c) o[c] /= l;
    if (dv_ref != nullptr)
      for (std::size_t j = 0; j < nk; ++j)
        if (!masked(i, j))
          for (std::size_t c = 0; c < d; ++c)
            (*dv_ref)[(h * nk + j) * d + c] += std::exp(sc[j] - m) / l * dout[(h * nq + i) * d + c];
    return o;
  }
  /// Output elements of the rows `rows` of every head that differ from the
  /// plain loops (NaN must meet NaN).
  std::size_t bad_rows(const std::vector<std::size_t>& rows, const std::function<bool(std::size_t, std::size_t)>& masked) const {
    std::size_t bad = 0;
    for (std::size_t h = 0; h < nh; ++h)
      for (std::size_t i : rows) {
        const std::vector<double> want = reference_row(h, i, masked);
        for (std::size_t c = 0; c < d; ++c) {
          const double got = out[(h * nq + i) * d + c];
          bad += std::isnan(want[c]) ? !std::isnan(got) : !(std::abs(got - want[c]) <= 1e-5 * (1 + std::abs(want[c])));
        }
      }
    return bad;
  }
};

/// The blocks (rows x cols) of an nq x nk mask by kind, in plain loops:
/// empty when every score is masked, full when none is.
expected_blocks count_blocks(const std::function<bool(std::size_t, std::size_t)>& masked, std::size_t nq,
                             std::size_t nk, std::size_t rows, std::size_t cols) {
  expected_blocks e;
  for (std::size_t i0 = 0; i0 < nq; i0 += rows)
    for (std::size_t j0 = 0; j0 < nk; j0 += cols) {
      std::size_t hits = 0, all = 0;
      for (std::size_t i = i0; i < std::min(nq, i0 + rows); ++i)
        for (std::size_t j = j0; j < std::min(nk, j0 + cols); ++j, ++all) hits += masked(i, j);
      (hits == all ? e.empty : hits == 0 ? e.full : e.partial) += 1;
    }
  return e;
}

std::vector<std::size_t> document_of_positions(const std::vector<std::size_t>& lengths) {
  std::vector<std::size_t> doc;
  for (std::size_t x = 0; x < lengths.size(); ++x) doc.insert(doc.end(), lengths[x], x);
  return doc;
}

}  // namespace

TEST_CASE("block mask: a document mask expression allocates nothing of the scores' size (p = 8192)") {
  using FQ = tensor<float, batch, head, q_posn, d_head>;
  using FK = tensor<float, batch, head, k_posn, d_head>;
  using FV = tensor<float, batch, head, k_posn, d_value>;
  using FO = tensor<float, batch, head, q_posn, d_value>;
  const std::size_t p = watched_length;
  const auto doc = document_ids({std::vector<std::size_t>(8, p / 8)}, p);  // 8 documents
  const FQ q = random_tensor(FQ(batch{1}, head{1}, q_posn{p}, d_head{4}), 11);
  const FK k = random_tensor(FK(batch{1}, head{1}, k_posn{p}, d_head{4}), 12);
  const FV v = random_tensor(FV(batch{1}, head{1}, k_posn{p}, d_value{4}), 13);
  heap_watch::largest = 0;
  heap_watch::watching = true;
  const FO out = packed<true>(q, k, v, doc, -std::numeric_limits<float>::infinity());
  heap_watch::watching = false;
  INFO("largest allocation " << heap_watch::largest.load() << " bytes; a p x p bool mask is " << p * p);
  if (DIMSUM_TEST_COUNT_ALLOCATIONS) CHECK(heap_watch::largest.load() < p * p / 32);
  // Rows at document starts, ends and inside, against plain loops.
  std::size_t bad = 0;
  for (std::size_t i : {std::size_t(0), p / 8 - 1, p / 8, p * 5 / 8 + 3, p - 1}) {
    double m = -1e300, l = 0, o[4] = {};
    std::vector<double> sc(p);
    const std::size_t first = i / (p / 8) * (p / 8);
    for (std::size_t j = first; j <= i; ++j) {
      double dot = 0;
      for (std::size_t c = 0; c < 4; ++c)
        dot += double(q(batch{0}, head{0}, q_posn{i}, d_head{c})) * k(batch{0}, head{0}, k_posn{j}, d_head{c});
      sc[j] = 0.5 * dot;
      m = std::max(m, sc[j]);
    }
    for (std::size_t j = first; j <= i; ++j) {
      l += std::exp(sc[j] - m);
      for (std::size_t c = 0; c < 4; ++c) o[c] += std::exp(sc[j] - m) * v(batch{0}, head{0}, k_posn{j}, d_value{c});
    }
    for (std::size_t c = 0; c < 4; ++c)
      bad += !(std::abs(out(batch{0}, head{0}, q_posn{i}, d_value{c}) - o[c] / l) <= 1e-5 * (1 + std::abs(o[c] / l)));
  }
  CHECK(bad == 0);
}

TEST_CASE("block mask: the kernels' mask source allocates nothing of the scores' size in either pass (p = 8192)") {
  const std::size_t p = watched_length;
  kernel_case kc(1, p, p, 4, 21);
  const std::vector<std::size_t> doc = document_of_positions(std::vector<std::size_t>(8, p / 8));
  const predicate_source src{[&](std::size_t i, std::size_t j) { return doc[i] != doc[j]; }};
  kc.add_source(src);
  heap_watch::largest = 0;
  heap_watch::watching = true;
  kc.forward(nullptr);
  kc.backward(nullptr);
  heap_watch::watching = false;
  // The backward's scratch holds its packed operands, a few hundred bytes
  // per position (2.8 MB here); the mask would be 64 MiB.
  INFO("largest allocation " << heap_watch::largest.load() << " bytes; a p x p bool mask is " << p * p);
  if (DIMSUM_TEST_COUNT_ALLOCATIONS) CHECK(heap_watch::largest.load() < p * p / 16);
  CHECK(kc.bad_rows({0, p / 8 - 1, p / 8, p / 2 + 4, p - 1}, src.masked) == 0);
  // dQ of a row depends on its document only: finite everywhere
  std::size_t nonfinite = 0;
  for (float x : kc.dq) nonfinite += !std::isfinite(x);
  for (float x : kc.dk) nonfinite += !std::isfinite(x);
  CHECK(nonfinite == 0);
}

TEST_CASE("block mask: a mask source equals the mask in memory; the backward skips empty blocks at both ends of a key tile") {
  const std::vector<std::size_t> lengths{100, 156, 200, 56};
  const std::size_t p = 512, nh = 3;
  const std::vector<std::size_t> doc = document_of_positions(lengths);
  const predicate_source src{[&](std::size_t i, std::size_t j) { return doc[i] != doc[j]; }};
  std::vector<char> flags(p * p);
  for (std::size_t i = 0; i < p; ++i)
    for (std::size_t j = 0; j < p; ++j) flags[i * p + j] = src.masked(i, j);

  kernel_case in_memory(nh, p, p, 16, 9), from_source(nh, p, p, 16, 9);
  kernels::score_stage<float>& st = in_memory.a.stages[in_memory.a.n_stages++];
  st.op = kernels::score_op::mask;
  st.value = -std::numeric_limits<float>::infinity();
  st.mask = reinterpret_cast<const bool*>(flags.data());
  st.mask_row = std::ptrdiff_t(p);
  st.mask_col = 1;
  from_source.add_source(src);
  in_memory.forward(nullptr);
  in_memory.backward(nullptr);
  kernels::attention_tile_counts fwd, bwd;
  from_source.forward(&fwd);
  from_source.backward(&bwd);
  // the same flags: the same arithmetic, bit for bit
  CHECK(from_source.out == in_memory.out);
  CHECK(from_source.lse == in_memory.lse);
  CHECK(from_source.dq == in_memory.dq);
  CHECK(from_source.dk == in_memory.dk);
  CHECK(from_source.dv == in_memory.dv);

  const expected_blocks ef = count_blocks(src.masked, p, p, fwd.rows, fwd.cols);
  CHECK(fwd.skipped.load() == nh * ef.empty);
  // The documents' keys are contiguous: a query tile's live keys are one
  // range, so every empty block of a key tile leads or trails its live
  // blocks, and the backward skips them all.
  const expected_blocks eb = count_blocks(src.masked, p, p, bwd.rows, bwd.cols);
  INFO("backward blocks " << bwd.rows << " x " << bwd.cols);
  CHECK(eb.empty > 0);
  CHECK(bwd.skipped.load() == nh * eb.empty);
  CHECK(bwd.unmasked.load() + bwd.masked.load() == nh * (eb.full + eb.partial));
  std::vector<double> dv_ref(from_source.dv.size());
  std::vector<std::size_t> all_rows(p);
  for (std::size_t i = 0; i < p; ++i) all_rows[i] = i;
  CHECK(from_source.bad_rows(all_rows, src.masked) == 0);
  for (std::size_t h = 0; h < nh; ++h)
    for (std::size_t i = 0; i < p; ++i) from_source.reference_row(h, i, src.masked, &dv_ref);
  std::size_t bad_dv = 0;
  for (std::size_t x = 0; x < dv_ref.size(); ++x)
    bad_dv += std::abs(from_source.dv[x] - dv_ref[x]) > 1e-4 * (1 + std::abs(dv_ref[x]));
  CHECK(bad_dv == 0);
}

TEST_CASE("block mask: decoding rows skip the key blocks a mask empties") {
  // Three new queries against 1000 cached keys of three documents; the
  // third query's document has no key (-inf everywhere: NaN).
  const std::size_t nq = 3, nk = 1000, nh = 2;
  const std::vector<std::size_t> doc_k = document_of_positions({300, 450, 250});
  const std::vector<std::size_t> doc_q{1, 2, 7};
  const predicate_source src{[&](std::size_t i, std::size_t j) { return doc_q[i] != doc_k[j]; }};
  kernel_case kc(nh, nq, nk, 8, 31);
  kc.add_source(src);
  kernels::attention_tile_counts counts;
  kc.forward(&counts);
  CHECK(counts.rows == 1);
  const expected_blocks e = count_blocks(src.masked, nq, nk, counts.rows, counts.cols);
  INFO("blocks " << counts.rows << " x " << counts.cols);
  CHECK(e.empty > 0);
  CHECK(counts.skipped.load() == nh * e.empty);
  CHECK(counts.unmasked.load() + counts.masked.load() == nh * (e.full + e.partial));
  CHECK(counts.unmasked.load() > 0);
  CHECK(kc.bad_rows({0, 1, 2}, src.masked) == 0);
  CHECK(std::isnan(kc.out[2 * kc.d]));  // query 2 keeps no key

  // A NaN in V at a key of the first document, in blocks skipped for every
  // query, still reaches their outputs (0 * NaN) in that column only.
  kc.v[10 * kc.d + 3] = std::numeric_limits<float>::quiet_NaN();
  kc.forward(nullptr);
  CHECK(std::isnan(kc.out[0 * kc.d + 3]));
  CHECK(std::isnan(kc.out[1 * kc.d + 3]));
  CHECK(std::isfinite(kc.out[0 * kc.d + 2]));
  CHECK(std::isfinite(kc.out[1 * kc.d + 2]));
}

TEST_CASE("block mask: decoding through the einsum with a document mask expression equals the unfused chain") {
  const std::size_t nk = 300;
  tensor<int, batch, posn> doc_k = document_ids({{100, 120, 80}, {50, 250}}, nk);
  tensor<int, batch, posn> doc_q(batch{2}, posn{2});
  doc_q(batch{0}, posn{0}) = 1;
  doc_q(batch{0}, posn{1}) = 2;
  doc_q(batch{1}, posn{0}) = 1;
  doc_q(batch{1}, posn{1}) = 0;
  const QT q = random_tensor(QT(batch{2}, head{2}, q_posn{2}, d_head{8}), 41);
  const KT k = random_tensor(KT(batch{2}, head{2}, k_posn{nk}, d_head{8}), 42);
  const VT v = random_tensor(VT(batch{2}, head{2}, k_posn{nk}, d_value{6}), 43);
  auto fused = attend(masked_fill(scores(q, k) * 0.5, rename<posn, q_posn>(doc_q) != rename<posn, k_posn>(doc_k), ninf), v);
  static_assert(uses_fused_attention_v<decltype(fused)>);
  const tensor<double, batch, head, q_posn, k_posn> s = scores(q, k);
  const OT unfused = attend(masked_fill(s * 0.5, rename<posn, q_posn>(doc_q) != rename<posn, k_posn>(doc_k), ninf), v);
  CHECK(differ(OT(fused), unfused, 1e-12) == 0);
}

TEST_CASE("block mask: a block that two masks empty only together is skipped") {
  // Keys from 128 on: the even query rows masked by one stage, the odd
  // ones by the other; no block of several rows is empty under either alone.
  const std::size_t p = 256, nh = 2;
  const predicate_source even{[](std::size_t i, std::size_t j) { return j >= 128 && i % 2 == 0; }};
  const predicate_source odd{[](std::size_t i, std::size_t j) { return j >= 128 && i % 2 == 1; }};
  auto either = [&](std::size_t i, std::size_t j) { return even.masked(i, j) || odd.masked(i, j); };
  kernel_case kc(nh, p, p, 8, 51);
  kc.add_source(even);
  kc.add_source(odd);
  kernels::attention_tile_counts fwd, bwd;
  kc.forward(&fwd);
  kc.backward(&bwd);
  const expected_blocks ef = count_blocks(either, p, p, fwd.rows, fwd.cols);
  CHECK(ef.empty > 0);
  CHECK(count_blocks([&](std::size_t i, std::size_t j) { return even.masked(i, j); }, p, p, fwd.rows, fwd.cols).empty == 0);
  CHECK(fwd.skipped.load() == nh * ef.empty);
  const expected_blocks eb = count_blocks(either, p, p, bwd.rows, bwd.cols);
  CHECK(bwd.skipped.load() == nh * eb.empty);
  std::vector<std::size_t> rows(p);
  for (std::size_t i = 0; i < p; ++i) rows[i] = i;
  CHECK(kc.bad_rows(rows, either) == 0);
  std::vector<double> dv_ref(kc.dv.size());
  for (std::size_t h = 0; h < nh; ++h)
    for (std::size_t i = 0; i < p; ++i) kc.reference_row(h, i, either, &dv_ref);
  std::size_t bad_dv = 0;
  for (std::size_t x = 0; x < dv_ref.size(); ++x) bad_dv += std::abs(kc.dv[x] - dv_ref[x]) > 1e-4 * (1 + std::abs(dv_ref[x]));
  CHECK(bad_dv == 0);
}

namespace {

/// Outputs and gradients of one head's causal attention over the
/// positions [s, e) of one document (scale 0.5, loss sum(out * r)), in
/// plain loops and double: what the fused node must give there.
struct document_reference {
  std::vector<double> out, dq, dk, dv;  // (e - s) x d, row-major
};
template <class FQ, class FK, class FV, class FO>
document_reference reference_document(const FQ& q, const FK& k, const FV& v, const FO& r, std::size_t s, std::size_t e,
                                      std::size_t d) {
  const std::size_t n = e - s;
  auto Q = [&](std::size_t i, std::size_t c) { return double(q(batch{0}, head{0}, q_posn{s + i}, d_head{c})); };
  auto K = [&](std::size_t j, std::size_t c) { return double(k(batch{0}, head{0}, k_posn{s + j}, d_head{c})); };
  auto V = [&](std::size_t j, std::size_t c) { return double(v(batch{0}, head{0}, k_posn{s + j}, d_value{c})); };
  auto G = [&](std::size_t i, std::size_t c) { return double(r(batch{0}, head{0}, q_posn{s + i}, d_value{c})); };
  document_reference ref{std::vector<double>(n * d), std::vector<double>(n * d), std::vector<double>(n * d),
                         std::vector<double>(n * d)};
  std::vector<double> p(n);
  for (std::size_t i = 0; i < n; ++i) {
    double m = -1e300, l = 0;
    for (std::size_t j = 0; j <= i; ++j) {
      double dot = 0;
      for (std::size_t c = 0; c < d; ++c) dot += Q(i, c) * K(j, c);
      p[j] = 0.5 * dot;
      m = std::max(m, p[j]);
    }
    for (std::size_t j = 0; j <= i; ++j) l += p[j] = std::exp(p[j] - m);
    double D = 0;  // sum_j P_ij dP_ij
    for (std::size_t j = 0; j <= i; ++j) {
      p[j] /= l;
      double dp = 0;
      for (std::size_t c = 0; c < d; ++c) {
        ref.out[i * d + c] += p[j] * V(j, c);
        ref.dv[j * d + c] += p[j] * G(i, c);
        dp += G(i, c) * V(j, c);
      }
      D += p[j] * dp;
    }
    for (std::size_t j = 0; j <= i; ++j) {
      double dp = 0;
      for (std::size_t c = 0; c < d; ++c) dp += G(i, c) * V(j, c);
      const double ds = 0.5 * p[j] * (dp - D);
      for (std::size_t c = 0; c < d; ++c) {
        ref.dq[i * d + c] += ds * K(j, c);
        ref.dk[j * d + c] += ds * Q(i, c);
      }
    }
  }
  return ref;
}

/// The elements of got (a tensor over batch, head, Pos, Col with one batch
/// index and head) at positions [s, s + n) that differ from want.
template <class Pos, class Col, class X>
std::size_t differ_rows(const X& got, const std::vector<double>& want, std::size_t s, std::size_t d, double tol) {
  std::size_t bad = 0;
  for (std::size_t i = 0; i < want.size() / d; ++i)
    for (std::size_t c = 0; c < d; ++c) {
      const double g = got(batch{0}, head{0}, Pos{s + i}, Col{c}), w = want[i * d + c];
      bad += !(std::abs(g - w) <= tol * (1 + std::abs(w)));
    }
  return bad;
}

}  // namespace

TEST_CASE("block mask: a document-masked training step on vars allocates nothing of the scores' size (p = 8192)") {
  using FQ = tensor<float, batch, head, q_posn, d_head>;
  using FK = tensor<float, batch, head, k_posn, d_head>;
  using FV = tensor<float, batch, head, k_posn, d_value>;
  using FO = tensor<float, batch, head, q_posn, d_value>;
  const std::size_t p = watched_length, d = 4, len = p / 8;
  const auto doc = document_ids({std::vector<std::size_t>(8, len)}, p);  // 8 documents
  const FQ q0 = random_tensor(FQ(batch{1}, head{1}, q_posn{p}, d_head{d}), 31);
  const FK k0 = random_tensor(FK(batch{1}, head{1}, k_posn{p}, d_head{d}), 32);
  const FV v0 = random_tensor(FV(batch{1}, head{1}, k_posn{p}, d_value{d}), 33);
  const FO r = random_tensor(FO(batch{1}, head{1}, q_posn{p}, d_value{d}), 34);
  grad::tape t;
  auto q = t.watch(q0);
  auto k = t.watch(k0);
  auto v = t.watch(v0);
  heap_watch::largest = 0;
  heap_watch::watching = true;
  auto z = packed<true>(q, k, v, doc, -std::numeric_limits<float>::infinity());
  static_assert(uses_fused_attention_v<decltype(z)>);
  t.backward(sum<batch, head, q_posn, d_value>(z * r));
  heap_watch::watching = false;
  // The fused node keeps a copy of the document ids (p ints) and reads the
  // mask a tile at a time in both passes; the backward's scratch holds its
  // packed operands (a few hundred bytes per position). A materialised mask
  // would be p x p bytes.
  INFO("largest allocation " << heap_watch::largest.load() << " bytes; a p x p bool mask is " << p * p);
  if (DIMSUM_TEST_COUNT_ALLOCATIONS) CHECK(heap_watch::largest.load() < p * p / 16);
  CHECK(t.size() == 6);  // q, k, v, the fused node, z * r, the sum
  // The first, a middle and the last document, against plain loops.
  for (std::size_t x : {std::size_t(0), std::size_t(5), std::size_t(7)}) {
    INFO("document " << x);
    const std::size_t s = x * len;
    const document_reference ref = reference_document(q0, k0, v0, r, s, s + len, d);
    CHECK(differ_rows<q_posn, d_value>(z.value(), ref.out, s, d, 1e-4) == 0);
    CHECK(differ_rows<q_posn, d_head>(gradient(q), ref.dq, s, d, 1e-4) == 0);
    CHECK(differ_rows<k_posn, d_head>(gradient(k), ref.dk, s, d, 1e-4) == 0);
    CHECK(differ_rows<k_posn, d_value>(gradient(v), ref.dv, s, d, 1e-4) == 0);
  }
}

namespace {

/// Overwrites freed memory: a mask read after its tensors were freed would
/// read these values (and AddressSanitizer, in the asan stage, reports it).
void clobber_the_heap() {
  std::vector<std::vector<int>> junk;
  for (int x = 0; x < 64; ++x) junk.emplace_back(1000, 7 + x);
  CHECK(junk.back().front() == 70);
}

/// attend in the named form: a where puts its condition's dims first.
template <class P, class V>
auto attend_named(P&& p, const V& v) {
  return einsum<batch, head, q_posn, d_value>(softmax<k_posn>(std::forward<P>(p)), v);
}

/// The gradients of q, k, v for `attention(q, k, v)` (vars), which builds
/// its mask from tensors that are gone when it returns, against the
/// PyTorch fixture `name`.
template <class Attention>
void check_after_locals_are_gone(const std::string& name, Attention attention) {
  INFO(name);
  const QT q0 = golden::load<QT>(name + "_q.npy");
  const KT k0 = golden::load<KT>(name + "_k.npy");
  const VT v0 = golden::load<VT>(name + "_v.npy");
  const OT r = golden::load<OT>(name + "_r.npy");
  grad::tape t;
  auto q = t.watch(q0);
  auto k = t.watch(k0);
  auto v = t.watch(v0);
  auto z = attention(q, k, v);
  CHECK(t.size() == 4);  // one fused node
  clobber_the_heap();
  golden::check(z.value(), name + "_out.npy", 1e-12, 1e-12);
  t.backward(sum<batch, head, q_posn, d_value>(z * r));
  golden::check(gradient(q), name + "_grad_q.npy", 1e-12, 1e-12);
  golden::check(gradient(k), name + "_grad_k.npy", 1e-12, 1e-12);
  golden::check(gradient(v), name + "_grad_v.npy", 1e-12, 1e-12);
}

}  // namespace

TEST_CASE("block mask: on vars, a mask expression may read locals that are gone before backward") {
  // masked_fill with a mask that holds the local views by reference
  check_after_locals_are_gone("block_mask/document", [](const auto& q, const auto& k, const auto& v) {
    const auto doc = document_ids(fixture_lengths, 200);
    const auto doc_q = rename<posn, q_posn>(doc);
    const auto doc_k = rename<posn, k_posn>(doc);
    const auto other = doc_q != doc_k;
    return attend(masked_fill(scores(q, k) * 0.5, other, ninf), v);
  });
  // where(cond, value, scores): the value where cond holds
  check_after_locals_are_gone("block_mask/document", [](const auto& q, const auto& k, const auto& v) {
    const auto doc = document_ids(fixture_lengths, 200);
    auto z = attend_named(where(rename<posn, q_posn>(doc) != rename<posn, k_posn>(doc), ninf, scores(q, k) * 0.5), v);
    static_assert(uses_fused_attention_v<decltype(z)>);
    return z;
  });
  // where(cond, scores, value): the scores where cond holds (a negated source)
  check_after_locals_are_gone("block_mask/document", [](const auto& q, const auto& k, const auto& v) {
    const auto doc = document_ids(fixture_lengths, 200);
    auto z = attend_named(where(rename<posn, q_posn>(doc) == rename<posn, k_posn>(doc), scores(q, k) * 0.5, ninf), v);
    static_assert(uses_fused_attention_v<decltype(z)>);
    return z;
  });
  // the explicit form, f capturing the document ids by reference
  check_after_locals_are_gone("block_mask/document", [](const auto& q, const auto& k, const auto& v) {
    const auto doc = document_ids(fixture_lengths, 200);
    return grad::fused_attention(q, k, v, [&](const auto& q, const auto& k, const auto& v) {
      return attend(masked_fill(scores(q, k) * 0.5, rename<posn, q_posn>(doc) != rename<posn, k_posn>(doc), ninf), v);
    });
  });
  // prefix-LM: position ids and per-batch prefix lengths, all local
  check_after_locals_are_gone("block_mask/prefix_lm", [](const auto& q, const auto& k, const auto& v) {
    const auto pos = position_ids(2, 200);
    const auto qi = rename<posn, q_posn>(pos);
    const auto ki = rename<posn, k_posn>(pos);
    tensor<int, batch> prefix(batch{2});
    prefix(batch{0}) = 50;
    prefix(batch{1}) = 130;
    return attend(masked_fill(scores(q, k) * 0.5, !((ki < prefix) || (ki <= qi)), ninf), v);
  });
  // chunked local attention: causal within chunks of 48 positions
  check_after_locals_are_gone("block_mask/chunked", [](const auto& q, const auto& k, const auto& v) {
    const auto pos = position_ids(2, 200);
    const auto qi = rename<posn, q_posn>(pos);
    const auto ki = rename<posn, k_posn>(pos);
    return attend(masked_fill(scores(q, k) * 0.5, (qi / 48 != ki / 48) || (ki > qi), ninf), v);
  });
}
