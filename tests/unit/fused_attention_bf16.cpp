// The fused attention on bf16 tensors and vars (kernels/attention_bf16.hpp,
// kernels/attention_backward_bf16.hpp, planned by
// ops/detail/fused_attention.hpp): the attention lines on bf16 operands fuse
// (uses_fused_attention_v), their output and the gradients of q, k and v
// agree with a float64 reference, and with the same lines run unfused on
// bf16 (the scores materialised).
//
// Reference. Q, K, V and the output gradient dO are bf16 numbers; the same
// numbers, exactly widened to double, go through plain float64 loops: the
// scores S = scale * Q Kᵀ with the case's mask, P = softmax(S), O = P V, and
// the textbook backward dV = Pᵀ dO, dP = dO Vᵀ, D = rowsum(dO * O),
// dS = P * (dP - D) (0 where a mask replaced the score), dQ = scale dS K,
// dK = scale dSᵀ Q (summed over heads where K, V are shared by them).
//
// Tolerance (per element, `count_outside` below). bf16 keeps 8 significant
// bits: rounding to nearest has a relative error at most u = 2^-8 (half an
// ulp of 2^-7 relative). The kernel sums in float32 from the exact
// bf16 inputs and rounds each result to bf16 once: error u |ref|. Every sum
// it forms has terms bounded in magnitude by B (the same sum with
// absolute values: Σ_j P|V| for O, Σ_i P|dO| for dV, scale Σ P (|dP| +
// Σ_c|dO O|) |K| for dQ, likewise with |Q| for dK, computed alongside the
// reference), and float32 summation of n terms adds at most
// gamma_n B = n 2^-24 B (Higham). The scores have float32 error at most
// gamma_dk Σ_d |q k| <= gamma_dk smax (smax the largest scaled |score| sum), which
// exp turns into a relative error of P of twice that (numerator and
// denominator). The backward reads the saved output O rounded to bf16 in
// D = rowsum(dO * O): error u Σ_c |dO O|, which is part of B for dQ and dK
// (not for dV). Where the build has AVX512-BF16 the forward's P·V runs on
// bf16 pairs (vdpbf16ps) with P rounded to bf16 first: error u Σ_j P|V|,
// the output's B; so does the backward's, with P rounded for dV (error
// u Σ_i P|dO|, dV's B) and dS rounded for dQ and dK (error u Σ_j |dS||K|
// and u Σ_i |dS||Q|, within their B: |dS| <= scale P (|dP| + Σ_c|dO O|)).
// So, with n = dk + nk + 16 (the reductions on a path plus a few float32
// operations) and u_P = u where the build has AVX512-BF16, else 0,
//   |got - ref| <= 2 (u |ref| + (u_D + n 2^-24 (1 + 2 smax)) B),
// u_D = u for the output, u + u_P for dQ and dK, u_P for dV; the factor 2 covers the
// bounds' crude constants (measured: dV reaches half of it, the final
// rounding; dQ and dK a fifth). The rounding terms dominate (u = 3.9e-3
// against n 2^-24 < 1e-5). The unfused bf16 chain rounds the scores and the probabilities to
// bf16 as well (relative error u smax in P, u in each product), so fused
// and unfused are compared with 4 u (1 + smax) B + 4 u |ref|.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <dimsum/dimsum.hpp>
#include <dimsum/grad/grad.hpp>
#include <dimsum/ops/alibi.hpp>
#include <dimsum/ops/sink_softmax.hpp>
#include <dimsum/ops/with_derivative.hpp>
#include <dimsum/ops/window_mask.hpp>

namespace grad = dimsum::grad;
using dimsum::bf16;
using dimsum::tensor;

namespace {
DIMSUM_DIM(batch);
DIMSUM_DIM(heads);
DIMSUM_DIM(q_posn);
DIMSUM_DIM(k_posn);
DIMSUM_DIM(d_head);
DIMSUM_DIM(d_value);

constexpr double u = 1.0 / 256;
/// u_P of the file comment: the backward's products on bf16 pairs round P
/// and dS where they run (`bf16_attention_on_pairs()`).
double u_pairs() { return dimsum::kernels::bf16_attention_on_pairs() ? u : 0.0; }

/// Runs f once with the products where the machine runs them, and, where
/// the build has AVX512-BF16, once more on the other path (on pairs on a
/// CPU with AMX, in float32 elsewhere), so that both are tested on every
/// machine.
template <class F>
void on_each_product_path(F&& f) {
  namespace kernels = dimsum::kernels;
  struct reset {
    ~reset() { kernels::detail::bf16_attention_pairs_choice() = -1; }
  } at_end;
  f();
  if (kernels::avx512_bf16_arch::supported()) {
    const bool usual = kernels::bf16_attention_on_pairs();
    kernels::detail::bf16_attention_pairs_choice() = usual ? 0 : 1;
    INFO("the bf16 products " << (usual ? "in float32" : "on pairs") << ", not the machine's choice");
    f();
  }
}
constexpr double ninf = -std::numeric_limits<double>::infinity();
constexpr float scale = 0.25f;  // exact in bf16 and float: the reference scales by the same number

enum class masking { causal, finite_fill, padding, huge_fill_row, neg_inf_row, document };

/// One problem: extents, whether K and V are shared by the heads, the
/// masking, and the bf16 numbers of Q, K, V, dO (as double, exact).
struct problem {
  std::size_t b, h, nq, nk, dk, dv;
  bool shared_kv;
  masking mode;
  std::vector<double> q, k, v, dout;
  std::vector<bool> mask;  // [b][i][j] for finite_fill, huge_fill_row, neg_inf_row; [b][j] for padding
  double fill = 0;

