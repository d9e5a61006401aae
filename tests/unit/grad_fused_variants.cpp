// grad::fused_attention through window masks and ALiBi biases: the
// gradients of q, k and v of one fused tape node
// against
//   - PyTorch float64 autograd of the unfused chain (fixtures written by
//     tests/reference/make_grad_fixtures.py, fused_attention_variants());
//   - central finite differences in double of a plain-loops forward;
//   - the same chain written on vars without fused_attention (one node per
//     operation, the scores materialised), on 1 and 2 threads.
// 40 queries and 140 keys cross the forward's (64 x 128) and the backward's
// tiles; the cases have a window with an offset (-inf, key tiles skipped on
// both sides), a window with a finite value whose last rows keep no key,
// ALiBi after a key/value cache with left padding (NaN rows), and ALiBi
// added after a causal mask. The bias is a constant: f builds it from
// tensors, and no gradient flows into the slopes.

#include <dimsum/grad/grad.hpp>
#include <dimsum/ops/alibi.hpp>
#include <dimsum/ops/window_mask.hpp>

#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "arch_paths.hpp"
#include "golden.hpp"

namespace {

using namespace dimsum;

DIMSUM_DIM(batch);
DIMSUM_DIM(q_posn);
DIMSUM_DIM(k_posn);
DIMSUM_DIM(nheads);
DIMSUM_DIM(d_head);
DIMSUM_DIM(d_value);

using QT = tensor<double, batch, q_posn, nheads, d_head>;
using KT = tensor<double, batch, k_posn, nheads, d_head>;
using VT = tensor<double, batch, k_posn, nheads, d_value>;
using OT = tensor<double, batch, q_posn, nheads, d_value>;

constexpr std::size_t B = 2, NQ = 40, NK = 140, H = 2;
constexpr double ninf = -std::numeric_limits<double>::infinity();

// Unfused: the score einsum evaluated first (on vars, eval records it, so
// the chain runs one node per operation).
template <bool Unfused, class Q, class K>
auto scores(const Q& q, const K& k) {
  if constexpr (Unfused)
    return eval(einsum<"batch q_posn nheads d_head, batch k_posn nheads d_head -> batch nheads q_posn k_posn">(q, k)) * 0.5;
  else
    return einsum<"batch q_posn nheads d_head, batch k_posn nheads d_head -> batch nheads q_posn k_posn">(q, k) * 0.5;
}
// The named form: a where puts its condition's dims first, so the scores'
// dim order varies with the spelling.
template <class P, class V>
auto attend(P&& p, const V& v) {
  return einsum<batch, q_posn, nheads, d_value>(softmax<k_posn>(std::forward<P>(p)), v);
}

bool in_window(std::size_t i, std::size_t j, std::size_t w, std::size_t offset) {
  return j <= i + offset && i + offset - j < w;
}

/// The ALiBi slopes of the fixtures' two heads (the paper's 2^(-8 (h + 1) / n)).
double slope(std::size_t h) { return h == 0 ? 1.0 / 16 : 1.0 / 256; }

/// Batch 1 pads keys j < 110 (left padding): its rows 0..9 keep no key.
bool padded(std::size_t b, std::size_t j) { return b == 1 && j < 110; }

/// One case: its chain on tensors or vars, and the same as a function of
/// the raw score (plain code, for the finite differences).
struct variant {
  std::string name;
  std::function<double(double, std::size_t, std::size_t, std::size_t, std::size_t)> f;  // (raw, b, h, i, j)
};

const tensor<bool, batch, k_posn>& keep() {
  static const tensor<bool, batch, k_posn> t = [] {
    tensor<bool, batch, k_posn> k(batch{B}, k_posn{NK});
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t j = 0; j < NK; ++j) k(batch{b}, k_posn{j}) = !padded(b, j);
    return k;
  }();
  return t;
}

