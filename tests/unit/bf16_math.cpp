// Element-wise math on bf16: every function of a bf16 tensor keeps the
// value type bf16 (computed in float32, rounded once), checked against the
// function in double on the same (bf16-exact) inputs; and soft-capped
// attention (c tanh(s / c)) on bf16 tensors and bf16 vars runs on the fused
// kernel, its forward and gradients checked against plain float64 loops and
// central finite differences of them.

#include <dimsum/dimsum.hpp>
#include <dimsum/grad/grad.hpp>
#include <dimsum/ops/math.hpp>

#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <catch2/catch.hpp>

namespace {

using dimsum::bf16;
using dimsum::tensor;

DIMSUM_DIM(row);
DIMSUM_DIM(col);
DIMSUM_DIM(heads);
DIMSUM_DIM(q_posn);
DIMSUM_DIM(k_posn);
DIMSUM_DIM(d_head);

// bf16 has 8 significant bits: one rounding of an exact value is within
// 2^-9 of it (relative), and the float32 value rounded to bf16 adds at most
// 2^-24 more; 2^-8 leaves room for the float32 function's own few ulps.
constexpr double bf16_rel = 1.0 / 256;

template <class E>
void check_unary(const char* what, const tensor<bf16, row, col>& x, E expr, double (*ref)(double),
                 int roundings = 1) {
  INFO(what);
  static_assert(std::is_same_v<dimsum::value_type_of_t<decltype(expr)>, bf16>, "a function of bf16 stays bf16");
  const tensor<bf16, row, col> got = expr;
  int bad = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double in = double(float(x.data()[i]));
    const double want = ref(in), have = double(float(got.data()[i]));
    if (std::isnan(want) ? !std::isnan(have) : std::abs(have - want) > (roundings + 1) * bf16_rel / 2 * std::abs(want) + 1e-30) {
      if (++bad < 5) WARN(what << "(" << in << ") = " << have << ", want " << want);
    }
  }
  CHECK(bad == 0);
}

TEST_CASE("math functions of bf16 tensors are bf16, within one bf16 rounding of double", "[bf16][math]") {
  auto x = tensor<bf16, row, col>::from_extents({4, 33});
  auto pos = tensor<bf16, row, col>::from_extents({4, 33});
  std::mt19937 gen(5);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  for (std::size_t i = 0; i < x.size(); ++i) {
    x.data()[i] = bf16(u(gen));
    pos.data()[i] = bf16(0.05f + std::abs(u(gen)));
  }
  x.data()[0] = bf16(0.0f);
  x.data()[1] = bf16(std::numeric_limits<float>::infinity());
  x.data()[2] = bf16(-std::numeric_limits<float>::infinity());
  x.data()[3] = bf16(std::numeric_limits<float>::quiet_NaN());
  check_unary("exp", x, dimsum::exp(x), [](double a) { return std::exp(a); });
  check_unary("tanh", x, dimsum::tanh(x), [](double a) { return std::tanh(a); });
  check_unary("sigmoid", x, dimsum::sigmoid(x), [](double a) { return 1 / (1 + std::exp(-a)); });
  check_unary("erf", x, dimsum::erf(x), [](double a) { return std::erf(a); });
  check_unary("silu", x, dimsum::silu(x), [](double a) { return a / (1 + std::exp(-a)); });
  check_unary("expm1", x, dimsum::expm1(x), [](double a) { return std::expm1(a); });
  check_unary("sin", pos, dimsum::sin(pos), [](double a) { return std::sin(a); });
  check_unary("cos", pos, dimsum::cos(pos), [](double a) { return std::cos(a); });
  check_unary("abs", x, dimsum::abs(x), [](double a) { return std::abs(a); });
  check_unary("floor", x, dimsum::floor(x), [](double a) { return std::floor(a); });
  check_unary("ceil", x, dimsum::ceil(x), [](double a) { return std::ceil(a); });
  check_unary("round", x, dimsum::round(x), [](double a) { return std::nearbyint(a); });
  check_unary("log", pos, dimsum::log(pos), [](double a) { return std::log(a); });
  check_unary("log1p", pos, dimsum::log1p(pos), [](double a) { return std::log1p(a); });
  check_unary("sqrt", pos, dimsum::sqrt(pos), [](double a) { return std::sqrt(a); });
  check_unary("rsqrt", pos, dimsum::rsqrt(pos), [](double a) { return 1 / std::sqrt(a); });
  check_unary("pow(x, 1.5)", pos, dimsum::pow(pos, 1.5f), [](double a) { return std::pow(a, 1.5); });
  // three operations, each rounded to bf16 (as PyTorch's eager bf16 ops)
  check_unary("soft-capping 5 tanh(x / 5)", x, 5.0f * dimsum::tanh(x / 5.0f),
              [](double a) { return 5 * std::tanh(a / 5); }, 3);

  const tensor<bool, row, col> nan = dimsum::isnan(x), fin = dimsum::isfinite(x);
  CHECK(nan.data()[3]);
  CHECK_FALSE(nan.data()[1]);
  CHECK_FALSE(fin.data()[1]);
  CHECK(fin.data()[0]);
}

// Soft-capped causal attention in double: z[h, i, :] = sum_j P[h, i, j] v[h, j, :]
// with P = softmax_j of c tanh(q.k scale / c) over j <= i.
struct inputs {
  std::size_t h, n, d;
  std::vector<double> q, k, v, w;  // w: the weights of the loss sum(z * w)
};

