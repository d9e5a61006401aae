// ops/math.hpp and ops/map.hpp: every element-wise function over named
// tensors against the C++ standard library evaluated in double (a plain
// loop), on ordinary, extreme and non-finite inputs, through each
// evaluation path: assigned directly (vectorised for exp, log, tanh,
// sigmoid, erf, gelu, gelu_tanh, silu), inside a larger element-wise tree
// (per element), and into a destination of another dim order (strided
// rows). Where PyTorch differs from the C library the expected values are
// PyTorch 1.13's, hand-copied from tests/reference/check_math_semantics.py's
// output.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "support.hpp"

namespace {
DIMSUM_DIM(batch);
DIMSUM_DIM(feat);
DIMSUM_DIM(other);
}  // namespace

using namespace dimsum;

namespace {

constexpr float inf = std::numeric_limits<float>::infinity();
const float nan_f = std::numeric_limits<float>::quiet_NaN();

// Inputs: specials, extremes and an ordinary grid; 3 x 59 values, so rows
// have a vector body and a scalar tail on every vector width.
std::vector<float> inputs() {
  using L = std::numeric_limits<float>;
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, -0.5f, 1.5f, 2.5f, -2.5f, 3.0f, 20.0f, -20.0f, 88.0f,
                          -88.0f, 89.0f, -100.0f, 1e30f, -1e30f, L::max(), L::lowest(), L::min(), -L::min(),
                          L::denorm_min(), -L::denorm_min(), L::min() / 3, 1e-7f, inf, -inf, nan_f};
  for (int i = 0; v.size() < 3 * 59; ++i) v.push_back(float(i - 74) * 0.137f + 0.01f);
  return v;
}

using x_t = tensor<float, batch, feat>;

x_t make_x() {
  x_t x(batch{3}, feat{59});
  const auto v = inputs();
  std::copy(v.begin(), v.end(), x.data());
  return x;
}

double ulp_of(float ref) {
  const float a = std::fabs(ref);
  const float next = std::nextafter(a, inf);
  return std::isfinite(next) ? double(next - a) : double(a - std::nextafter(a, 0.0f));
}

// got within `ulps` of the double reference rounded to float (NaN and
// infinities exactly); `abs_eps` adds an absolute allowance of abs_eps *
// eps * |x| (formulas that cancel, see tests/unit/vector_math.cpp).
bool matches(float got, double ref_d, float x, double ulps, double abs_eps) {
  const float ref = static_cast<float>(ref_d);
  if (std::isnan(ref)) return std::isnan(got);
  if (std::isinf(ref)) return got == ref;
  if (!std::isfinite(got)) return false;
  const double err = std::fabs(double(got) - ref_d);
  return err <= ulps * ulp_of(ref) || err <= abs_eps * double(std::numeric_limits<float>::epsilon()) * std::fabs(double(x));
}

// Checks y (any dim order) against ref(x) element by element.
template <class Y>
void check_values(const std::string& what, const x_t& x, const Y& y, const std::function<double(double)>& ref, double ulps,
                  double abs_eps = 0) {
  std::size_t bad = 0;
  for (std::size_t b = 0; b < 3; ++b)
    for (std::size_t f = 0; f < 59; ++f) {
      const float xv = x(batch{b}, feat{f});
      const float got = y(batch{b}, feat{f});
      if (!matches(got, ref(double(xv)), xv, ulps, abs_eps)) {
        ++bad;
        FAIL_CHECK(what << "(" << xv << ") = " << got << ", reference " << ref(double(xv)));
      }
    }
  CHECK(bad == 0);
}