// The four chains, each callable on tensors (fused) and on vars (unfused).
template <bool Unfused = false>
struct window_chain {
  template <class Q, class K, class V>
  auto operator()(const Q& q, const K& k, const V& v) const {
    return attend(window_mask<q_posn, k_posn>(scores<Unfused>(q, k), 20, ninf, 100), v);
  }
};
template <bool Unfused = false>
struct window_finite_chain {
  template <class Q, class K, class V>
  auto operator()(const Q& q, const K& k, const V& v) const {
    return attend(window_mask<q_posn, k_posn>(scores<Unfused>(q, k), 20, -3.0, 125), v);
  }
};
template <bool Unfused = false>
struct alibi_chain {
  template <class Q, class K, class V>
  auto operator()(const Q& q, const K& k, const V& v) const {
    static const auto bias = alibi<double>(nheads{H}, q_posn{NQ}, k_posn{NK}, 100);
    return attend(
        where(keep(), window_mask<q_posn, k_posn>(scores<Unfused>(q, k) + bias, kernels::unbounded_window, ninf, 100), ninf), v);
  }
};
template <bool Unfused = false>
struct alibi_after_mask_chain {
  template <class Q, class K, class V>
  auto operator()(const Q& q, const K& k, const V& v) const {
    static const auto bias = outer(alibi_slopes<double>(nheads{H}), relative_positions<double>(q_posn{NQ}, k_posn{NK}));
    return attend(causal_mask<q_posn, k_posn>(scores<Unfused>(q, k), ninf) + bias, v);
  }
};

const variant window_case{"fused_attn_window", [](double x, std::size_t, std::size_t, std::size_t i, std::size_t j) {
                            return in_window(i, j, 20, 100) ? x * 0.5 : ninf;
                          }};
const variant window_finite_case{"fused_attn_window_finite",
                                 [](double x, std::size_t, std::size_t, std::size_t i, std::size_t j) {
                                   return in_window(i, j, 20, 125) ? x * 0.5 : -3.0;
                                 }};
const variant alibi_case{"fused_attn_alibi", [](double x, std::size_t b, std::size_t h, std::size_t i, std::size_t j) {
                           if (j > i + 100 || padded(b, j)) return ninf;
                           return x * 0.5 + slope(h) * (double(j) - double(i + 100));
                         }};
const variant alibi_after_mask_case{"fused_attn_alibi_after_mask",
                                    [](double x, std::size_t, std::size_t h, std::size_t i, std::size_t j) {
                                      return j > i ? ninf : x * 0.5 + slope(h) * (double(j) - double(i));
                                    }};

/// sum r * out over the query rows [i0, i1) of batch b and head h whose
/// output is not NaN, out by plain loops in double on the row-major data
/// (a NaN row is constant for q and k: masked_fill's backward gives it 0,
/// as PyTorch's).
double head_loss(const variant& c, const QT& q, const KT& k, const VT& v, const OT& r, std::size_t b, std::size_t h,
                 std::size_t i0, std::size_t i1) {
  const std::size_t D = q.extent<d_head>(), C = v.extent<d_value>();
  const double *qd = q.data(), *kd = k.data(), *vd = v.data(), *rd = r.data();
  double total = 0;
  std::vector<double> w(NK);
  for (std::size_t i = i0; i < i1; ++i) {
    double m = ninf;
    for (std::size_t j = 0; j < NK; ++j) {
      double raw = 0;
      for (std::size_t d = 0; d < D; ++d) raw += qd[((b * NQ + i) * H + h) * D + d] * kd[((b * NK + j) * H + h) * D + d];
      w[j] = c.f(raw, b, h, i, j);
      m = std::max(m, w[j]);
    }
    double l = 0;
    for (std::size_t j = 0; j < NK; ++j) l += (w[j] = std::exp(w[j] - m));  // all -inf: NaN
    for (std::size_t x = 0; x < C; ++x) {
      double o = 0;
      for (std::size_t j = 0; j < NK; ++j) o += w[j] / l * vd[((b * NK + j) * H + h) * C + x];
      if (!std::isnan(o)) total += o * rd[((b * NQ + i) * H + h) * C + x];
    }
  }
  return total;
}