  std::size_t kh() const { return shared_kv ? 1 : h; }
  std::size_t qi(std::size_t bi, std::size_t hi, std::size_t i, std::size_t d) const { return ((bi * h + hi) * nq + i) * dk + d; }
  std::size_t ki(std::size_t bi, std::size_t hi, std::size_t j, std::size_t d) const {
    return ((bi * kh() + (shared_kv ? 0 : hi)) * nk + j) * dk + d;
  }
  std::size_t vi(std::size_t bi, std::size_t hi, std::size_t j, std::size_t c) const {
    return ((bi * kh() + (shared_kv ? 0 : hi)) * nk + j) * dv + c;
  }
  std::size_t oi(std::size_t bi, std::size_t hi, std::size_t i, std::size_t c) const { return ((bi * h + hi) * nq + i) * dv + c; }
  /// Whether the mask replaces the score at (bi, i, j), and with what.
  bool masked(std::size_t bi, std::size_t i, std::size_t j) const {
    switch (mode) {
      case masking::causal: return j > i;
      case masking::padding: return mask[bi * nk + j];
      default: return mask[(bi * nq + i) * nk + j];
    }
  }
  double masked_value() const { return mode == masking::causal || mode == masking::padding ? ninf : fill; }
};

double bf16_number(std::mt19937& gen, double scale_) {
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  return double(bf16(d(gen) * float(scale_)));
}

problem make(std::size_t b, std::size_t h, std::size_t nq, std::size_t nk, std::size_t dk, std::size_t dv,
             bool shared_kv, masking mode, unsigned seed) {
  problem p{b, h, nq, nk, dk, dv, shared_kv, mode, {}, {}, {}, {}, {}, 0};
  std::mt19937 gen(seed);
  p.q.resize(b * h * nq * dk);
  p.k.resize(b * p.kh() * nk * dk);
  p.v.resize(b * p.kh() * nk * dv);
  p.dout.resize(b * h * nq * dv);
  for (double& x : p.q) x = bf16_number(gen, 2.0);  // scores of a few units: softmax far from uniform
  for (double& x : p.k) x = bf16_number(gen, 2.0);
  for (double& x : p.v) x = bf16_number(gen, 1.0);
  for (double& x : p.dout) x = bf16_number(gen, 1.0);
  std::bernoulli_distribution coin(0.3);
  if (mode == masking::padding) {
    p.mask.assign(b * nk, false);
    for (std::size_t bi = 0; bi < b; ++bi)
      for (std::size_t j = nk - 7 * bi; j < nk; ++j) p.mask[bi * nk + j] = true;  // batch 1 pads its last 7 keys
  } else if (mode == masking::document) {  // packed documents: doc(b, i) = (i + 5 b) / 13; nq == nk
    p.mask.assign(b * nq * nk, false);
    for (std::size_t bi = 0; bi < b; ++bi)
      for (std::size_t i = 0; i < nq; ++i)
        for (std::size_t j = 0; j < nk; ++j) p.mask[(bi * nq + i) * nk + j] = (i + 5 * bi) / 13 != (j + 5 * bi) / 13;
    p.fill = ninf;
  } else if (mode != masking::causal) {
    p.mask.assign(b * nq * nk, false);
    for (std::size_t x = 0; x < p.mask.size(); ++x) p.mask[x] = coin(gen);
    for (std::size_t j = 0; j < nk; ++j) p.mask[(0 * nq + 5) * nk + j] = true;  // row 5 of batch 0 masked entirely
    p.fill = mode == masking::finite_fill ? -30.0 : mode == masking::huge_fill_row ? double(bf16(-1e9f)) : ninf;
    if (mode == masking::neg_inf_row)  // only row 5 masked, with -inf
      for (std::size_t x = 0; x < p.mask.size(); ++x) p.mask[x] = (x / nk) % nq == 5 && x / (nq * nk) == 0;
  }
  return p;
}

/// The float64 reference and the bounds B of the file comment.
struct reference {
  std::vector<double> out, dq, dk, dv, b_out, b_dq, b_dk, b_dv;
  std::vector<double> dfactor, b_dfactor;  // per head: a factor (1) on the scaled scores
  double smax = 0;
};

reference compute(const problem& p) {
  reference r;
  r.out.assign(p.b * p.h * p.nq * p.dv, 0.0);
  r.b_out = r.out;
  r.dq.assign(p.q.size(), 0.0);
  r.b_dq = r.dq;
  r.dk.assign(p.k.size(), 0.0);
  r.b_dk = r.dk;
  r.dv.assign(p.v.size(), 0.0);
  r.b_dv = r.dv;
  r.dfactor.assign(p.h, 0.0);
  r.b_dfactor = r.dfactor;
  std::vector<double> s(p.nk), pr(p.nk), dp(p.nk), raw_of(p.nk);
  for (std::size_t bi = 0; bi < p.b; ++bi)
    for (std::size_t hi = 0; hi < p.h; ++hi)
      for (std::size_t i = 0; i < p.nq; ++i) {
        double m = ninf;
        for (std::size_t j = 0; j < p.nk; ++j) {
          double raw = 0, mag = 0;
          for (std::size_t d = 0; d < p.dk; ++d) {
            raw += p.q[p.qi(bi, hi, i, d)] * p.k[p.ki(bi, hi, j, d)];
            mag += std::abs(p.q[p.qi(bi, hi, i, d)] * p.k[p.ki(bi, hi, j, d)]);
          }
          r.smax = std::max(r.smax, scale * mag);
          raw_of[j] = scale * raw;
          s[j] = p.masked(bi, i, j) ? p.masked_value() : scale * raw;
          m = std::max(m, s[j]);
        }
        double l = 0;
        for (std::size_t j = 0; j < p.nk; ++j) l += std::exp(s[j] - m);  // all -inf: NaN
        for (std::size_t j = 0; j < p.nk; ++j) pr[j] = std::exp(s[j] - m) / l;
        double dsum = 0, dabs = 0;
        for (std::size_t c = 0; c < p.dv; ++c) {
          double o = 0, ob = 0;
          for (std::size_t j = 0; j < p.nk; ++j) {
            o += pr[j] * p.v[p.vi(bi, hi, j, c)];
            ob += pr[j] * std::abs(p.v[p.vi(bi, hi, j, c)]);
          }
          r.out[p.oi(bi, hi, i, c)] = o;
          r.b_out[p.oi(bi, hi, i, c)] = ob;
          dsum += p.dout[p.oi(bi, hi, i, c)] * o;
          dabs += std::abs(p.dout[p.oi(bi, hi, i, c)] * o);
        }
        for (std::size_t j = 0; j < p.nk; ++j) {
          dp[j] = 0;
          for (std::size_t c = 0; c < p.dv; ++c) {
            dp[j] += p.dout[p.oi(bi, hi, i, c)] * p.v[p.vi(bi, hi, j, c)];
            r.dv[p.vi(bi, hi, j, c)] += pr[j] * p.dout[p.oi(bi, hi, i, c)];
            r.b_dv[p.vi(bi, hi, j, c)] += pr[j] * std::abs(p.dout[p.oi(bi, hi, i, c)]);
          }
        }
        for (std::size_t j = 0; j < p.nk; ++j) {
          if (p.masked(bi, i, j)) continue;  // masked_fill's backward: 0
          const double ds = scale * pr[j] * (dp[j] - dsum);
          const double db = scale * pr[j] * (std::abs(dp[j]) + dabs);
          r.dfactor[hi] += ds / scale * raw_of[j];
          r.b_dfactor[hi] += db / scale * std::abs(raw_of[j]);
          for (std::size_t d = 0; d < p.dk; ++d) {
            r.dq[p.qi(bi, hi, i, d)] += ds * p.k[p.ki(bi, hi, j, d)];
            r.b_dq[p.qi(bi, hi, i, d)] += db * std::abs(p.k[p.ki(bi, hi, j, d)]);
            r.dk[p.ki(bi, hi, j, d)] += ds * p.q[p.qi(bi, hi, i, d)];
            r.b_dk[p.ki(bi, hi, j, d)] += db * std::abs(p.q[p.qi(bi, hi, i, d)]);
          }
        }
      }
  return r;
}

/// How many elements of got are outside the bound of the file comment
/// (NaN where ref is NaN counts as agreement).
template <class G>
std::size_t count_outside(const G& got, const std::vector<double>& ref, const std::vector<double>& bound, double u_d,
                          const problem& p, double smax, const char* what, bool unfused = false) {
  REQUIRE(got.size() == ref.size());
  const double e32 = double(p.dk + p.nk + 16) / double(1 << 24) * (1 + 2 * smax);
  std::size_t bad = 0;
  double worst = 0;
  for (std::size_t x = 0; x < ref.size(); ++x) {
    const double g = double(got.data()[x]), want = ref[x];
    if (std::isnan(want)) {
      if (!std::isnan(g)) ++bad;
      continue;
    }
    const double tol = unfused ? 4 * u * (1 + smax) * bound[x] + 4 * u * std::abs(want)
                               : 2 * (u * std::abs(want) + (u_d + e32) * bound[x]);
    const double err = std::abs(g - want);
    worst = std::max(worst, tol > 0 ? err / tol : err);
    if (!(err <= tol)) {
      if (bad < 5) UNSCOPED_INFO(what << " element " << x << ": got " << g << ", want " << want << " (tol " << tol << ")");
      ++bad;
    }
  }
  UNSCOPED_INFO(what << ": worst error " << worst << " of its tolerance");
  return bad;
}

using QT = tensor<bf16, batch, heads, q_posn, d_head>;
using KT = tensor<bf16, batch, heads, k_posn, d_head>;
using VT = tensor<bf16, batch, heads, k_posn, d_value>;
using KS = tensor<bf16, batch, k_posn, d_head>;  // shared by the heads
using VS = tensor<bf16, batch, k_posn, d_value>;
using OT = tensor<bf16, batch, heads, q_posn, d_value>;
using MQK = tensor<bool, batch, q_posn, k_posn>;
using MK = tensor<bool, batch, k_posn>;
DIMSUM_DIM(posn);
using DOC = tensor<int, batch, posn>;

template <class TT>
TT to_tensor(const std::vector<double>& x, std::array<std::size_t, TT::rank> ext) {
  TT t = TT::from_extents(ext);
  for (std::size_t n = 0; n < x.size(); ++n) t.data()[n] = bf16(x[n]);  // exact: x holds bf16 numbers
  return t;
}

/// Q Kᵀ over d_head, K with or without heads.
template <class Q, class K>
auto qk(const Q& q, const K& k) {
  if constexpr (dimsum::dims_of_t<K>::size == 4)
    return dimsum::einsum<"batch heads q_posn d_head, batch heads k_posn d_head -> batch heads q_posn k_posn">(q, k);
  else
    return dimsum::einsum<"batch heads q_posn d_head, batch k_posn d_head -> batch heads q_posn k_posn">(q, k);
}

/// The weights times V, V with or without heads (w moved in: the result
/// owns it).
template <class W, class V>
auto attend(W&& w, const V& v) {
  if constexpr (dimsum::dims_of_t<V>::size == 4)
    return dimsum::einsum<"batch heads q_posn k_posn, batch heads k_posn d_value -> batch heads q_posn d_value">(
        std::forward<W>(w), v);
  else
    return dimsum::einsum<"batch heads q_posn k_posn, batch k_posn d_value -> batch heads q_posn d_value">(
        std::forward<W>(w), v);
}

/// The attention lines of the case, on tensors or vars (Chain: 0 causal, 1
/// mask over (batch, i, j), 2 padding over (batch, j), 3 the document mask
/// as an expression, evaluated by the kernels a block at a time); `scores_of`
/// materialises the scores (eval) for the unfused chain or passes them on.
/// One expression, so that it owns its temporaries.
template <std::size_t Chain, class Q, class K, class V, class F>
auto run_chain(const problem& p, const Q& q, const K& k, const V& v, const MQK& mqk, const MK& mk, F scores_of,
               const DOC* doc = nullptr) {
  const float fill = static_cast<float>(p.masked_value());
  if constexpr (Chain == 0)
    return attend(dimsum::softmax<k_posn>(dimsum::causal_mask<q_posn, k_posn>(scores_of(qk(q, k)) * scale, fill)), v);
  else if constexpr (Chain == 1)
    return attend(dimsum::softmax<k_posn>(dimsum::masked_fill(scores_of(qk(q, k)) * scale, mqk, fill)), v);
  else if constexpr (Chain == 3)
    return attend(dimsum::softmax<k_posn>(dimsum::masked_fill(
                      scores_of(qk(q, k)) * scale,
                      dimsum::rename<posn, q_posn>(*doc) != dimsum::rename<posn, k_posn>(*doc), fill)),
                  v);
  else
    return attend(dimsum::softmax<k_posn>(dimsum::masked_fill(scores_of(qk(q, k)) * scale, mk, fill)), v);
}

auto pass = [](auto&& s) { return s; };
auto materialise = [](auto&& s) { return dimsum::eval(s); };

template <std::size_t Chain, class KK, class VV>
void check_problem_once(const problem& p);

// The problem on each path of the bf16 products.
template <std::size_t Chain, class KK, class VV>
void check_problem(const problem& p) {
  on_each_product_path([&] { check_problem_once<Chain, KK, VV>(p); });
}

template <std::size_t Chain, class KK, class VV>
void check_problem_once(const problem& p) {
  const reference r = compute(p);
  DOC doc = DOC::from_extents({p.b, p.nq});
  for (std::size_t bi = 0; bi < p.b; ++bi)
    for (std::size_t i = 0; i < p.nq; ++i) doc.data()[bi * p.nq + i] = int((i + 5 * bi) / 13);
  const QT q = to_tensor<QT>(p.q, {p.b, p.h, p.nq, p.dk});
  const KK k = [&] {
    if constexpr (KK::rank == 4)
      return to_tensor<KK>(p.k, {p.b, p.h, p.nk, p.dk});
    else
      return to_tensor<KK>(p.k, {p.b, p.nk, p.dk});
  }();
  const VV v = [&] {
    if constexpr (VV::rank == 4)
      return to_tensor<VV>(p.v, {p.b, p.h, p.nk, p.dv});
    else
      return to_tensor<VV>(p.v, {p.b, p.nk, p.dv});
  }();
  const OT w = to_tensor<OT>(p.dout, {p.b, p.h, p.nq, p.dv});
  MQK mqk = MQK::from_extents({p.b, p.nq, p.nk});
  MK mk = MK::from_extents({p.b, p.nk});
  if (p.mode == masking::padding)
    for (std::size_t x = 0; x < mk.size(); ++x) mk.data()[x] = p.mask[x];
  else if (p.mode != masking::causal)
    for (std::size_t x = 0; x < mqk.size(); ++x) mqk.data()[x] = p.mask[x];

  // tensors: fused, and against the unfused chain
  auto z = run_chain<Chain>(p, q, k, v, mqk, mk, pass, &doc);
  static_assert(dimsum::uses_fused_attention_v<decltype(z)>, "the bf16 attention lines fuse");
  const OT out = z;
  CHECK(count_outside(out, r.out, r.b_out, u, p, r.smax, "forward") == 0);
  const OT unfused = run_chain<Chain>(p, q, k, v, mqk, mk, materialise, &doc);
  static_assert(!dimsum::uses_fused_attention_v<decltype(run_chain<Chain>(p, q, k, v, mqk, mk, materialise, &doc))>);
  CHECK(count_outside(unfused, r.out, r.b_out, 0, p, r.smax, "unfused forward", true) == 0);
  if (p.mode == masking::neg_inf_row) return;  // NaN row: the forward only

  // vars: one fused node; gradients against the reference and the unfused chain
  grad::tape t;
  auto vq = t.watch(q);
  auto vk = t.watch(k);
  auto vv = t.watch(v);
  const std::size_t leaves = t.size();
  auto vz = run_chain<Chain>(p, vq, vk, vv, mqk, mk, pass, &doc);
  static_assert(dimsum::uses_fused_attention_v<decltype(vz)>, "the bf16 attention lines on vars fuse");
  t.backward(dimsum::sum<batch, heads, q_posn, d_value>(vz * w));
  CHECK(t.size() <= leaves + 3);  // the fused node, the product, the sum
  const QT gq = dimsum::gradient(vq);
  const KK gk = dimsum::gradient(vk);
  const VV gv = dimsum::gradient(vv);
  CHECK(count_outside(OT(vz.value()), r.out, r.b_out, u, p, r.smax, "var forward") == 0);
  CHECK(count_outside(gq, r.dq, r.b_dq, u + u_pairs(), p, r.smax, "dq") == 0);
  CHECK(count_outside(gk, r.dk, r.b_dk, u + u_pairs(), p, r.smax, "dk") == 0);
  CHECK(count_outside(gv, r.dv, r.b_dv, u_pairs(), p, r.smax, "dv") == 0);

  grad::tape tu;
  auto uq = tu.watch(q);
  auto uk = tu.watch(k);
  auto uv = tu.watch(v);
  auto uz = run_chain<Chain>(p, uq, uk, uv, mqk, mk, materialise, &doc);
  tu.backward(dimsum::sum<batch, heads, q_posn, d_value>(uz * w));
  CHECK(count_outside(dimsum::gradient(uq), r.dq, r.b_dq, u, p, r.smax, "unfused dq", true) == 0);
  CHECK(count_outside(dimsum::gradient(uk), r.dk, r.b_dk, u, p, r.smax, "unfused dk", true) == 0);
  CHECK(count_outside(dimsum::gradient(uv), r.dv, r.b_dv, u, p, r.smax, "unfused dv", true) == 0);
}

}  // namespace

