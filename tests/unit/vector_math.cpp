// kernels/vector_math.hpp: every vectorised function, float and double, on
// ordinary, extreme (huge, tiny, denormal) and non-finite inputs, checked
// on the vector body and on the scalar tail against an independent
// reference computed one precision up (double for float, long double for
// double) with the C++ standard library.
//
// Tolerances (stated here, in units in the last place of the result type):
//   exp, log, tanh, sigmoid, erf: within 4 ulp of the reference (double
//     erf and gelu run std::erf, not xsimd's: has_vector_math);
//   gelu, gelu_tanh, silu: within 4 ulp, or within 4 eps |x| absolute (the formulas x/2 (1 + erf(..)) and x / (1 + e^-x)
//     lose relative accuracy where 1 + erf(..) cancels, for the standard
//     library and PyTorch alike);
//   vector body and scalar tail: each within the tolerance above, and the
//     two within twice it of each other.
// Non-finite results must match exactly (NaN where the reference is NaN,
// the same infinity where it is infinite).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <limits>
#include <numbers>
#include <sstream>
#include <type_traits>
#include <string>
#include <vector>

#include <dimsum/kernels/vector_math.hpp>

namespace {

namespace dk = dimsum::kernels;
using dk::math_fn;

template <class R>
R reference(math_fn f, R x) {
  switch (f) {
    case math_fn::exp: return std::exp(x);
    case math_fn::log: return std::log(x);
    case math_fn::tanh: return std::tanh(x);
    case math_fn::sigmoid: return R(1) / (R(1) + std::exp(-x));
    case math_fn::erf: return std::erf(x);
    case math_fn::gelu: return x / 2 * (1 + std::erf(x / std::sqrt(R(2))));
    case math_fn::gelu_tanh: {
      const R pi = std::acos(R(-1));
      return x / 2 * (1 + std::tanh(std::sqrt(2 / pi) * (x + R(0.044715) * x * x * x)));
    }
    case math_fn::silu: return x / (R(1) + std::exp(-x));
  }
  return R(0);
}

const char* fn_name(math_fn f) {
  switch (f) {
    case math_fn::exp: return "exp";
    case math_fn::log: return "log";
    case math_fn::tanh: return "tanh";
    case math_fn::sigmoid: return "sigmoid";
    case math_fn::erf: return "erf";
    case math_fn::gelu: return "gelu";
    case math_fn::gelu_tanh: return "gelu_tanh";
    case math_fn::silu: return "silu";
  }
  return "?";
}

// The reference one precision up.
template <class T>
using wider_t = std::conditional_t<std::is_same_v<T, float>, double, long double>;

template <class T>
T ulp_of(T ref) {
  const T a = std::fabs(ref);
  const T next = std::nextafter(a, std::numeric_limits<T>::infinity());
  return std::isfinite(next) ? next - a : a - std::nextafter(a, T(0));
}

// The stated tolerance of f on T, in ulp (see the top of this file).
template <class T>
double tolerance(math_fn) {
  return 4.0;
}

// Whether `got` is within the stated tolerance of the wide reference of x.
template <class T>
bool close(math_fn f, T x, T got, double scale, std::string& why) {
  using W = wider_t<T>;
  const W ref_w = reference<W>(f, static_cast<W>(x));
  const T ref = static_cast<T>(ref_w);  // the correctly rounded value, or near it
  std::ostringstream os;
  os.precision(std::numeric_limits<T>::max_digits10);
  os << fn_name(f) << "(" << x << ") = " << got << ", reference " << ref;
  why = os.str();
  if (std::isnan(ref)) return std::isnan(got);
  if (std::isinf(ref)) return got == ref;
  if (!std::isfinite(got)) {
    // The reference rounds to the largest finite value: a result that
    // overflowed to infinity is one ulp past it.
    return false;
  }
  const W err = std::fabs(static_cast<W>(got) - ref_w);
  const W tol = static_cast<W>(tolerance<T>(f) * scale);
  const W tol_ulp = tol * static_cast<W>(ulp_of(ref));
  if (err <= tol_ulp) return true;
  const bool formula = f == math_fn::gelu || f == math_fn::gelu_tanh || f == math_fn::silu;
  return formula && err <= tol * std::numeric_limits<T>::epsilon() * std::fabs(static_cast<W>(x));
}

template <class T>
std::vector<T> inputs() {
  using L = std::numeric_limits<T>;
  std::vector<T> v = {T(0),  -T(0),  T(1),     T(-1),    T(0.5),   T(-0.5), T(2.5),  T(-2.5), T(0.1),
                      T(-0.1), T(3),  T(-3),    T(7.25),  T(-7.25), T(20),   T(-20),  T(88),   T(-88),
                      T(89),  T(-104), T(-87.5), T(-100), T(-708.5), T(-740), T(700),  T(-700),  T(710),   T(-745), T(1e-3), T(-1e-3), T(1e-7),
                      T(1e30), T(-1e30), L::max(), L::lowest(), L::min(), -L::min(), L::denorm_min(),
                      -L::denorm_min(), L::min() / T(3), L::epsilon(), L::infinity(), -L::infinity(),
                      L::quiet_NaN(), -L::quiet_NaN()};
  // An ordinary grid over [-12, 12] that crosses every branch of the
  // polynomial fits (|x| < 5/8 in tanh, 0.65 and 2.2 in erf, ...).
  for (int i = -480; i <= 480; ++i) v.push_back(T(i) / T(40) + T(1) / T(97));
  return v;
}

// Each input fills an array of 2W - 1 values: the first W run through the
// vector body, the other W - 1 through the scalar tail.
template <class T, class Arch>
void check_function(math_fn f) {
  constexpr std::size_t W = xsimd::batch<T, Arch>::size;
  static_assert(W > 1);
  const std::size_t n = 2 * W - 1;
  std::vector<T> in(n), out(n);
  std::size_t failures = 0;
  for (const T x : inputs<T>()) {
    std::fill(in.begin(), in.end(), x);
    switch (f) {
      case math_fn::exp: dk::math_contiguous<math_fn::exp, Arch>(in.data(), out.data(), n); break;
      case math_fn::log: dk::math_contiguous<math_fn::log, Arch>(in.data(), out.data(), n); break;
      case math_fn::tanh: dk::math_contiguous<math_fn::tanh, Arch>(in.data(), out.data(), n); break;
      case math_fn::sigmoid: dk::math_contiguous<math_fn::sigmoid, Arch>(in.data(), out.data(), n); break;
      case math_fn::erf: dk::math_contiguous<math_fn::erf, Arch>(in.data(), out.data(), n); break;
      case math_fn::gelu: dk::math_contiguous<math_fn::gelu, Arch>(in.data(), out.data(), n); break;
      case math_fn::gelu_tanh: dk::math_contiguous<math_fn::gelu_tanh, Arch>(in.data(), out.data(), n); break;
      case math_fn::silu: dk::math_contiguous<math_fn::silu, Arch>(in.data(), out.data(), n); break;
    }
    const T vec = out[0], tail = out[W];
    std::string why;
    if (!close<T>(f, x, vec, 1.0, why)) {
      ++failures;
      FAIL_CHECK("vector body: " << why);
    }
    if (!close<T>(f, x, tail, 1.0, why)) {
      ++failures;
      FAIL_CHECK("scalar tail: " << why);
    }
    // Vector and scalar paths agree with each other.
    const bool both_nan = std::isnan(vec) && std::isnan(tail);
    if (!both_nan && !(vec == tail)) {
      const double d = std::fabs(double(vec) - double(tail));
      const bool formula = f == math_fn::gelu || f == math_fn::gelu_tanh || f == math_fn::silu;
      const bool ok = std::isfinite(vec) && std::isfinite(tail) &&
                      (d <= 2 * tolerance<T>(f) * double(ulp_of(tail)) ||
                       (formula && d <= 2 * tolerance<T>(f) * double(std::numeric_limits<T>::epsilon()) * std::fabs(double(x))));
      if (!ok) {
        ++failures;
        FAIL_CHECK(fn_name(f) << "<" << sizeof(T) << ">(" << x << "): vector " << vec << " vs scalar " << tail << " diff ulps " << d / double(ulp_of(tail)));
      }
    }
    // Every lane of the body and of the tail holds the same value.
    for (std::size_t i = 1; i < n; ++i) {
      const T ref = i < W ? vec : tail;
      if (!(out[i] == ref || (std::isnan(out[i]) && std::isnan(ref)))) {
        ++failures;
        FAIL_CHECK(fn_name(f) << "(" << x << ") lane " << i << " = " << out[i] << ", lane 0 = " << ref);
      }
    }
  }
  CHECK(failures == 0);
}

const math_fn all_fns[] = {math_fn::exp,  math_fn::log,  math_fn::tanh,      math_fn::sigmoid,
                           math_fn::erf,  math_fn::gelu, math_fn::gelu_tanh, math_fn::silu};

template <class Arch>
void check_arch() {
  for (math_fn f : all_fns) {
    SECTION(std::string(fn_name(f)) + " float") { check_function<float, Arch>(f); }
    SECTION(std::string(fn_name(f)) + " double") { check_function<double, Arch>(f); }
  }
}

}  // namespace