/// Central differences (step 1e-6) of the loss sum r * out along every
/// element of the input `which` (0: q, 1: k, 2: v); only the rows an
/// element reaches are recomputed (one query row for q, its batch and
/// head for k and v).
std::vector<double> finite_difference(const variant& c, QT q, KT k, VT v, const OT& r, int which) {
  const std::size_t D = q.extent<d_head>(), C = v.extent<d_value>();
  double* x = which == 0 ? q.data() : which == 1 ? k.data() : v.data();
  const std::size_t n = which == 0 ? q.size() : which == 1 ? k.size() : v.size();
  const std::size_t inner = which == 2 ? C : D;  // elements per (position, head)
  std::vector<double> g(n);
  const double step = 1e-6;
  for (std::size_t e = 0; e < n; ++e) {
    const std::size_t h = e / inner % H, pos = e / inner / H;  // pos: b * NQ + i, or b * NK + j
    const std::size_t b = pos / (which == 0 ? NQ : NK);
    const std::size_t i0 = which == 0 ? pos % NQ : 0, i1 = which == 0 ? i0 + 1 : NQ;
    const double x0 = x[e];
    x[e] = x0 + step;
    const double up = head_loss(c, q, k, v, r, b, h, i0, i1);
    x[e] = x0 - step;
    const double down = head_loss(c, q, k, v, r, b, h, i0, i1);
    x[e] = x0;
    g[e] = (up - down) / (2 * step);
  }
  return g;
}

/// Elements of got not within tol (1 + |want|) of want; NaN must meet NaN.
template <class G>
std::size_t mismatches(const G& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  std::size_t bad = 0;
  for (std::size_t n = 0; n < want.size(); ++n) {
    const double g = got.data()[n], w = want[n];
    if (std::isnan(w) ? !std::isnan(g) : !(std::abs(g - w) <= tol * (1 + std::abs(w)))) {
      if (bad < 5) UNSCOPED_INFO("at " << n << ": got " << g << ", want " << w);
      ++bad;
    }
  }
  return bad;
}
template <class G>
std::vector<double> as_vector(const G& t) {
  return std::vector<double>(t.data(), t.data() + t.size());
}