TEST_CASE("fused attention, bf16: causal -inf, query and key tiles crossed") {
  for (int threads : {1, 0}) {
    dimsum::set_num_threads(threads);
    check_problem<0, KT, VT>(make(2, 2, 37, 70, 24, 20, false, masking::causal, 1));
    check_problem<0, KT, VT>(make(1, 1, 70, 70, 16, 16, false, masking::causal, 2));  // one batch index
  }
  dimsum::set_num_threads(0);
}

TEST_CASE("fused attention, bf16: a mask with a finite fill and an entirely masked row") {
  check_problem<1, KT, VT>(make(2, 2, 37, 70, 24, 20, false, masking::finite_fill, 3));
}

TEST_CASE("fused attention, bf16: a row masked entirely with a huge finite fill (-1e9)") {
  check_problem<1, KT, VT>(make(2, 2, 37, 70, 24, 20, false, masking::huge_fill_row, 4));
}

TEST_CASE("fused attention, bf16: a padding mask per batch, K and V shared by the heads") {
  check_problem<2, KS, VS>(make(2, 3, 37, 70, 24, 20, true, masking::padding, 5));
  check_problem<2, KT, VT>(make(2, 2, 33, 65, 8, 12, false, masking::padding, 6));
}

TEST_CASE("fused attention, bf16: a row masked entirely with -inf is NaN, the others agree") {
  check_problem<1, KT, VT>(make(2, 2, 37, 70, 24, 20, false, masking::neg_inf_row, 7));
}

