// The fused attention backward (kernels/attention_backward.hpp) against
// central finite differences in double of a plain-loops forward: odd
// lengths crossing the kernel's query (32) and key (64) tiles, a scale
// stage, a causal mask with -inf (key tiles skipped) and with a finite
// value (kept), a per-batch padding mask with a fully masked (NaN) row.
// Also the saved row statistics (logsumexp) against plain loops, and the
// kernel's forward output fed to the backward. And the same backward
// against PyTorch float64 autograd of the unfused chain (fixtures written by
// tests/reference/make_grad_fixtures.py, fused_attention()). And on the
// tape: grad::fused_attention records one node whose gradients equal
// PyTorch's and the unfused chain of var operations'.

#include <dimsum/kernels/attention.hpp>
#include <dimsum/kernels/attention_backward.hpp>
#include <dimsum/grad/grad.hpp>

#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "golden.hpp"

namespace {

using namespace dimsum;

constexpr double ninf = -std::numeric_limits<double>::infinity();

struct problem {
  std::size_t b, nq, nk, d, dv;
  // f(raw, b, i, j): the score after the stages, as plain code
  std::function<double(double, std::size_t, std::size_t, std::size_t)> f;
  std::vector<double> q, k, v, dout;
};

/// Plain-loops forward: out[b, i, c] and lse[b, i]; layout [b, i, d].
void forward(const problem& p, const std::vector<double>& q, const std::vector<double>& k,
             const std::vector<double>& v, std::vector<double>& out, std::vector<double>& lse) {
  out.assign(p.b * p.nq * p.dv, 0.0);
  lse.assign(p.b * p.nq, 0.0);
  std::vector<double> s(p.nk);
  for (std::size_t b = 0; b < p.b; ++b)
    for (std::size_t i = 0; i < p.nq; ++i) {
      double m = ninf;
      for (std::size_t j = 0; j < p.nk; ++j) {
        double raw = 0;
        for (std::size_t d = 0; d < p.d; ++d) raw += q[(b * p.nq + i) * p.d + d] * k[(b * p.nk + j) * p.d + d];
        s[j] = p.f(raw, b, i, j);
        m = std::max(m, s[j]);
      }
      double l = 0;
      for (std::size_t j = 0; j < p.nk; ++j) l += std::exp(s[j] - m);  // all -inf: NaN
      lse[b * p.nq + i] = m == ninf ? ninf : m + std::log(l);
      for (std::size_t j = 0; j < p.nk; ++j) {
        const double w = std::exp(s[j] - m) / l;
        for (std::size_t c = 0; c < p.dv; ++c) out[(b * p.nq + i) * p.dv + c] += w * v[(b * p.nk + j) * p.dv + c];
      }
    }
}

/// L = sum dO * out over the rows that are not NaN (a NaN row is constant
/// for q and k: PyTorch's masked_fill backward gives them 0).
double loss(const problem& p, const std::vector<double>& q, const std::vector<double>& k,
            const std::vector<double>& v) {
  std::vector<double> out, lse;
  forward(p, q, k, v, out, lse);
  double l = 0;
  for (std::size_t x = 0; x < out.size(); ++x)
    if (!std::isnan(out[x])) l += p.dout[x] * out[x];
  return l;
}

std::vector<double> finite_difference(const problem& p, int which) {
  std::vector<double> q = p.q, k = p.k, v = p.v;
  std::vector<double>& x = which == 0 ? q : which == 1 ? k : v;
  std::vector<double> g(x.size());
  const double h = 1e-6;
  for (std::size_t n = 0; n < x.size(); ++n) {
    const double x0 = x[n];
    x[n] = x0 + h;
    const double up = loss(p, q, k, v);
    x[n] = x0 - h;
    const double down = loss(p, q, k, v);
    x[n] = x0;
    g[n] = (up - down) / (2 * h);
  }
  return g;
}

problem make(std::size_t b, std::size_t nq, std::size_t nk, std::size_t d, std::size_t dv, unsigned seed) {
  problem p{b, nq, nk, d, dv, {}, {}, {}, {}, {}};
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (auto* vec : {&p.q, &p.k}) {
    vec->resize(b * (vec == &p.q ? nq : nk) * d);
    for (double& x : *vec) x = u(gen);
  }
  p.v.resize(b * nk * dv);
  for (double& x : p.v) x = u(gen);
  p.dout.resize(b * nq * dv);
  for (double& x : p.dout) x = u(gen);
  return p;
}

kernels::attention_args<double> args_for(const problem& p, std::vector<double>& out) {
  kernels::attention_args<double> a;
  a.q = p.q.data();
  a.k = p.k.data();
  a.v = p.v.data();
  out.assign(p.b * p.nq * p.dv, 0.0);
  a.out = out.data();
  a.nq = p.nq;
  a.nk = p.nk;
  a.dk = p.d;
  a.dv = p.dv;
  a.q_row = std::ptrdiff_t(p.d);
  a.q_col = 1;
  a.k_row = std::ptrdiff_t(p.d);
  a.k_col = 1;
  a.v_row = std::ptrdiff_t(p.dv);
  a.v_col = 1;
  a.out_row = std::ptrdiff_t(p.dv);
  a.out_col = 1;
  a.batch_rank = 1;
  a.batch_extents[0] = p.b;
  a.q_batch[0] = std::ptrdiff_t(p.nq * p.d);
  a.k_batch[0] = std::ptrdiff_t(p.nk * p.d);
  a.v_batch[0] = std::ptrdiff_t(p.nk * p.dv);
  a.out_batch[0] = std::ptrdiff_t(p.nq * p.dv);
  return a;
}

/// Two score stages: op0 then op1.
void set_stages(kernels::attention_args<double>& a, kernels::score_op op0, double v0, kernels::score_op op1,
                double v1) {
  a.n_stages = 2;
  a.stages[0].op = op0;
  a.stages[0].value = v0;
  a.stages[1].op = op1;
  a.stages[1].value = v1;
}

/// The padding cases' mask: key j is padding in batch b when j >= 60 - 7 b,
/// and batch 1's query 5 has every key masked (a NaN row).
bool padded(std::size_t b, std::size_t i, std::size_t j) { return j >= 60 - 7 * b || (b == 1 && i == 5); }

/// Stages `* 0.7` then the padding mask with -inf; returns the mask buffer
/// (keep it alive while `a` is used).
std::unique_ptr<bool[]> set_padding(kernels::attention_args<double>& a, const problem& p) {
  std::unique_ptr<bool[]> mask(new bool[p.b * p.nq * p.nk]);
  for (std::size_t b = 0; b < p.b; ++b)
    for (std::size_t i = 0; i < p.nq; ++i)
      for (std::size_t j = 0; j < p.nk; ++j) mask[(b * p.nq + i) * p.nk + j] = padded(b, i, j);
  set_stages(a, kernels::score_op::multiply, 0.7, kernels::score_op::mask, ninf);
  a.stages[1].mask = mask.get();
  a.stages[1].mask_batch[0] = std::ptrdiff_t(p.nq * p.nk);
  a.stages[1].mask_row = std::ptrdiff_t(p.nk);
  a.stages[1].mask_col = 1;
  return mask;
}

void close(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  std::size_t bad = 0;
  for (std::size_t n = 0; n < got.size(); ++n)
    if (!(std::abs(got[n] - want[n]) <= tol * (1 + std::abs(want[n])))) {
      if (bad < 5) UNSCOPED_INFO("at " << n << ": got " << got[n] << ", want " << want[n]);
      ++bad;
    }
  CHECK(bad == 0);
}

/// Runs the kernel forward, the row statistics and the backward on `a`
/// (stages set), and checks them against the plain loops and finite
/// differences. `nan_batch`: a batch index whose dV must be all NaN.
void check(problem& p, kernels::attention_args<double>& a, std::vector<double>& out, std::size_t nan_batch = ~0u) {
  std::vector<double> lse(p.b * p.nq, 7.0), lse_low(p.b * p.nq, 7.0), stats(p.b * p.nq);
  a.lse = lse.data();  // the forward saves the row statistics as it goes
  a.lse_low = lse_low.data();
  kernels::attention(a);
  a.lse = a.lse_low = nullptr;
  std::vector<double> ref_out, ref_lse;
  forward(p, p.q, p.k, p.v, ref_out, ref_lse);
  kernels::attention_row_stats(a, stats.data());  // the same statistic, recomputed key by key
  for (std::size_t n = 0; n < lse.size(); ++n) {
    if (std::isnan(ref_out[n * p.dv])) {
      CHECK(lse[n] == ninf);
      CHECK(stats[n] == ninf);
      CHECK(std::isnan(out[n * p.dv]));
    } else {
      CHECK(std::abs(lse[n] + lse_low[n] - ref_lse[n]) <= 1e-12 * (1 + std::abs(ref_lse[n])));
      CHECK(std::abs(stats[n] - ref_lse[n]) <= 1e-12 * (1 + std::abs(ref_lse[n])));
    }
  }
  std::vector<double> dq(p.q.size(), -7), dk(p.k.size(), -7), dv(p.v.size(), -7);
  kernels::attention_backward(
      kernels::attention_grad_args<double>{&a, lse.data(), p.dout.data(), dq.data(), dk.data(), dv.data(), lse_low.data()});
  close(dq, finite_difference(p, 0), 1e-6);
  close(dk, finite_difference(p, 1), 1e-6);
  if (nan_batch == ~0u) {
    close(dv, finite_difference(p, 2), 1e-6);
  } else {
    const std::vector<double> fd = finite_difference(p, 2);
    for (std::size_t n = 0; n < dv.size(); ++n) {
      if (n / (p.nk * p.dv) == nan_batch)
        CHECK(std::isnan(dv[n]));  // P of the NaN row times dO, as PyTorch
      else
        CHECK(std::abs(dv[n] - fd[n]) <= 1e-6 * (1 + std::abs(fd[n])));
    }
  }
}

DIMSUM_DIM(batch);
DIMSUM_DIM(q_posn);
DIMSUM_DIM(k_posn);
DIMSUM_DIM(d_head);
DIMSUM_DIM(d_value);

template <class TT>
std::vector<double> fixture_data(const std::string& name) {
  const TT t = golden::load<TT>("grad/" + name + ".npy");
  return std::vector<double>(t.data(), t.data() + t.size());
}

/// The kernel's backward of fixture case `name` (stages already in `a`, the
/// problem's data loaded from the fixture) against PyTorch's gradients; NaN
/// must match NaN.
void check_torch(const std::string& name, problem& p, kernels::attention_args<double>& a) {
  std::vector<double> lse(p.b * p.nq);
  a.lse = lse.data();
  kernels::attention(a);
  a.lse = nullptr;
  std::vector<double> dq(p.q.size()), dk(p.k.size()), dv(p.v.size());
  kernels::attention_backward(kernels::attention_grad_args<double>{&a, lse.data(), p.dout.data(), dq.data(), dk.data(), dv.data()});
  const std::vector<double> want[3] = {
      fixture_data<tensor<double, batch, q_posn, d_head>>(name + "_grad_q"),
      fixture_data<tensor<double, batch, k_posn, d_head>>(name + "_grad_k"),
      fixture_data<tensor<double, batch, k_posn, d_value>>(name + "_grad_v")};
  const std::vector<double>* got[3] = {&dq, &dk, &dv};
  for (int w = 0; w < 3; ++w) {
    INFO(name << " gradient " << "qkv"[w]);
    REQUIRE(got[w]->size() == want[w].size());
    std::size_t bad = 0;
    for (std::size_t n = 0; n < want[w].size(); ++n) {
      const double g = (*got[w])[n], e = want[w][n];
      if (std::isnan(e) ? !std::isnan(g) : !(std::abs(g - e) <= 1e-12 * (1 + std::abs(e)))) ++bad;
    }
    CHECK(bad == 0);
  }
}

problem from_fixture(const std::string& name) {
  problem p{2, 37, 70, 5, 3, {}, {}, {}, {}, {}};
  p.q = fixture_data<tensor<double, batch, q_posn, d_head>>(name + "_q");
  p.k = fixture_data<tensor<double, batch, k_posn, d_head>>(name + "_k");
  p.v = fixture_data<tensor<double, batch, k_posn, d_value>>(name + "_v");
  p.dout = fixture_data<tensor<double, batch, q_posn, d_value>>(name + "_r");
  REQUIRE(p.q.size() == 2 * 37 * 5);
  REQUIRE(p.k.size() == 2 * 70 * 5);
  REQUIRE(p.v.size() == 2 * 70 * 3);
  return p;
}

}  // namespace