double loss(const inputs& in, double cap, double scale) {
  double total = 0;
  const std::size_t n = in.n, d = in.d;
  for (std::size_t h = 0; h < in.h; ++h)
    for (std::size_t i = 0; i < n; ++i) {
      std::vector<double> s(i + 1);
      double m = -std::numeric_limits<double>::infinity();
      for (std::size_t j = 0; j <= i; ++j) {
        double dot = 0;
        for (std::size_t e = 0; e < d; ++e) dot += in.q[(h * n + i) * d + e] * in.k[(h * n + j) * d + e];
        s[j] = cap * std::tanh(dot * scale / cap);
        m = std::max(m, s[j]);
      }
      double l = 0;
      for (double& x : s) l += (x = std::exp(x - m));
      for (std::size_t e = 0; e < d; ++e) {
        double z = 0;
        for (std::size_t j = 0; j <= i; ++j) z += s[j] / l * in.v[(h * n + j) * d + e];
        total += z * in.w[(h * n + i) * d + e];
      }
    }
  return total;
}

// d loss / d x_i by central differences (the loss is smooth in every input).
std::vector<double> finite_differences(inputs in, std::vector<double> inputs::*x, double cap, double scale) {
  std::vector<double> g((in.*x).size());
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double x0 = (in.*x)[i], eps = 1e-5;
    (in.*x)[i] = x0 + eps;
    const double up = loss(in, cap, scale);
    (in.*x)[i] = x0 - eps;
    const double down = loss(in, cap, scale);
    (in.*x)[i] = x0;
    g[i] = (up - down) / (2 * eps);
  }
  return g;
}

template <class T>
std::size_t count_far(const T& got, const std::vector<double>& want, double tol) {
  double scale = 0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  std::size_t bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    if (!(std::abs(double(float(got.data()[i])) - want[i]) <= tol * scale)) ++bad;
  return bad;
}

TEST_CASE("soft-capped attention on bf16 tensors and bf16 vars: fused, against float64 loops", "[bf16][attention]") {
  using QT = tensor<bf16, heads, q_posn, d_head>;
  using KT = tensor<bf16, heads, k_posn, d_head>;
  const std::size_t h = 2, n = 19, d = 8;
  const double cap = 2.0, scale = 1.0 / std::sqrt(double(d));
  inputs in{h, n, d, {}, {}, {}, {}};
  std::mt19937 gen(17);
  std::normal_distribution<float> g(0.0f, 1.0f);
  // every input bf16-exact, so the float64 reference sees the kernel's numbers
  auto draw = [&](std::vector<double>& to, float sd) {
    to.resize(h * n * d);
    for (double& x : to) x = double(float(bf16(sd * g(gen))));
  };
  draw(in.q, 2.0f);  // scores of a few units: the cap bends them
  draw(in.k, 2.0f);
  draw(in.v, 1.0f);
  draw(in.w, 1.0f);
  auto to_tensor = [&](auto t, const std::vector<double>& x) {
    for (std::size_t i = 0; i < x.size(); ++i) t.data()[i] = bf16(float(x[i]));
    return t;
  };
  const QT q = to_tensor(QT::from_extents({h, n, d}), in.q);
  const KT k = to_tensor(KT::from_extents({h, n, d}), in.k);
  const KT v = to_tensor(KT::from_extents({h, n, d}), in.v);
  const QT w = to_tensor(QT::from_extents({h, n, d}), in.w);
  const float c = float(cap), sc = float(scale);
  const float ninf = -std::numeric_limits<float>::infinity();
  // one expression: a lazy expression returned from the lambda owns its
  // temporaries (named locals would be referenced, and dangle)
  auto attention = [&](const auto& q, const auto& k, const auto& v) {
    return dimsum::einsum<"heads q_posn k_posn, heads k_posn d_head -> heads q_posn d_head">(
        dimsum::softmax<k_posn>(dimsum::causal_mask<q_posn, k_posn>(
            c * dimsum::tanh(dimsum::einsum<"heads q_posn d_head, heads k_posn d_head -> heads q_posn k_posn">(q, k) * sc / c),
            ninf)),
        v);
  };

  // the forward: sum(z * w) and each z against the loops (z = d loss / d w)
  const std::vector<double> dw = finite_differences(in, &inputs::w, cap, scale);
  auto z = attention(q, k, v);
  static_assert(dimsum::uses_fused_attention_v<decltype(z)>, "soft-capping fuses on bf16 tensors");
  const QT zt = z;
  // inputs bf16-exact, sums in float32, the output rounded to bf16 once
  CHECK(count_far(zt, dw, 2 * bf16_rel) == 0);

  dimsum::grad::tape t;
  auto vq = t.watch(q);
  auto vk = t.watch(k);
  auto vv = t.watch(v);
  const std::size_t leaves = t.size();
  auto vz = attention(vq, vk, vv);
  static_assert(dimsum::uses_fused_attention_v<decltype(vz)>, "soft-capping fuses on bf16 vars");
  CHECK(t.size() == leaves + 1);  // one fused node: no p x p scores on the tape
  t.backward(dimsum::sum<heads, q_posn, d_head>(vz * w));
  // dq, dk, dv rounded to bf16 once from float32 sums over n keys
  CHECK(count_far(dimsum::gradient(vq), finite_differences(in, &inputs::q, cap, scale), 4 * bf16_rel) == 0);
  CHECK(count_far(dimsum::gradient(vk), finite_differences(in, &inputs::k, cap, scale), 4 * bf16_rel) == 0);
  CHECK(count_far(dimsum::gradient(vv), finite_differences(in, &inputs::v, cap, scale), 4 * bf16_rel) == 0);
}

}  // namespace