TEST_CASE("fused attention, bf16: a document mask written as an expression (a mask source, evaluated per block)") {
  check_problem<3, KT, VT>(make(2, 2, 70, 70, 24, 20, false, masking::document, 12));
}

TEST_CASE("fused attention, bf16: decoding rows (a few queries)") {
  check_problem<2, KT, VT>(make(2, 2, 2, 70, 24, 20, false, masking::padding, 8));
}

TEST_CASE("fused attention, bf16: odd head sizes and odd key tiles (the bf16 pairs padded)") {
  // dk and dv odd: the last pair of d (Q·Kᵀ) is padded; causal tiles end on
  // odd keys: the last pair of keys (P·V) is half outside the tile
  check_problem<0, KT, VT>(make(1, 2, 75, 77, 13, 7, false, masking::causal, 14));
  check_problem<1, KT, VT>(make(2, 1, 41, 71, 9, 5, false, masking::finite_fill, 15));
}

TEST_CASE("fused attention, bf16: head size 64 (whole key panels packed from the bf16 numbers in place)") {
  // d = 64: K's and V's pairs gathered and interleaved 32 keys or columns
  // at a time; the backward's dKᵀ and dVᵀ end on a 4-row panel
  check_problem<0, KT, VT>(make(2, 2, 70, 70, 64, 64, false, masking::causal, 17));
  check_problem<2, KS, VS>(make(1, 2, 40, 96, 64, 32, true, masking::padding, 18));
}