TEST_CASE("fused attention backward equals PyTorch autograd of the unfused chain (float64 fixtures)") {
  for (double value : {ninf, -3.0}) {
    const std::string name = value == ninf ? "fused_attn_causal" : "fused_attn_causal_finite";
    problem p = from_fixture(name);
    std::vector<double> out;
    auto a = args_for(p, out);
    set_stages(a, kernels::score_op::multiply, 0.5, kernels::score_op::causal, value);
    check_torch(name, p, a);
  }
  {
    problem p = from_fixture("fused_attn_padding");
    std::vector<double> out;
    auto a = args_for(p, out);
    const auto mask = set_padding(a, p);
    check_torch("fused_attn_padding", p, a);
  }
}

TEST_CASE("fused attention backward: scale and causal -inf, tiles crossed and skipped") {
  problem p = make(2, 70, 70, 5, 3, 1);
  const double scale = 1 / std::sqrt(5.0);
  p.f = [=](double x, std::size_t, std::size_t i, std::size_t j) { return j > i ? ninf : x * scale; };
  std::vector<double> out;
  auto a = args_for(p, out);
  set_stages(a, kernels::score_op::multiply, scale, kernels::score_op::causal, ninf);
  check(p, a, out);
}

TEST_CASE("fused attention backward: causal with a finite masked value, divide after the mask") {
  problem p = make(1, 37, 67, 4, 6, 2);
  p.f = [](double x, std::size_t, std::size_t i, std::size_t j) { return (j > i ? -3.0 : x) / 2.0; };
  std::vector<double> out;
  auto a = args_for(p, out);
  set_stages(a, kernels::score_op::causal, -3.0, kernels::score_op::divide, 2.0);
  check(p, a, out);
}