TEST_CASE("vector_math: every function on the default arch against the standard library", "[vector_math]") {
  // math_contiguous's own default (avx512dq instead of avx512bw in g++
  // builds without optimisation; see kernels/vector_math.hpp).
  check_arch<dimsum::kernels::vector_math_arch>();
}

#if XSIMD_WITH_AVX2
TEST_CASE("vector_math: every function on AVX2 against the standard library", "[vector_math]") {
  if (!xsimd::available_architectures().avx2) {
    WARN("AVX2 path not checked: this CPU lacks AVX2");
    return;
  }
  check_arch<xsimd::avx2>();
}
#endif

#if XSIMD_WITH_SSE2
TEST_CASE("vector_math: every function on SSE2 against the standard library", "[vector_math]") {
  check_arch<xsimd::sse2>();
}
#endif

TEST_CASE("vector_math: in place, a length with a body and a tail, each element its own value", "[vector_math]") {
  using B = xsimd::batch<float>;
  const std::size_t n = 3 * B::size + 5;
  std::vector<float> v(n), want(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = float(i) * 0.37f - 6.0f;
  for (std::size_t i = 0; i < n; ++i) want[i] = static_cast<float>(std::tanh(double(v[i])));
  dk::math_contiguous<math_fn::tanh>(v.data(), v.data(), n);
  for (std::size_t i = 0; i < n; ++i) CHECK(v[i] == Approx(want[i]).epsilon(4e-7).margin(1e-30));
}

namespace {
/// gelu'(x) and gelu_tanh'(x) one precision up, from the standard library.
template <class R>
R reference_grad(math_fn f, R x) {
  if (f == math_fn::gelu)
    return R(0.5) * (R(1) + std::erf(x / std::sqrt(R(2)))) + x * std::exp(-x * x / R(2)) / std::sqrt(R(2) * std::numbers::pi_v<R>);
  const R c = std::sqrt(R(2) / std::numbers::pi_v<R>), a = R(0.044715);
  const R t = std::tanh(c * (x + a * x * x * x));
  return R(0.5) * (R(1) + t) + R(0.5) * x * (R(1) - t * t) * c * (R(1) + R(3) * a * x * x);
}

template <class T>
void check_grad(math_fn f) {
  using R = std::conditional_t<std::is_same_v<T, float>, double, long double>;
  std::vector<T> x, g;
  for (int i = -400; i <= 400; ++i) x.push_back(T(i) * T(0.025) + T(0.003));  // -10 .. 10, a tail at the end
  for (T v : {T(30), T(-30), T(1e-20), T(0)}) x.push_back(v);
  for (std::size_t i = 0; i < x.size(); ++i) g.push_back(T(1) + T(i % 7) * T(0.5));
  std::vector<T> out(x.size());
  if (f == math_fn::gelu)
    dk::math_grad_contiguous<math_fn::gelu>(x.data(), g.data(), out.data(), x.size());
  else
    dk::math_grad_contiguous<math_fn::gelu_tanh>(x.data(), g.data(), out.data(), x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const R want = R(g[i]) * reference_grad<R>(f, R(x[i]));
    // the formula's two terms are each at most ~1.1 |g|: absolute error in eps of T
    const R tol = R(8) * R(std::numeric_limits<T>::epsilon()) * R(g[i]) * (R(1) + std::abs(R(x[i])));
    INFO(fn_name(f) << " x = " << x[i]);
    CHECK(std::abs(R(out[i]) - want) <= tol);
  }
  // The formula is the derivative: central differences of the function, one precision up.
  for (R xv : {R(-3.1), R(-0.7), R(0.2), R(1.9)}) {
    const R h = R(1e-5);
    const R fd = (reference(f, xv + h) - reference(f, xv - h)) / (R(2) * h);
    CHECK(std::abs(fd - reference_grad<R>(f, xv)) <= R(1e-8));
  }
  // Non-finite: NaN stays NaN; +-inf give NaN (inf times 0), as PyTorch's backward.
  const T nonfinite[3] = {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(),
                          -std::numeric_limits<T>::infinity()};
  std::vector<T> xs(40, T(0.5)), gs(40, T(1)), os(40);
  for (std::size_t i = 0; i < 3; ++i) xs[i] = xs[37 + i] = nonfinite[i];  // in a vector and in the tail
  if (f == math_fn::gelu)
    dk::math_grad_contiguous<math_fn::gelu>(xs.data(), gs.data(), os.data(), xs.size());
  else
    dk::math_grad_contiguous<math_fn::gelu_tanh>(xs.data(), gs.data(), os.data(), xs.size());
  for (std::size_t i : {0u, 1u, 2u, 37u, 38u, 39u}) CHECK(std::isnan(os[i]));
  CHECK(std::abs(R(os[10]) - reference_grad<R>(f, R(0.5))) <= R(8) * R(std::numeric_limits<T>::epsilon()));
}
}  // namespace

TEST_CASE("vector_math: gelu and gelu_tanh derivatives times a gradient against the standard library",
          "[vector_math][grad]") {
  for (math_fn f : {math_fn::gelu, math_fn::gelu_tanh}) {
    SECTION(std::string(fn_name(f)) + " float") { check_grad<float>(f); }
    SECTION(std::string(fn_name(f)) + " double") { check_grad<double>(f); }
  }
  // In place (out == g), as the tape runs it.
  std::vector<float> x(53), g(53, 2.0f);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(i) * 0.2f - 5.0f;
  dk::math_grad_contiguous<math_fn::gelu>(x.data(), g.data(), g.data(), x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    CHECK(std::abs(double(g[i]) - 2.0 * reference_grad<double>(math_fn::gelu, double(x[i]))) <= 2e-6);
}