TEST_CASE("fused attention, bf16: the query tiles' products, forward and backward, run on vdpbf16ps where bf16_attention_on_pairs()") {
  namespace kernels = dimsum::kernels;
  const problem p = make(1, 2, 75, 77, 13, 7, false, masking::causal, 16);
  const reference r = compute(p);
  std::vector<bf16> q(p.q.size()), k(p.k.size()), v(p.v.size()), out(r.out.size());
  for (std::size_t x = 0; x < q.size(); ++x) q[x] = bf16(float(p.q[x]));  // exact: bf16 numbers
  for (std::size_t x = 0; x < k.size(); ++x) k[x] = bf16(float(p.k[x]));
  for (std::size_t x = 0; x < v.size(); ++x) v[x] = bf16(float(p.v[x]));
  kernels::attention_args<float, bf16> a;
  a.q = q.data();
  a.k = k.data();
  a.v = v.data();
  a.out = out.data();
  a.nq = p.nq;
  a.nk = p.nk;
  a.dk = p.dk;
  a.dv = p.dv;
  a.q_row = a.k_row = std::ptrdiff_t(p.dk);
  a.v_row = a.out_row = std::ptrdiff_t(p.dv);
  a.q_col = a.k_col = a.v_col = a.out_col = 1;
  a.batch_rank = 1;
  a.batch_extents[0] = p.h;
  a.q_batch[0] = std::ptrdiff_t(p.nq * p.dk);
  a.k_batch[0] = std::ptrdiff_t(p.nk * p.dk);
  a.v_batch[0] = std::ptrdiff_t(p.nk * p.dv);
  a.out_batch[0] = std::ptrdiff_t(p.nq * p.dv);
  a.n_stages = 2;
  a.stages[0].op = kernels::score_op::multiply;
  a.stages[0].value = scale;
  a.stages[1].op = kernels::score_op::causal;
  a.stages[1].value = -std::numeric_limits<float>::infinity();
  kernels::attention_tile_counts counts;
  a.tile_counts = &counts;
  std::vector<float> lse(p.h * p.nq), lse_low(p.h * p.nq);
  a.lse = lse.data();
  a.lse_low = lse_low.data();
  std::vector<bf16> dout(p.dout.size()), dq(q.size()), dk(k.size()), dv(v.size());
  for (std::size_t x = 0; x < dout.size(); ++x) dout[x] = bf16(float(p.dout[x]));
  on_each_product_path([&] {
  for (int threads : {1, 2}) {
    dimsum::set_num_threads(threads);
    counts.bf16_tiles = 0;
    std::fill(out.begin(), out.end(), bf16(std::numeric_limits<float>::quiet_NaN()));
    kernels::attention(a);
    CHECK(count_outside(out, r.out, r.b_out, u, p, r.smax, "kernel forward") == 0);
    // 75 query rows: two query tiles of each of the 2 heads, each with one key tile
    if (kernels::bf16_attention_on_pairs())
      CHECK(counts.bf16_tiles.load() == 4);
    else
      CHECK(counts.bf16_tiles.load() == 0);
    // the backward: every query tile (72 rows, then 3) with its one key
    // tile, on the pairs too; the odd rows, keys and head sizes end on half
    // pairs (and the 3-row tile on a half panel)
    counts.bf16_tiles = 0;
    for (auto* g : {&dq, &dk, &dv}) std::fill(g->begin(), g->end(), bf16(std::numeric_limits<float>::quiet_NaN()));
    kernels::attention_grad_args<float, bf16> g;
    g.fwd = &a;
    g.lse = lse.data();
    g.lse_low = lse_low.data();
    g.dout = dout.data();
    g.dq = dq.data();
    g.dk = dk.data();
    g.dv = dv.data();
    kernels::attention_backward(g);
    CHECK(count_outside(dq, r.dq, r.b_dq, u + u_pairs(), p, r.smax, "kernel dq") == 0);
    CHECK(count_outside(dk, r.dk, r.b_dk, u + u_pairs(), p, r.smax, "kernel dk") == 0);
    CHECK(count_outside(dv, r.dv, r.b_dv, u_pairs(), p, r.smax, "kernel dv") == 0);
    CHECK(counts.bf16_tiles.load() == (kernels::bf16_attention_on_pairs() ? 4u : 0u));
  }
  });
  dimsum::set_num_threads(0);
}