TEST_CASE("fused attention backward: padding mask per batch, a fully masked (NaN) row") {
  problem p = make(2, 33, 66, 3, 2, 3);
  p.f = [](double x, std::size_t b, std::size_t i, std::size_t j) { return padded(b, i, j) ? ninf : x * 0.7; };
  std::vector<double> out;
  auto a = args_for(p, out);
  const auto mask = set_padding(a, p);
  check(p, a, out, 1);
}

namespace {

template <class Q, class K, class V>
auto causal_chain(const Q& q, const K& k, const V& v, double value) {
  return einsum<"batch q_posn k_posn, batch k_posn d_value -> batch q_posn d_value">(
      softmax<k_posn>(causal_mask<q_posn, k_posn>(
          einsum<"batch q_posn d_head, batch k_posn d_head -> batch q_posn k_posn">(q, k) * 0.5, value)),
      v);
}

}  // namespace

TEST_CASE("grad::fused_attention: one tape node; gradients equal PyTorch's and the unfused chain's") {
  using QT = tensor<double, batch, q_posn, d_head>;
  using KT = tensor<double, batch, k_posn, d_head>;
  using VT = tensor<double, batch, k_posn, d_value>;
  using OT = tensor<double, batch, q_posn, d_value>;
  for (double value : {ninf, -3.0}) {
    const std::string name = value == ninf ? "fused_attn_causal" : "fused_attn_causal_finite";
    INFO(name);
    const QT q0 = golden::load<QT>("grad/" + name + "_q.npy");
    const KT k0 = golden::load<KT>("grad/" + name + "_k.npy");
    const VT v0 = golden::load<VT>("grad/" + name + "_v.npy");
    const OT r = golden::load<OT>("grad/" + name + "_r.npy");
    static_assert(uses_fused_attention_v<decltype(causal_chain(q0, k0, v0, value))>);

    grad::tape fused;
    auto q = fused.watch(q0);
    auto k = fused.watch(k0);
    auto v = fused.watch(v0);
    const std::size_t leaves = fused.size();
    auto z = grad::fused_attention(q, k, v, [value](const auto& q, const auto& k, const auto& v) {
      return causal_chain(q, k, v, value);
    });
    CHECK(fused.size() == leaves + 1);  // one fused node: the scores never materialised
    fused.backward(sum<batch, q_posn, d_value>(z * r));
    golden::check(gradient(q), "grad/" + name + "_grad_q.npy", 1e-12, 1e-12);
    golden::check(gradient(k), "grad/" + name + "_grad_k.npy", 1e-12, 1e-12);
    golden::check(gradient(v), "grad/" + name + "_grad_v.npy", 1e-12, 1e-12);

    grad::tape unfused;
    auto uq = unfused.watch(q0);
    auto uk = unfused.watch(k0);
    auto uv = unfused.watch(v0);
    // on vars with the scores materialised (eval): one node per operation
    auto uz = einsum<"batch q_posn k_posn, batch k_posn d_value -> batch q_posn d_value">(
        softmax<k_posn>(causal_mask<q_posn, k_posn>(
            eval(einsum<"batch q_posn d_head, batch k_posn d_head -> batch q_posn k_posn">(uq, uk)) * 0.5, value)),
        uv);
    CHECK(unfused.size() > leaves + 1);
    unfused.backward(sum<batch, q_posn, d_value>(uz * r));
    const QT gq = gradient(q), ugq = gradient(uq);
    const KT gk = gradient(k), ugk = gradient(uk);
    const VT gv = gradient(v), ugv = gradient(uv);
    auto agree = [](const auto& a, const auto& b) {
      std::size_t bad = 0;
      for (std::size_t n = 0; n < a.size(); ++n)
        if (!(std::abs(a.data()[n] - b.data()[n]) <= 1e-12 * (1 + std::abs(b.data()[n])))) ++bad;
      return bad;
    };
    CHECK(agree(gq, ugq) == 0);
    CHECK(agree(gk, ugk) == 0);
    CHECK(agree(gv, ugv) == 0);
  }
}