// Each path: assigned directly, inside a tree (`* 1.0f` is exact), and into
// the other dim order.
#define CHECK_UNARY(fn, ref, ulps, abs_eps)                                   \
  do {                                                                        \
    const x_t x = make_x();                                                   \
    x_t direct = fn(x);                                                       \
    x_t in_tree = fn(x) * 1.0f;                                               \
    tensor<float, feat, batch> transposed = fn(x);                            \
    check_values(#fn " direct", x, direct, ref, ulps, abs_eps);               \
    check_values(#fn " in a tree", x, in_tree, ref, ulps, abs_eps);           \
    check_values(#fn " transposed", x, transposed, ref, ulps, abs_eps);       \
  } while (0)

double sigmoid_ref(double v) { return 1.0 / (1.0 + std::exp(-v)); }
double gelu_ref(double v) { return v / 2 * (1 + std::erf(v / std::sqrt(2.0))); }
double gelu_tanh_ref(double v) {
  return v / 2 * (1 + std::tanh(std::sqrt(2 / std::acos(-1.0)) * (v + 0.044715 * v * v * v)));
}

}  // namespace

TEST_CASE("math: exp, log, tanh, sigmoid, erf within 4 ulp of double on every path", "[math]") {
  CHECK_UNARY(exp, [](double v) { return std::exp(v); }, 4, 0);
  CHECK_UNARY(log, [](double v) { return std::log(v); }, 4, 0);
  CHECK_UNARY(tanh, [](double v) { return std::tanh(v); }, 4, 0);
  CHECK_UNARY(sigmoid, sigmoid_ref, 4, 0);
  CHECK_UNARY(erf, [](double v) { return std::erf(v); }, 4, 0);
}

TEST_CASE("math: gelu, gelu_tanh, silu within 4 ulp or 4 eps |x| of double", "[math]") {
  CHECK_UNARY(gelu, gelu_ref, 4, 4);
  CHECK_UNARY(gelu_tanh, gelu_tanh_ref, 4, 4);
  CHECK_UNARY(silu, [](double v) { return v * sigmoid_ref(v); }, 4, 4);
}

TEST_CASE("math: log1p, expm1, sin, cos, sqrt, rsqrt within 2 ulp of double", "[math]") {
  CHECK_UNARY(log1p, [](double v) { return std::log1p(v); }, 2, 0);
  CHECK_UNARY(expm1, [](double v) { return std::expm1(v); }, 2, 0);
  CHECK_UNARY(sin, [](double v) { return std::sin(v); }, 2, 0);
  CHECK_UNARY(cos, [](double v) { return std::cos(v); }, 2, 0);
  CHECK_UNARY(sqrt, [](double v) { return std::sqrt(v); }, 2, 0);
  CHECK_UNARY(rsqrt, [](double v) { return 1.0 / std::sqrt(v); }, 2, 0);
}

TEST_CASE("math: abs, floor, ceil, round, sign, relu exactly", "[math]") {
  CHECK_UNARY(abs, [](double v) { return std::fabs(v); }, 0, 0);
  CHECK_UNARY(floor, [](double v) { return std::floor(v); }, 0, 0);
  CHECK_UNARY(ceil, [](double v) { return std::ceil(v); }, 0, 0);
  CHECK_UNARY(round, [](double v) { return std::nearbyint(v); }, 0, 0);
  // torch.sign: 0 for NaN (the C library has no sign; copysign keeps NaN).
  CHECK_UNARY(sign, [](double v) { return v > 0 ? 1.0 : v < 0 ? -1.0 : 0.0; }, 0, 0);
  CHECK_UNARY(relu, [](double v) { return v < 0 ? 0.0 : v; }, 0, 0);
}

TEST_CASE("math: PyTorch's values where it differs from the C library", "[math]") {
  // x and the expected values: tests/reference/check_math_semantics.py, torch 1.13.
  tensor<double, feat> x(feat{10});
  const double nan = std::numeric_limits<double>::quiet_NaN(), dinf = std::numeric_limits<double>::infinity();
  const double xs[] = {nan, dinf, -dinf, 0.0, -0.0, 2.5, -2.5, 0.5, 1.5, -0.5};
  std::copy(std::begin(xs), std::end(xs), x.data());
  auto check = [&](const char* what, const auto& got, const std::vector<double>& want) {
    for (std::size_t i = 0; i < 10; ++i) {
      INFO(what << " at x = " << xs[i]);
      const double g = got(feat{i});
      if (std::isnan(want[i]))
        CHECK(std::isnan(g));
      else if (std::isinf(want[i]) || want[i] == 0)
        CHECK(g == want[i]);
      else
        CHECK(g == Approx(want[i]).epsilon(4e-16));
    }
  };
  check("sign", eval(sign(x)), {0.0, 1.0, -1.0, 0.0, 0.0, 1.0, -1.0, 1.0, 1.0, -1.0});
  check("round", eval(round(x)), {nan, dinf, -dinf, 0.0, -0.0, 2.0, -2.0, 0.0, 2.0, -0.0});
  check("relu", eval(relu(x)), {nan, dinf, 0.0, 0.0, -0.0, 2.5, 0.0, 0.5, 1.5, 0.0});
  check("rsqrt", eval(rsqrt(x)), {nan, 0.0, nan, dinf, -dinf, 0.6324555320336759, nan, 1.414213562373095, 0.8164965809277261, nan});
  check("gelu", eval(gelu(x)),
        {nan, dinf, nan, 0.0, -0.0, 2.4844758366855597, -0.015524163314440398, 0.34573123063700656, 1.399789198096713,
         -0.15426876936299344});
  check("gelu_tanh", eval(gelu_tanh(x)),
        {nan, dinf, nan, 0.0, -0.0, 2.484915733910001, -0.015084266089998577, 0.34571400982514394, 1.3995715769802328,
         -0.15428599017485606});
  check("silu", eval(silu(x)),
        {nan, dinf, nan, 0.0, -0.0, 2.3103545499468914, -0.18964545005310887, 0.3112296656009273, 1.2263617142904655,
         -0.1887703343990727});
  check("sigmoid", eval(sigmoid(x)),
        {nan, 1.0, 0.0, 0.5, 0.5, 0.9241418199787566, 0.07585818002124355, 0.6224593312018546, 0.8175744761936437,
         0.3775406687981454});
  check("clamp(x, -1, 1)", eval(clamp(x, -1.0, 1.0)), {nan, 1.0, -1.0, 0.0, -0.0, 1.0, -1.0, 0.5, 1.0, -0.5});
  check("clamp(x, nan, 1)", eval(clamp(x, nan, 1.0)), std::vector<double>(10, nan));
  check("clamp(x, -1, nan)", eval(clamp(x, -1.0, nan)), std::vector<double>(10, nan));
  check("clamp(x, 2, 1)", eval(clamp(x, 2.0, 1.0)), {nan, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0});
  tensor<double, feat> y(feat{10});
  const double ys[] = {1.0, nan, nan, -0.0, 0.0, nan, -3, 1, 1, 1};
  std::copy(std::begin(ys), std::end(ys), y.data());
  check("minimum", eval(minimum(x, y)), {nan, nan, nan, -0.0, 0.0, nan, -3.0, 0.5, 1.0, -0.5});
  check("maximum", eval(maximum(x, y)), {nan, nan, nan, -0.0, 0.0, nan, -2.5, 1.0, 1.5, 1.0});
  // torch.pow with a tensor exponent is std::pow; with the Python scalar
  // 0.5 it becomes sqrt (pow(-inf, 0.5) = NaN there, inf here and in C).
  check("pow(x, 0.5)", eval(pow(x, 0.5)),
        {nan, dinf, dinf, 0.0, 0.0, 1.5811388300841898, nan, 0.7071067811865476, 1.224744871391589, nan});
  check("pow(x, 0)", eval(pow(x, 0.0)), std::vector<double>(10, 1.0));
  // Signs of zero that PyTorch gives: round(-0.5) = -0, relu(-0) = -0,
  // sign(-0) = +0. (Its minimum/maximum of 0 and -0 differ between its own
  // vector and scalar paths, so no sign is promised there.)
  CHECK(std::signbit(eval(round(x))(feat{9})));
  CHECK(std::signbit(eval(relu(x))(feat{4})));
  CHECK(!std::signbit(eval(sign(x))(feat{4})));
}

TEST_CASE("math: round is half to even like torch.round", "[math]") {
  tensor<float, feat> x(feat{9});
  const float xs[] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 3.5f, 1e7f + 1.0f, 0.49999997f};
  std::copy(std::begin(xs), std::end(xs), x.data());
  tensor<float, feat> r = round(x);
  const float want[] = {0.0f, 2.0f, 2.0f, -0.0f, -2.0f, -2.0f, 4.0f, 1e7f + 1.0f, 0.0f};
  for (std::size_t i = 0; i < 9; ++i) CHECK(r(feat{i}) == want[i]);
}

TEST_CASE("math: isnan, isinf, isfinite give bool tensors", "[math]") {
  const x_t x = make_x();
  tensor<bool, batch, feat> n = isnan(x), i = isinf(x), f = isfinite(x);
  static_assert(std::is_same_v<value_type_of_t<decltype(isnan(x))>, bool>);
  for (std::size_t b = 0; b < 3; ++b)
    for (std::size_t k = 0; k < 59; ++k) {
      const float v = x(batch{b}, feat{k});
      CHECK(n(batch{b}, feat{k}) == std::isnan(v));
      CHECK(i(batch{b}, feat{k}) == std::isinf(v));
      CHECK(f(batch{b}, feat{k}) == std::isfinite(v));
    }
}

TEST_CASE("math: pow, minimum, maximum, clamp broadcast by name", "[math]") {
  const x_t x = make_x();
  tensor<float, feat> e(feat{59});
  test::fill_pattern(e, 0.21, -2.0);
  tensor<float, batch, feat> p = pow(x, e), lo = minimum(e, x), hi = maximum(x, e);
  tensor<float, batch, feat> c = clamp(x, -e, e);
  tensor<float, batch, feat> two_x = pow(2.0f, x);
  for (std::size_t b = 0; b < 3; ++b)
    for (std::size_t k = 0; k < 59; ++k) {
      const float v = x(batch{b}, feat{k}), w = e(feat{k});
      INFO("x = " << v << ", e = " << w);
      CHECK(matches(p(batch{b}, feat{k}), std::pow(double(v), double(w)), v, 2, 0));
      CHECK(matches(two_x(batch{b}, feat{k}), std::pow(2.0, double(v)), v, 2, 0));
      const double m = std::isnan(v) ? v : std::fmin(double(v), double(w));
      const double M = std::isnan(v) ? v : std::fmax(double(v), double(w));
      CHECK(matches(lo(batch{b}, feat{k}), m, v, 0, 0));
      CHECK(matches(hi(batch{b}, feat{k}), M, v, 0, 0));
      const double cl = std::isnan(v) ? v : std::min(std::max(double(v), double(-w)), double(w));
      CHECK(matches(c(batch{b}, feat{k}), cl, v, 0, 0));
    }
}

TEST_CASE("math: pow, minimum, maximum, clamp of an integer tensor with floating scalars", "[math]") {
  // torch promotes: pow(ids, 0.5) = sqrt, clamp(ids, 0.5, 2.5) = [0.5, 1, 2, 2.5].
  tensor<std::int64_t, feat> ids(feat{4});
  for (std::size_t i = 0; i < 4; ++i) ids(feat{i}) = std::int64_t(i);
  CHECK(test::flat(eval(pow(ids, 0.5))) == std::vector<double>{0.0, 1.0, std::sqrt(2.0), std::sqrt(3.0)});
  CHECK(test::flat(eval(pow(2.0, ids))) == std::vector<double>{1.0, 2.0, 4.0, 8.0});
  CHECK(test::flat(eval(minimum(ids, 1.5))) == std::vector<double>{0.0, 1.0, 1.5, 1.5});
  CHECK(test::flat(eval(maximum(0.5, ids))) == std::vector<double>{0.5, 1.0, 2.0, 3.0});
  auto c = eval(clamp(ids, 0.5, 2.5));
  static_assert(std::is_same_v<value_type_of_t<decltype(c)>, double>);
  CHECK(test::flat(c) == std::vector<double>{0.5, 1.0, 2.0, 2.5});
  auto ci = eval(clamp(ids, 1, 2));
  static_assert(std::is_same_v<value_type_of_t<decltype(ci)>, std::int64_t>);
  CHECK(test::flat(ci) == std::vector<double>{1.0, 1.0, 2.0, 2.0});
}

TEST_CASE("math: shared dims of different extents throw shape_error naming the dim", "[math]") {
  tensor<float, batch, feat> x(batch{2}, feat{3});
  tensor<float, feat> y(feat{4});
  CHECK_THROWS_WITH(minimum(x, y), Catch::Contains("feat") && Catch::Contains("3") && Catch::Contains("4"));
  CHECK_THROWS_AS(map([](float a, float b) { return a + b; }, x, y), shape_error);
}

TEST_CASE("map: a user's function over one, two and three operands, broadcast by name", "[math][map]") {
  tensor<float, batch, feat> x(batch{2}, feat{5});
  tensor<float, feat> s(feat{5});
  tensor<double, other, batch> z(other{3}, batch{2});
  test::fill_pattern(x);
  test::fill_pattern(s, 0.3, 0.1);
  test::fill_pattern(z, 0.7, -0.4);
  auto leaky = [](float v, float slope) { return v > 0 ? v : slope * v; };
  tensor<float, batch, feat> a = map(leaky, x, s);
  auto sq = eval(map([](float v) { return v * v; }, x));
  auto three = eval(map([](float v, float w, double u) { return double(v) * w + u; }, x, s, z));
  static_assert(has_dims<decltype(three), batch, feat, other>);
  static_assert(std::is_same_v<value_type_of_t<decltype(three)>, double>);
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t f = 0; f < 5; ++f) {
      const float v = x(batch{b}, feat{f}), w = s(feat{f});
      CHECK(a(batch{b}, feat{f}) == (v > 0 ? v : w * v));
      CHECK(sq(batch{b}, feat{f}) == v * v);
      for (std::size_t o = 0; o < 3; ++o)
        CHECK(three(batch{b}, feat{f}, other{o}) == double(v) * w + z(other{o}, batch{b}));
    }
  // A capturing lambda is copied into the lazy expression.
  float k = 3.0f;
  auto times_k = map([k](float v) { return v * k; }, x);
  k = 100.0f;
  tensor<float, batch, feat> t = times_k;
  CHECK(t(batch{1}, feat{2}) == x(batch{1}, feat{2}) * 3.0f);
  // A bool-valued function gives a bool tensor.
  tensor<bool, batch, feat> pos = map([](float v) { return v > 0; }, x);
  CHECK(pos(batch{0}, feat{0}) == (x(batch{0}, feat{0}) > 0));
}