TEST_CASE("grad::fused_attention on bf16 vars: one tape node, gradients of q, k, v against float64 loops") {
  const problem p = make(2, 2, 37, 70, 24, 20, false, masking::causal, 9);
  const reference r = compute(p);
  const QT q = to_tensor<QT>(p.q, {p.b, p.h, p.nq, p.dk});
  const KT k = to_tensor<KT>(p.k, {p.b, p.h, p.nk, p.dk});
  const VT v = to_tensor<VT>(p.v, {p.b, p.h, p.nk, p.dv});
  const OT w = to_tensor<OT>(p.dout, {p.b, p.h, p.nq, p.dv});
  const MQK mqk = MQK::from_extents({p.b, p.nq, p.nk});
  const MK mk = MK::from_extents({p.b, p.nk});
  grad::tape t;
  auto vq = t.watch(q);
  auto vk = t.watch(k);
  auto vv = t.watch(v);
  const std::size_t leaves = t.size();
  auto z = grad::fused_attention(vq, vk, vv, [&](const auto& q, const auto& k, const auto& v) {
    return run_chain<0>(p, q, k, v, mqk, mk, pass);
  });
  CHECK(t.size() == leaves + 1);
  t.backward(dimsum::sum<batch, heads, q_posn, d_value>(z * w));
  CHECK(count_outside(OT(z.value()), r.out, r.b_out, u, p, r.smax, "forward") == 0);
  CHECK(count_outside(dimsum::gradient(vq), r.dq, r.b_dq, u + u_pairs(), p, r.smax, "dq") == 0);
  CHECK(count_outside(dimsum::gradient(vk), r.dk, r.b_dk, u + u_pairs(), p, r.smax, "dk") == 0);
  CHECK(count_outside(dimsum::gradient(vv), r.dv, r.b_dv, u_pairs(), p, r.smax, "dv") == 0);
}