namespace {

/// A float problem in the seed's layout [b][posn][h][d] (batch dims b and
/// h, rows strided by h * d), lengths crossing the packed kernel's query
/// (64 + a few) and key (64 to 96) tiles and head sizes that are not whole
/// micro-tiles; K and V either per head or shared by every head (stride 0,
/// their gradients summed over h).
struct seed_layout {
  std::size_t b, h, nq, nk, d, dv;
  bool shared_kv;
  std::vector<float> q, k, v, dout;
  std::size_t kv_heads() const { return shared_kv ? 1 : h; }
  std::size_t qi(std::size_t bi, std::size_t hi, std::size_t i, std::size_t x) const { return ((bi * nq + i) * h + hi) * d + x; }
  std::size_t ki(std::size_t bi, std::size_t hi, std::size_t j, std::size_t x) const {
    return ((bi * nk + j) * kv_heads() + (shared_kv ? 0 : hi)) * d + x;
  }
  std::size_t vi(std::size_t bi, std::size_t hi, std::size_t j, std::size_t c) const {
    return ((bi * nk + j) * kv_heads() + (shared_kv ? 0 : hi)) * dv + c;
  }
  std::size_t oi(std::size_t bi, std::size_t hi, std::size_t i, std::size_t c) const { return ((bi * nq + i) * h + hi) * dv + c; }
};

seed_layout make_seed(std::size_t b, std::size_t h, std::size_t nq, std::size_t nk, std::size_t d, std::size_t dv,
                      bool shared_kv, unsigned seed) {
  seed_layout p{b, h, nq, nk, d, dv, shared_kv, {}, {}, {}, {}};
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  p.q.resize(b * nq * h * d);
  p.k.resize(b * nk * p.kv_heads() * d);
  p.v.resize(b * nk * p.kv_heads() * dv);
  p.dout.resize(b * nq * h * dv);
  for (auto* vec : {&p.q, &p.k, &p.v, &p.dout})
    for (float& x : *vec) x = u(gen);
  return p;
}

kernels::attention_args<float> seed_args(const seed_layout& p, std::vector<float>& out) {
  kernels::attention_args<float> a;
  out.assign(p.b * p.nq * p.h * p.dv, 0.0f);
  a.q = p.q.data();
  a.k = p.k.data();
  a.v = p.v.data();
  a.out = out.data();
  a.nq = p.nq;
  a.nk = p.nk;
  a.dk = p.d;
  a.dv = p.dv;
  const auto kvh = std::ptrdiff_t(p.kv_heads());
  a.q_row = std::ptrdiff_t(p.h * p.d);
  a.k_row = kvh * std::ptrdiff_t(p.d);
  a.v_row = kvh * std::ptrdiff_t(p.dv);
  a.out_row = std::ptrdiff_t(p.h * p.dv);
  a.q_col = a.k_col = a.v_col = a.out_col = 1;
  a.batch_rank = 2;
  a.batch_extents[0] = p.b;
  a.batch_extents[1] = p.h;
  a.q_batch = {std::ptrdiff_t(p.nq * p.h * p.d), std::ptrdiff_t(p.d)};
  a.k_batch = {std::ptrdiff_t(p.nk) * a.k_row, p.shared_kv ? 0 : std::ptrdiff_t(p.d)};
  a.v_batch = {std::ptrdiff_t(p.nk) * a.v_row, p.shared_kv ? 0 : std::ptrdiff_t(p.dv)};
  a.out_batch = {std::ptrdiff_t(p.nq * p.h * p.dv), std::ptrdiff_t(p.dv)};
  return a;
}

/// The backward in plain loops and double, from its definition: P the
/// softmax of the staged scores, dP = dO Vᵀ, D_i = sum_j P_ij dP_ij,
/// dS = g P (dP - D) (0 where `masked`), dQ = dS K, dK = dSᵀ Q, dV = Pᵀ dO.
using bias_fn = std::function<double(std::size_t, std::size_t, std::size_t)>;  // (flat batch index, i, j)

void plain_backward(const seed_layout& p, double g,
                    const std::function<bool(std::size_t, std::size_t, std::size_t)>& masked, double masked_value,
                    std::vector<double>& dq, std::vector<double>& dk, std::vector<double>& dv,
                    const bias_fn& bias = nullptr) {
  dq.assign(p.q.size(), 0.0);
  dk.assign(p.k.size(), 0.0);
  dv.assign(p.v.size(), 0.0);
  std::vector<double> P(p.nq * p.nk), dP(p.nq * p.nk);
  for (std::size_t bi = 0; bi < p.b; ++bi)
    for (std::size_t hi = 0; hi < p.h; ++hi) {
      for (std::size_t i = 0; i < p.nq; ++i) {
        double m = ninf;
        for (std::size_t j = 0; j < p.nk; ++j) {
          double s = 0;
          for (std::size_t x = 0; x < p.d; ++x) s += double(p.q[p.qi(bi, hi, i, x)]) * p.k[p.ki(bi, hi, j, x)];
          P[i * p.nk + j] = masked(bi, i, j) ? masked_value : s * g + (bias ? bias(bi * p.h + hi, i, j) : 0.0);
          m = std::max(m, P[i * p.nk + j]);
        }
        double l = 0;
        for (std::size_t j = 0; j < p.nk; ++j) l += (P[i * p.nk + j] = std::exp(P[i * p.nk + j] - m));
        double dsum = 0;
        for (std::size_t j = 0; j < p.nk; ++j) {
          P[i * p.nk + j] /= l;
          double s = 0;
          for (std::size_t c = 0; c < p.dv; ++c) s += double(p.dout[p.oi(bi, hi, i, c)]) * p.v[p.vi(bi, hi, j, c)];
          dP[i * p.nk + j] = s;
          dsum += P[i * p.nk + j] * s;
        }
        for (std::size_t j = 0; j < p.nk; ++j) {
          const double pr = P[i * p.nk + j];
          const double ds = masked(bi, i, j) ? 0.0 : g * pr * (dP[i * p.nk + j] - dsum);
          for (std::size_t x = 0; x < p.d; ++x) {
            dq[p.qi(bi, hi, i, x)] += ds * p.k[p.ki(bi, hi, j, x)];
            dk[p.ki(bi, hi, j, x)] += ds * p.q[p.qi(bi, hi, i, x)];
          }
          for (std::size_t c = 0; c < p.dv; ++c) dv[p.vi(bi, hi, j, c)] += pr * p.dout[p.oi(bi, hi, i, c)];
        }
      }
    }
}

/// Runs the kernel's forward (saving lse) and backward on 1 and 2 threads
/// (the results must be identical: each batch index runs the same code on
/// one thread) and checks them against `plain_backward`: |error| <= 1e-4
/// (1 + |want|), float rounding of sums of ~200 terms of size ~1 (the
/// largest error seen is about ten times smaller).
void check_seed(const seed_layout& p, kernels::attention_args<float>& a, double g,
                const std::function<bool(std::size_t, std::size_t, std::size_t)>& masked, double masked_value,
                const bias_fn& bias = nullptr) {
  std::vector<float> lse(p.b * p.h * p.nq), lse_low(lse.size());
  a.lse = lse.data();
  a.lse_low = lse_low.data();
  kernels::attention(a);
  a.lse = a.lse_low = nullptr;
  std::vector<float> got[2][3];
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    auto& r = got[threads - 1];
    r[0].assign(p.q.size(), -7.0f);
    r[1].assign(p.k.size(), -7.0f);
    r[2].assign(p.v.size(), -7.0f);
    kernels::attention_backward(
        kernels::attention_grad_args<float>{&a, lse.data(), p.dout.data(), r[0].data(), r[1].data(), r[2].data(),
                                            lse_low.data()});
  }
  set_num_threads(0);
  std::vector<double> want[3];
  plain_backward(p, g, masked, masked_value, want[0], want[1], want[2], bias);
  for (int w = 0; w < 3; ++w) {
    INFO("gradient " << "qkv"[w]);
    CHECK(got[0][w] == got[1][w]);
    std::vector<double> as_double(got[0][w].begin(), got[0][w].end());
    close(as_double, want[w], 1e-4);
  }
}

}  // namespace

