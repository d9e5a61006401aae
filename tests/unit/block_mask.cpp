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

#include <dimsum/grad/grad.hpp>
#include <dimsum/kernels/attention_backward.hpp>

#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "golden.hpp"
#include "support.hpp"

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