TEST_CASE("attention on bf16 vars with a learned per-head factor: recorded unfused, the factor gets its gradient") {
  const problem p = make(2, 2, 37, 70, 24, 20, false, masking::causal, 10);
  const reference r = compute(p);
  const QT q = to_tensor<QT>(p.q, {p.b, p.h, p.nq, p.dk});
  const KT k = to_tensor<KT>(p.k, {p.b, p.h, p.nk, p.dk});
  const VT v = to_tensor<VT>(p.v, {p.b, p.h, p.nk, p.dv});
  const OT w = to_tensor<OT>(p.dout, {p.b, p.h, p.nq, p.dv});
  auto temp0 = tensor<bf16, heads>::from_extents({p.h});
  for (std::size_t x = 0; x < p.h; ++x) temp0.data()[x] = bf16(1.0f);  // the reference's scores
  grad::tape t;
  auto vq = t.watch(q);
  auto vk = t.watch(k);
  auto vv = t.watch(v);
  auto temp = t.watch(temp0);
  auto z = attend(dimsum::softmax<k_posn>(dimsum::causal_mask<q_posn, k_posn>(qk(vq, vk) * scale * temp, -INFINITY)), vv);
  static_assert(!dimsum::uses_fused_attention_v<decltype(z)>, "a learned part on bf16 vars is recorded unfused");
  t.backward(dimsum::sum<batch, heads, q_posn, d_value>(z * w));
  CHECK(count_outside(OT(z.value()), r.out, r.b_out, 0, p, r.smax, "forward", true) == 0);
  CHECK(count_outside(dimsum::gradient(vq), r.dq, r.b_dq, u, p, r.smax, "dq", true) == 0);
  CHECK(count_outside(dimsum::gradient(vk), r.dk, r.b_dk, u, p, r.smax, "dk", true) == 0);
  CHECK(count_outside(dimsum::gradient(vv), r.dv, r.b_dv, 0, p, r.smax, "dv", true) == 0);
  CHECK(count_outside(dimsum::gradient(temp), r.dfactor, r.b_dfactor, u, p, r.smax, "dtemp", true) == 0);
}

TEST_CASE("bf16 attention's vector conversions equal bf16's scalar ones (ties, NaN, inf, denormals, tails)") {
  // the reference: bf16(float) and bf16::to_float (core/bf16.hpp, tests/unit/bf16.cpp)
  std::mt19937 gen(11);
  std::vector<std::uint32_t> bits = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u,
                                     0xff800001u, 0x7fffffffu, 0x3f808000u, 0x3f818000u, 0x3f80c000u, 0x3f807fffu,
                                     0x00008000u, 0x00018000u, 0x0000ffffu, 0x807fffffu, 0x7f7fffffu, 0x7f7f8000u};
  for (int x = 0; x < 200000; ++x) bits.push_back(gen());
  std::vector<float> f(bits.size()), back(bits.size());
  for (std::size_t x = 0; x < bits.size(); ++x) f[x] = std::bit_cast<float>(bits[x]);
  std::vector<std::uint16_t> words(bits.size());
  for (std::size_t n : {bits.size(), std::size_t(37), std::size_t(7)}) {
    std::fill(words.begin(), words.end(), std::uint16_t(0));
    dimsum::kernels::detail::round_contiguous(f.data(), n, words.data());
    std::size_t bad = 0;
    for (std::size_t x = 0; x < n; ++x) bad += words[x] != bf16(f[x]).bits();
    CHECK(bad == 0);
    dimsum::kernels::detail::widen_contiguous(words.data(), n, back.data());
    bad = 0;
    for (std::size_t x = 0; x < n; ++x)
      bad += std::bit_cast<std::uint32_t>(back[x]) != std::bit_cast<std::uint32_t>(bf16::from_bits(words[x]).to_float());
    CHECK(bad == 0);
  }
}

namespace {
/// got (bf16) against want (the float kernel's output on the same bf16
/// numbers): the bf16 path runs the float kernel's arithmetic on the
/// values converted exactly, so they differ by the output's rounding to
/// bf16 (at most u |want|), P's rounding to bf16 before P·V where the
/// products run on pairs (at most u Σ_j P_j |V_j| <= u max |V| = u: V's
/// numbers lie in [-1, 1]) and float32 reassociation (2^-20 of the
/// largest |want|, a bound far above the float32 sums' n 2^-24 here).
template <class G, class W>
std::size_t differ_from_float(const G& got, const W& want, const char* what) {
  REQUIRE(got.size() == want.size());
  double m = 0;
  for (std::size_t x = 0; x < want.size(); ++x) m = std::max(m, std::abs(double(want.data()[x])));
  std::size_t bad = 0;
  for (std::size_t x = 0; x < want.size(); ++x) {
    const double g = double(got.data()[x]), w = double(want.data()[x]);
    const double p_rounding = dimsum::kernels::bf16_attention_on_pairs() ? u : 0.0;
    if (std::isnan(w) ? !std::isnan(g) : !(std::abs(g - w) <= u * std::abs(w) + p_rounding + std::ldexp(m, -20))) {
      if (bad < 5) UNSCOPED_INFO(what << " element " << x << ": got " << g << ", want " << w);
      ++bad;
    }
  }
  return bad;
}
}  // namespace