TEST_CASE("fused attention backward, float, seed layout: scale and causal -inf over several query and key tiles") {
  const seed_layout p = make_seed(2, 3, 157, 157, 40, 24, false, 4);
  std::vector<float> out;
  auto a = seed_args(p, out);
  const double scale = 1 / std::sqrt(40.0);
  a.n_stages = 2;
  a.stages[0].op = kernels::score_op::multiply;
  a.stages[0].value = float(scale);
  a.stages[1].op = kernels::score_op::causal;
  a.stages[1].value = -std::numeric_limits<float>::infinity();
  check_seed(p, a, double(float(scale)), [](std::size_t, std::size_t i, std::size_t j) { return j > i; }, ninf);
}

TEST_CASE("fused attention backward, float: causal with more keys than queries (key tiles no query reaches)") {
  const seed_layout p = make_seed(1, 2, 50, 230, 16, 8, false, 6);
  std::vector<float> out;
  auto a = seed_args(p, out);
  a.n_stages = 1;
  a.stages[0].op = kernels::score_op::causal;
  a.stages[0].value = -std::numeric_limits<float>::infinity();
  check_seed(p, a, 1.0, [](std::size_t, std::size_t i, std::size_t j) { return j > i; }, ninf);
}

namespace {
/// ALiBi-style bias of the window test: -slope_h * (i + 5 - j), slope 0.25 (h + 1).
void alibi(const void*, std::size_t bi, std::size_t i, std::size_t j0, std::size_t n, float* out) {
  const double slope = 0.25 * double(bi % 3 + 1);
  for (std::size_t x = 0; x < n; ++x) out[x] = float(-slope * (double(i) + 5.0 - double(j0 + x)));
}
}  // namespace