template <template <bool> class Chain>
void check_case(const variant& c, bool nan_rows) {
  const Chain<false> chain{};
  INFO(c.name);
  const QT q0 = golden::load<QT>("grad/" + c.name + "_q.npy");
  const KT k0 = golden::load<KT>("grad/" + c.name + "_k.npy");
  const VT v0 = golden::load<VT>("grad/" + c.name + "_v.npy");
  const OT r = golden::load<OT>("grad/" + c.name + "_r.npy");
  REQUIRE(q0.extent<q_posn>() == NQ);
  REQUIRE(k0.extent<k_posn>() == NK);
  STATIC_REQUIRE(uses_fused_attention_v<decltype(chain(q0, k0, v0))>);
  STATIC_REQUIRE(fused_attention_is_differentiable_v<decltype(chain(q0, k0, v0))>);

  // the fused node, on 1 and 2 threads (the same gradients)
  QT fq[2];
  KT fk[2];
  VT fv[2];
  for (int threads : {1, 2}) {
    test::thread_count_guard guard(threads);
    grad::tape t;
    auto q = t.watch(q0);
    auto k = t.watch(k0);
    auto v = t.watch(v0);
    const std::size_t leaves = t.size();
    auto z = grad::fused_attention(q, k, v, [&](const auto& q, const auto& k, const auto& v) { return chain(q, k, v); });
    CHECK(t.size() == leaves + 1);  // one node: the scores never materialised
    t.backward(sum<batch, q_posn, nheads, d_value>(z * r));
    fq[threads - 1] = gradient(q);
    fk[threads - 1] = gradient(k);
    fv[threads - 1] = gradient(v);
  }
  CHECK(mismatches(fq[1], as_vector(fq[0]), 0) == 0);
  CHECK(mismatches(fk[1], as_vector(fk[0]), 0) == 0);
  CHECK(mismatches(fv[1], as_vector(fv[0]), 0) == 0);

  // PyTorch float64 autograd of the unfused chain
  golden::check(fq[0], "grad/" + c.name + "_grad_q.npy", 1e-12, 1e-12);
  golden::check(fk[0], "grad/" + c.name + "_grad_k.npy", 1e-12, 1e-12);
  golden::check(fv[0], "grad/" + c.name + "_grad_v.npy", 1e-12, 1e-12);

  // the same chain on vars, one node per operation
  grad::tape u;
  auto uq = u.watch(q0);
  auto uk = u.watch(k0);
  auto uv = u.watch(v0);
  auto uz = Chain<true>{}(uq, uk, uv);
  CHECK(u.size() > 4);
  u.backward(sum<batch, q_posn, nheads, d_value>(uz * r));
  CHECK(mismatches(fq[0], as_vector(gradient(uq)), 1e-12) == 0);
  CHECK(mismatches(fk[0], as_vector(gradient(uk)), 1e-12) == 0);
  CHECK(mismatches(fv[0], as_vector(gradient(uv)), 1e-12) == 0);

  // central finite differences of the plain-loops forward
  CHECK(mismatches(fq[0], finite_difference(c, q0, k0, v0, r, 0), 1e-6) == 0);
  CHECK(mismatches(fk[0], finite_difference(c, q0, k0, v0, r, 1), 1e-6) == 0);
  const std::vector<double> fd_v = finite_difference(c, q0, k0, v0, r, 2);
  std::size_t nan_v = 0, bad_v = 0;
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t j = 0; j < NK; ++j)
      for (std::size_t h = 0; h < H; ++h)
        for (std::size_t x = 0; x < v0.extent<d_value>(); ++x) {
          const double g = fv[0](batch{b}, k_posn{j}, nheads{h}, d_value{x});
          const double w = fd_v[((b * NK + j) * H + h) * v0.extent<d_value>() + x];
          if (std::isnan(g))
            ++nan_v;  // a NaN row's weights reach every key of its (batch, head), as in PyTorch
          else if (!(std::abs(g - w) <= 1e-6 * (1 + std::abs(w))))
            ++bad_v;
        }
  CHECK(bad_v == 0);
  // NaN exactly for batch 1's keys in the padded case (both heads), else none
  CHECK(nan_v == (nan_rows ? NK * H * v0.extent<d_value>() : 0));
}

}  // namespace

TEST_CASE("grad::fused_attention through a sliding window with an offset (-inf; key tiles skipped on both sides)",
          "[grad][fused][variants]") {
  check_case<window_chain>(window_case, false);
}

TEST_CASE("grad::fused_attention through a window with a finite masked value; rows that keep no key",
          "[grad][fused][variants]") {
  check_case<window_finite_chain>(window_finite_case, false);
}

TEST_CASE("grad::fused_attention through ALiBi after a key/value cache, with left padding (NaN rows)",
          "[grad][fused][variants]") {
  // the kernel computes the bias itself (slope, row, iota: no callback)
  STATIC_REQUIRE(plan::fusion::affine_bias<decltype(alibi<double>(nheads{H}, q_posn{NQ}, k_posn{NK})), double>::ok);
  check_case<alibi_chain>(alibi_case, true);
}

TEST_CASE("grad::fused_attention through ALiBi added after a causal mask", "[grad][fused][variants]") {
  check_case<alibi_after_mask_chain>(alibi_after_mask_case, false);
}