TEST_CASE("fused attention, bf16: every score modification equals the float kernel on the same numbers") {
  const problem p = make(2, 2, 70, 70, 24, 20, false, masking::causal, 13);
  const QT q = to_tensor<QT>(p.q, {p.b, p.h, p.nq, p.dk});
  const KT k = to_tensor<KT>(p.k, {p.b, p.h, p.nk, p.dk});
  const VT v = to_tensor<VT>(p.v, {p.b, p.h, p.nk, p.dv});
  auto widen = [](const auto& t) { return dimsum::tensor_for_t<float, dimsum::dims_of_t<decltype(t)>>(dimsum::cast<float>(t)); };
  const auto qf = widen(q);
  const auto kf = widen(k);
  const auto vf = widen(v);
  auto per_head = [&](float a, float step) {
    auto t = tensor<bf16, heads>::from_extents({p.h});
    for (std::size_t x = 0; x < p.h; ++x) t.data()[x] = bf16(a + step * float(x));
    return t;
  };
  const auto temp = per_head(1.0f, 0.25f), slopes = per_head(-0.5f, 0.25f), sinks = per_head(-1.0f, 0.5f);
  const auto tempf = widen(temp), slopesf = widen(slopes), sinksf = widen(sinks);
  tensor<float, heads, q_posn, k_posn> bias_f = tensor<float, heads, q_posn, k_posn>::from_extents({p.h, p.nq, p.nk});
  for (std::size_t x = 0; x < bias_f.size(); ++x) bias_f.data()[x] = float(bf16(0.01f * float(x % 97) - 0.5f));
  const auto bias = dimsum::tensor_for_t<bf16, dimsum::dims_of_t<decltype(bias_f)>>(dimsum::cast<bf16>(bias_f));
  const float inf = std::numeric_limits<float>::infinity();
  MK keep = MK::from_extents({p.b, p.nk});
  for (std::size_t x = 0; x < keep.size(); ++x) keep.data()[x] = x % p.nk < p.nk - 9 * (x / p.nk);
  // of a float or a bf16 (the kernels call it on float scores), in float
  const auto cubic = dimsum::with_derivative(
      [](auto x) {
        const float f = static_cast<float>(x);
        return decltype(x)(f + 0.01f * f * f * f);
      },
      [](auto x) {
        const float f = static_cast<float>(x);
        return decltype(x)(1.0f + 0.03f * f * f);
      });
  // each variant on bf16 (Q, K, V, and its tensors) and on float, with the same numbers
  auto check = [&](const char* what, auto variant) {
    INFO(what);
    auto zb = variant(q, k, v, temp, slopes, sinks, bias);
    auto zf = variant(qf, kf, vf, tempf, slopesf, sinksf, bias_f);
    static_assert(dimsum::uses_fused_attention_v<decltype(zb)>, "the variant fuses on bf16");
    static_assert(dimsum::uses_fused_attention_v<decltype(zf)>);
    const OT got = zb;
    const dimsum::tensor_for_t<float, dimsum::dims_of_t<OT>> want = zf;
    CHECK(differ_from_float(got, want, what) == 0);
  };
  auto sc = [&](const auto& q, const auto& k) { return qk(q, k) * scale; };
  check("window of 9, offset 3", [&](const auto& q, const auto& k, const auto& v, auto&&...) {
    return attend(dimsum::softmax<k_posn>(dimsum::window_mask<q_posn, k_posn>(sc(q, k), 9, -inf, 3)), v);
  });
  check("ALiBi (slopes per head times the key-minus-query distance), causal",
        [&](const auto& q, const auto& k, const auto& v, const auto&, const auto& sl, auto&&...) {
          using T = dimsum::value_type_of_t<std::remove_cvref_t<decltype(q)>>;
          return attend(dimsum::softmax<k_posn>(dimsum::causal_mask<q_posn, k_posn>(
                            sc(q, k) + dimsum::outer(sl, dimsum::relative_positions<T>(q_posn{p.nq}, k_posn{p.nk})), -inf)),
                        v);
        });
  check("an additive bias tensor over (heads, q, k)", [&](const auto& q, const auto& k, const auto& v, const auto&,
                                                          const auto&, const auto&, const auto& b) {
    return attend(dimsum::softmax<k_posn>(dimsum::causal_mask<q_posn, k_posn>(sc(q, k) + b, -inf)), v);
  });
  check("a user's map with its derivative", [&](const auto& q, const auto& k, const auto& v, auto&&...) {
    return attend(dimsum::softmax<k_posn>(dimsum::causal_mask<q_posn, k_posn>(dimsum::map(cubic, sc(q, k)), -inf)), v);
  });
  check("soft-capping 5 tanh(s / 5), causal", [&](const auto& q, const auto& k, const auto& v, auto&&...) {
    return attend(dimsum::softmax<k_posn>(dimsum::causal_mask<q_posn, k_posn>(5.0f * dimsum::tanh(sc(q, k) / 5.0f), -inf)),
                  v);
  });
  check("a temperature per head", [&](const auto& q, const auto& k, const auto& v, const auto& t, auto&&...) {
    return attend(dimsum::softmax<k_posn>(dimsum::causal_mask<q_posn, k_posn>(sc(q, k) * t, -inf)), v);
  });
  check("where(keep, s, -inf): padding of the last 9 b keys", [&](const auto& q, const auto& k, const auto& v, auto&&...) {
    // where's dims start with keep's: the named einsum takes its operands' dims in any order
    return dimsum::einsum<batch, heads, q_posn, d_value>(dimsum::softmax<k_posn>(dimsum::where(keep, sc(q, k), -inf)), v);
  });
  check("sink logits per head", [&](const auto& q, const auto& k, const auto& v, const auto&, const auto&,
                                    const auto& sk, auto&&...) {
    return attend(dimsum::softmax<k_posn>(dimsum::causal_mask<q_posn, k_posn>(sc(q, k), -inf), sk), v);
  });
}