TEST_CASE("fused attention backward, float: sliding window with an offset and an additive bias") {
  const seed_layout p = make_seed(2, 3, 150, 160, 24, 20, false, 7);
  std::vector<float> out;
  auto a = seed_args(p, out);
  const double scale = 0.2;
  a.n_stages = 2;
  a.stages[0].op = kernels::score_op::multiply;
  a.stages[0].value = float(scale);
  a.stages[1].op = kernels::score_op::causal;  // query i at position i + 5 keeps keys (i + 5 - 40, i + 5]
  a.stages[1].value = -std::numeric_limits<float>::infinity();
  a.stages[1].window = 40;
  a.stages[1].offset = 5;
  a.bias.add = alibi;
  a.bias.at = 1;  // after the scale, before the mask
  check_seed(
      p, a, double(float(scale)),
      [](std::size_t, std::size_t i, std::size_t j) { return j > i + 5 || i + 5 - j >= 40; }, ninf,
      [](std::size_t bi, std::size_t i, std::size_t j) {
        float b;
        alibi(nullptr, bi, i, j, 1, &b);
        return double(b);
      });
}

TEST_CASE("fused attention backward, float: K and V shared by every head, padding mask with a finite value") {
  const seed_layout p = make_seed(2, 3, 80, 201, 33, 17, true, 5);
  std::vector<float> out;
  auto a = seed_args(p, out);
  // key j is padding in batch b when j >= 190 - 50 b; the mask broadcasts over heads and queries
  std::unique_ptr<bool[]> mask(new bool[p.b * p.nk]);
  for (std::size_t b = 0; b < p.b; ++b)
    for (std::size_t j = 0; j < p.nk; ++j) mask[b * p.nk + j] = j >= 190 - 50 * b;
  a.n_stages = 2;
  a.stages[0].op = kernels::score_op::divide;
  a.stages[0].value = 4.0f;
  a.stages[1].op = kernels::score_op::mask;
  a.stages[1].value = -5.0f;
  a.stages[1].mask = mask.get();
  a.stages[1].mask_batch = {std::ptrdiff_t(p.nk), 0};
  a.stages[1].mask_row = 0;
  a.stages[1].mask_col = 1;
  check_seed(p, a, 0.25, [&](std::size_t b, std::size_t, std::size_t j) { return mask[b * p.nk + j]; }, -5.0);
}

TEST_CASE("fused attention backward: query rows masked entirely with a huge finite fill equal the unfused softmax") {
  // -1e20 in double: m + log(l) rounds log(l) away, so the backward must
  // read the row statistic's low part (lse_low) to give P = 1 / n there.
  problem p = make(2, 70, 45, 4, 3, 11);
  auto hidden = [](std::size_t b, std::size_t i, std::size_t j) { return j >= 40 - 6 * b || i % 9 == 4; };
  p.f = [&](double x, std::size_t b, std::size_t i, std::size_t j) { return hidden(b, i, j) ? -1e20 : x * 0.7; };
  std::vector<double> out;
  auto a = args_for(p, out);
  std::unique_ptr<bool[]> mask(new bool[p.b * p.nq * p.nk]);
  for (std::size_t b = 0; b < p.b; ++b)
    for (std::size_t i = 0; i < p.nq; ++i)
      for (std::size_t j = 0; j < p.nk; ++j) mask[(b * p.nq + i) * p.nk + j] = hidden(b, i, j);
  set_stages(a, kernels::score_op::multiply, 0.7, kernels::score_op::mask, -1e20);
  a.stages[1].mask = mask.get();
  a.stages[1].mask_batch[0] = std::ptrdiff_t(p.nq * p.nk);
  a.stages[1].mask_row = std::ptrdiff_t(p.nk);
  a.stages[1].mask_col = 1;
  check(p, a, out);
}

TEST_CASE("fused attention backward, float: 2 queries, 3 keys, ones, one query row masked with -1e9 (hand computed)") {
  // Both rows' weights are 1/3 (row 1: three equal fills), so with dO = 1:
  // out = 1, dV_j = 1/3 + 1/3 = 2/3, and dS = P (dP - D) = 0: dQ = dK = 0.
  const std::vector<float> q(2, 1.0f), k(3, 1.0f), v(3, 1.0f), dout(2, 1.0f);
  const bool mask[6] = {false, false, false, true, true, true};
  for (bool with_low : {true, false}) {
    std::vector<float> out(2, -7.0f), lse(2), lse_low(2, -7.0f);
    kernels::attention_args<float> a;
    a.q = q.data();
    a.k = k.data();
    a.v = v.data();
    a.out = out.data();
    a.nq = 2;
    a.nk = 3;
    a.dk = a.dv = 1;
    a.q_row = a.k_row = a.v_row = a.out_row = 1;
    a.q_col = a.k_col = a.v_col = a.out_col = 1;
    a.n_stages = 1;
    a.stages[0].op = kernels::score_op::mask;
    a.stages[0].value = -1e9f;
    a.stages[0].mask = mask;
    a.stages[0].mask_row = 3;
    a.stages[0].mask_col = 1;
    a.lse = lse.data();
    a.lse_low = lse_low.data();
    if (with_low) {
      kernels::attention(a);  // the forward saves both parts
    } else {
      a.lse = a.lse_low = nullptr;
      kernels::attention(a);
      kernels::attention_row_stats(a, lse.data(), lse_low.data());  // the score loops compute them alike
    }
    a.lse = a.lse_low = nullptr;
    CHECK(out[0] == Approx(1.0f));
    CHECK(out[1] == Approx(1.0f));
    CHECK(lse[1] == -1e9f);                                // log(3) rounds away ...
    CHECK(lse_low[1] == Approx(std::log(3.0)).epsilon(1e-6));  // ... into the low part
    std::vector<float> dq(2, -7.0f), dk(3, -7.0f), dv(3, -7.0f);
    kernels::attention_backward(kernels::attention_grad_args<float>{&a, lse.data(), dout.data(), dq.data(), dk.data(),
                                                                    dv.data(), lse_low.data()});
    for (float x : dv) CHECK(x == Approx(2.0 / 3.0).epsilon(1e-6));
    for (float x : dq) CHECK(x == 0.0f);
    for (float x : dk) CHECK(x == 0.0f);
  }
}

TEST_CASE("fused attention backward, float, seed layout: padding and whole query rows masked with -1e9") {
  const seed_layout p = make_seed(2, 2, 90, 130, 16, 8, false, 12);
  std::vector<float> out;
  auto a = seed_args(p, out);
  auto hidden = [](std::size_t b, std::size_t i, std::size_t j) { return j >= 120 - 40 * b || i % 7 == 3; };
  std::unique_ptr<bool[]> mask(new bool[p.b * p.nq * p.nk]);
  for (std::size_t b = 0; b < p.b; ++b)
    for (std::size_t i = 0; i < p.nq; ++i)
      for (std::size_t j = 0; j < p.nk; ++j) mask[(b * p.nq + i) * p.nk + j] = hidden(b, i, j);
  a.n_stages = 2;
  a.stages[0].op = kernels::score_op::multiply;
  a.stages[0].value = 0.25f;
  a.stages[1].op = kernels::score_op::mask;
  a.stages[1].value = -1e9f;
  a.stages[1].mask = mask.get();
  a.stages[1].mask_batch = {std::ptrdiff_t(p.nq * p.nk), 0};  // shared by the heads
  a.stages[1].mask_row = std::ptrdiff_t(p.nk);
  a.stages[1].mask_col = 1;
  check_seed(p, a, 0.25, hidden, -1e9);
}

namespace {

template <class Q, class K, class V, class M>
auto padded_chain(const Q& q, const K& k, const V& v, const M& hidden) {
  return einsum<"batch q_posn k_posn, batch k_posn d_value -> batch q_posn d_value">(
      softmax<k_posn>(masked_fill(
          einsum<"batch q_posn d_head, batch k_posn d_head -> batch q_posn k_posn">(q, k) * 0.5f, hidden, -1e9f)),
      v);
}

using FQ = tensor<float, batch, q_posn, d_head>;
using FK = tensor<float, batch, k_posn, d_head>;
using FV = tensor<float, batch, k_posn, d_value>;
using FO = tensor<float, batch, q_posn, d_value>;
using FM = tensor<bool, batch, q_posn, k_posn>;

/// The output and the gradients of q, k, v of padded_chain under
/// sum(z * r): on one fused node, or on the unfused chain of var operations.
struct padded_run {
  FO out;
  FQ gq;
  FK gk;
  FV gv;
};
padded_run run_padded(bool fused, const FQ& q0, const FK& k0, const FV& v0, const FM& hidden, const FO& r) {
  static_assert(uses_fused_attention_v<decltype(padded_chain(q0, k0, v0, hidden))>);
  grad::tape t;
  auto q = t.watch(q0);
  auto k = t.watch(k0);
  auto v = t.watch(v0);
  const std::size_t leaves = t.size();
  grad::var<float, batch, q_posn, d_value> z;
  if (fused)
    z = grad::fused_attention(q, k, v, [&hidden](const auto& q, const auto& k, const auto& v) {
      return padded_chain(q, k, v, hidden);
    });
  else  // the scores materialised (eval): the chain recorded unfused
    z = einsum<"batch q_posn k_posn, batch k_posn d_value -> batch q_posn d_value">(
        softmax<k_posn>(masked_fill(
            eval(einsum<"batch q_posn d_head, batch k_posn d_head -> batch q_posn k_posn">(q, k)) * 0.5f, hidden, -1e9f)),
        v);
  CHECK((t.size() == leaves + 1) == fused);
  t.backward(sum<batch, q_posn, d_value>(z * r));
  return {z.value(), gradient(q), gradient(k), gradient(v)};
}

/// Elements that differ by more than float rounding; NaN must meet NaN.
template <class X>
std::size_t differ(const X& got, const X& want) {
  std::size_t bad = 0;
  for (std::size_t n = 0; n < want.size(); ++n) {
    const float g = got.data()[n], w = want.data()[n];
    if (std::isnan(w) ? !std::isnan(g) : !(std::abs(g - w) <= 2e-5f * (1 + std::abs(w)))) {
      if (bad < 5) UNSCOPED_INFO("at " << n << ": got " << g << ", want " << w);
      ++bad;
    }
  }
  return bad;
}

}  // namespace

TEST_CASE("grad::fused_attention, float: a query row masked with -1e9f equals the unfused chain (hand computed)") {
  FQ q(batch{1}, q_posn{2}, d_head{1});
  FK k(batch{1}, k_posn{3}, d_head{1});
  FV v(batch{1}, k_posn{3}, d_value{1});
  FO r(batch{1}, q_posn{2}, d_value{1});
  FM hidden(batch{1}, q_posn{2}, k_posn{3});
  std::fill_n(q.data(), 2, 1.0f);
  std::fill_n(k.data(), 3, 1.0f);
  std::fill_n(v.data(), 3, 1.0f);
  std::fill_n(r.data(), 2, 1.0f);
  for (std::size_t j = 0; j < 3; ++j) {
    hidden(batch{0}, q_posn{0}, k_posn{j}) = false;
    hidden(batch{0}, q_posn{1}, k_posn{j}) = true;  // seed 003's padding of a query row
  }
  for (bool fused : {true, false}) {
    INFO((fused ? "fused" : "unfused"));
    const padded_run g = run_padded(fused, q, k, v, hidden, r);
    for (std::size_t j = 0; j < 3; ++j) CHECK(g.gv.data()[j] == Approx(2.0 / 3.0).epsilon(1e-6));
    for (std::size_t i = 0; i < 2; ++i) CHECK(g.gq.data()[i] == 0.0f);
    for (std::size_t j = 0; j < 3; ++j) CHECK(g.gk.data()[j] == 0.0f);
  }
}

TEST_CASE("grad::fused_attention, float: padding, rows masked with -1e9f, NaN and inf under masked keys") {
  constexpr std::size_t B = 2, NQ = 70, NK = 40, D = 5, C = 3;
  FQ q(batch{B}, q_posn{NQ}, d_head{D});
  FK k(batch{B}, k_posn{NK}, d_head{D});
  FV v(batch{B}, k_posn{NK}, d_value{C});
  FO r(batch{B}, q_posn{NQ}, d_value{C});
  FM hidden(batch{B}, q_posn{NQ}, k_posn{NK});
  std::mt19937 gen(13);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float* x = q.data(); x != q.data() + q.size(); ++x) *x = u(gen);
  for (float* x = k.data(); x != k.data() + k.size(); ++x) *x = u(gen);
  for (float* x = v.data(); x != v.data() + v.size(); ++x) *x = u(gen);
  for (float* x = r.data(); x != r.data() + r.size(); ++x) *x = u(gen);
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t i = 0; i < NQ; ++i)
      for (std::size_t j = 0; j < NK; ++j) hidden(batch{b}, q_posn{i}, k_posn{j}) = j >= 30 + 5 * b || i % 9 == 4;
  // keys every query masks: non-finite scores there are replaced by the fill
  k(batch{0}, k_posn{35}, d_head{0}) = std::numeric_limits<float>::quiet_NaN();
  k(batch{1}, k_posn{38}, d_head{2}) = std::numeric_limits<float>::infinity();
  const padded_run f = run_padded(true, q, k, v, hidden, r), w = run_padded(false, q, k, v, hidden, r);
  for (std::size_t n = 0; n < f.out.size(); ++n) CHECK(std::isfinite(f.out.data()[n]));
  CHECK(differ(f.out, w.out) == 0);
  CHECK(differ(f.gq, w.gq) == 0);  // 0 * NaN reaches dQ = dS K on both paths
  CHECK(differ(f.gk, w.gk) == 0);
  CHECK(differ(f.gv, w.gv) == 0);
  // keys 30.. of batch 0 are masked for every query: only the rows masked
  // whole reach them, each with weight 1 / NK, so dV there is sum r / NK
  for (std::size_t j = 30; j < NK; ++j)
    for (std::size_t c = 0; c < C; ++c) {
      double want = 0;
      for (std::size_t i = 4; i < NQ; i += 9) want += r(batch{0}, q_posn{i}, d_value{c}) / double(NK);
      CHECK(f.gv(batch{0}, k_posn{j}, d_value{c}) == Approx(want).epsilon(1e-5).margin(1e-6));
    }
}
