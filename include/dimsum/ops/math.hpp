#pragma once
/// \file
/// The element-wise math library, lazy like every element-wise operation
/// and with PyTorch's NaN and infinity semantics:
///   unary:   log, log1p, expm1, tanh, sigmoid, erf, abs, sin, cos, rsqrt,
///            sign, floor, ceil, round, isnan, isinf, isfinite, relu, gelu,
///            gelu_tanh, silu (exp and sqrt are in ops/elementwise.hpp);
///   binary:  pow, minimum, maximum;
///   ternary: clamp.
/// A function's result has its operand's dims; binary and ternary ones
/// broadcast by name with the strict rule of ops/elementwise.hpp (operands
/// sharing no dim are a compile error naming both dim lists; a scalar
/// operand is always fine). exp, log, tanh, sigmoid, erf, gelu, gelu_tanh
/// and silu run vectorised (kernels/vector_math.hpp) when assigned directly.
///
/// Where PyTorch differs from the C library, dimsum follows PyTorch:
/// `sign(NaN)` is 0; `minimum`/`maximum` propagate NaN from either side;
/// `clamp` is NaN when x or a bound is NaN and is `hi` when lo > hi;
/// `round` rounds half to even; `relu(NaN)` is NaN; `gelu(-inf)` and
/// `silu(-inf)` are NaN.

#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

#include <dimsum/kernels/vector_math.hpp>
#include <dimsum/ops/detail/wrapping.hpp>
#include <dimsum/ops/elementwise.hpp>

namespace dimsum {

namespace ops {
/// A unary function computed by kernels::scalar_math and vectorised by
/// kernels::math_contiguous.
template <kernels::math_fn F>
struct vector_unary {
  static constexpr auto vector_fn = F;
  template <class A>
  auto operator()(A a) const {
    return ::dimsum::detail::bf16_math(a, [](auto x) { return kernels::scalar_math<F>(x); });
  }
};
struct log : vector_unary<kernels::math_fn::log> { static constexpr const char* name = "log"; };
struct tanh : vector_unary<kernels::math_fn::tanh> { static constexpr const char* name = "tanh"; };
struct sigmoid : vector_unary<kernels::math_fn::sigmoid> { static constexpr const char* name = "sigmoid"; };
struct erf : vector_unary<kernels::math_fn::erf> { static constexpr const char* name = "erf"; };
struct gelu : vector_unary<kernels::math_fn::gelu> { static constexpr const char* name = "gelu"; };
struct gelu_tanh : vector_unary<kernels::math_fn::gelu_tanh> { static constexpr const char* name = "gelu_tanh"; };
struct silu : vector_unary<kernels::math_fn::silu> { static constexpr const char* name = "silu"; };

struct log1p { static constexpr const char* name = "log1p"; template <class A> auto operator()(A a) const { return ::dimsum::detail::bf16_math(a, [](auto x) { return std::log1p(x); }); } };
struct expm1 { static constexpr const char* name = "expm1"; template <class A> auto operator()(A a) const { return ::dimsum::detail::bf16_math(a, [](auto x) { return std::expm1(x); }); } };
struct sin { static constexpr const char* name = "sin"; template <class A> auto operator()(A a) const { return ::dimsum::detail::bf16_math(a, [](auto x) { return std::sin(x); }); } };
struct cos { static constexpr const char* name = "cos"; template <class A> auto operator()(A a) const { return ::dimsum::detail::bf16_math(a, [](auto x) { return std::cos(x); }); } };
// abs of the most negative integer is itself (two's complement wrap, as
// torch.abs), not std::abs's undefined behaviour.
struct abs {
  static constexpr const char* name = "abs";
  template <class A>
  A operator()(A a) const {
    if constexpr (std::is_unsigned_v<A>) return a;
    else if constexpr (std::is_integral_v<A>) return a < A(0) ? static_cast<A>(::dimsum::detail::wrapping_neg<::dimsum::detail::arithmetic_t<A, A>>(a)) : a;
    else return ::dimsum::detail::bf16_math(a, [](auto x) { return static_cast<decltype(x)>(std::abs(x)); });
  }
};
struct rsqrt {
  static constexpr const char* name = "rsqrt";
  template <class A>
  auto operator()(A a) const {
    return ::dimsum::detail::bf16_math(a, [](auto x) {
      using R = decltype(std::sqrt(x));
      return R(1) / std::sqrt(x);
    });
  }
};
// (0 < a) - (a < 0): 0 for NaN and for -0, as torch.sign.
struct sign { static constexpr const char* name = "sign"; template <class A> A operator()(A a) const { return static_cast<A>(int(A(0) < a) - int(a < A(0))); } };
struct floor { static constexpr const char* name = "floor"; template <class A> A operator()(A a) const { if constexpr (std::is_integral_v<A>) return a; else return ::dimsum::detail::bf16_math(a, [](auto x) { return std::floor(x); }); } };
struct ceil { static constexpr const char* name = "ceil"; template <class A> A operator()(A a) const { if constexpr (std::is_integral_v<A>) return a; else return ::dimsum::detail::bf16_math(a, [](auto x) { return std::ceil(x); }); } };
// nearbyint in the default rounding mode: half to even, as torch.round.
struct round { static constexpr const char* name = "round"; template <class A> A operator()(A a) const { if constexpr (std::is_integral_v<A>) return a; else return ::dimsum::detail::bf16_math(a, [](auto x) { return std::nearbyint(x); }); } };
struct isnan { static constexpr const char* name = "isnan"; template <class A> bool operator()(A a) const { if constexpr (std::is_integral_v<A>) return false; else return std::isnan(static_cast<std::conditional_t<std::is_same_v<A, bf16>, float, A>>(a)); } };
struct isinf { static constexpr const char* name = "isinf"; template <class A> bool operator()(A a) const { if constexpr (std::is_integral_v<A>) return false; else return std::isinf(static_cast<std::conditional_t<std::is_same_v<A, bf16>, float, A>>(a)); } };
struct isfinite { static constexpr const char* name = "isfinite"; template <class A> bool operator()(A a) const { if constexpr (std::is_integral_v<A>) return true; else return std::isfinite(static_cast<std::conditional_t<std::is_same_v<A, bf16>, float, A>>(a)); } };
// a < 0 ? 0 : a keeps NaN and -0, as torch.relu.
struct relu { static constexpr const char* name = "relu"; template <class A> A operator()(A a) const { return a < A(0) ? A(0) : a; } };

struct pow {
  static constexpr const char* name = "pow";
  template <class A, class B>
  auto operator()(A a, B b) const {
    if constexpr (std::is_same_v<A, bf16> && std::is_same_v<B, bf16>)  // float32 inside, rounded once
      return bf16(std::pow(static_cast<float>(a), static_cast<float>(b)));
    else
      return std::pow(a, b);
  }
};
// NaN from either side wins; otherwise std::min / std::max (which return
// the first operand when the two compare equal).
template <bool Max>
struct extremum {
  template <class A, class B>
  auto operator()(A a, B b) const {
    using C = std::common_type_t<A, B>;
    const C x = static_cast<C>(a), y = static_cast<C>(b);
    return x != x ? x : y != y ? y : ((Max ? x < y : y < x) ? y : x);
  }
};
struct minimum : extremum<false> { static constexpr const char* name = "minimum"; };
struct maximum : extremum<true> { static constexpr const char* name = "maximum"; };
// min(max(x, lo), hi), NaN if any of the three is NaN, as torch.clamp.
struct clamp {
  static constexpr const char* name = "clamp";
  template <class A, class L, class H>
  auto operator()(A x_in, L lo_in, H hi_in) const {
    using C = std::common_type_t<A, L, H>;
    const C x = static_cast<C>(x_in), lo = static_cast<C>(lo_in), hi = static_cast<C>(hi_in);
    if constexpr (std::is_floating_point_v<C>)
      if (x != x || lo != lo || hi != hi) return std::numeric_limits<C>::quiet_NaN();
    const C r = x < lo ? lo : x;
    return hi < r ? hi : r;
  }
};
}  // namespace ops

namespace detail {
/// tanh is a stage the attention kernel runs (soft-capping `c * tanh(s / c)`).
template <>
inline constexpr plan::pointwise pointwise_v<ops::tanh> = plan::pointwise::tanh;
}  // namespace detail

// An lvalue operand is DIMSUM_LIFETIMEBOUND (ops/elementwise.hpp).
#define DIMSUM_UNARY_FUNCTION_(fn) DIMSUM_DETAIL_UNARY_ELEMENTWISE(fn, ops::fn)

/// Element-wise natural logarithm (log(0) = -inf, log(x < 0) = NaN): `log(p)`.
DIMSUM_UNARY_FUNCTION_(log)
/// Element-wise log(1 + x), accurate near 0: `log1p(x)`.
DIMSUM_UNARY_FUNCTION_(log1p)
/// Element-wise e^x - 1, accurate near 0: `expm1(x)`.
DIMSUM_UNARY_FUNCTION_(expm1)
/// Element-wise hyperbolic tangent: `tanh(x)`.
DIMSUM_UNARY_FUNCTION_(tanh)
/// Element-wise logistic function 1 / (1 + e^-x): `sigmoid(x)`.
DIMSUM_UNARY_FUNCTION_(sigmoid)
/// Element-wise error function: `erf(x)`.
DIMSUM_UNARY_FUNCTION_(erf)
/// Element-wise absolute value: `abs(x)`.
DIMSUM_UNARY_FUNCTION_(abs)
/// Element-wise sine (radians): `sin(x)`.
DIMSUM_UNARY_FUNCTION_(sin)
/// Element-wise cosine (radians): `cos(x)`.
DIMSUM_UNARY_FUNCTION_(cos)
/// Element-wise 1 / sqrt(x) (rsqrt(0) = inf, rsqrt(-0) = -inf): `rsqrt(var + eps)`.
DIMSUM_UNARY_FUNCTION_(rsqrt)
/// Element-wise sign: -1, 0 or 1; 0 for NaN, as torch.sign: `sign(x)`.
DIMSUM_UNARY_FUNCTION_(sign)
/// Element-wise rounding down: `floor(x)`.
DIMSUM_UNARY_FUNCTION_(floor)
/// Element-wise rounding up: `ceil(x)`.
DIMSUM_UNARY_FUNCTION_(ceil)
/// Element-wise rounding to nearest, half to even (round(2.5) = 2), as torch.round: `round(x)`.
DIMSUM_UNARY_FUNCTION_(round)
/// Element-wise test for NaN (a bool expression): `isnan(x)`.
DIMSUM_UNARY_FUNCTION_(isnan)
/// Element-wise test for +-inf (a bool expression): `isinf(x)`.
DIMSUM_UNARY_FUNCTION_(isinf)
/// Element-wise test for a finite value (a bool expression): `isfinite(x)`.
DIMSUM_UNARY_FUNCTION_(isfinite)
/// Element-wise max(x, 0), NaN kept, as torch.relu: `relu(h)`.
DIMSUM_UNARY_FUNCTION_(relu)
/// Element-wise GELU, exact erf form: x/2 (1 + erf(x / sqrt 2)), as
/// torch.nn.functional.gelu(x, approximate='none'): `gelu(h)`.
DIMSUM_UNARY_FUNCTION_(gelu)
/// Element-wise GELU, tanh form: x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
/// as torch.nn.functional.gelu(x, approximate='tanh'): `gelu_tanh(h)`.
DIMSUM_UNARY_FUNCTION_(gelu_tanh)
/// Element-wise SiLU (swish) x * sigmoid(x), as torch.nn.functional.silu: `silu(h)`.
DIMSUM_UNARY_FUNCTION_(silu)
#undef DIMSUM_UNARY_FUNCTION_

/// Element-wise power: `pow(x, 2.0f)`, `pow(x, y)` (broadcast by name) or
/// `pow(2.0f, x)`; std::pow's special values (pow(NaN, 0) = 1), as torch.pow
/// with a tensor exponent (torch.pow with the Python scalar 0.5 or -0.5 is
/// sqrt or rsqrt instead, so it gives NaN at -inf where std::pow gives inf).
template <class A, class B>
  requires detail::binary_operands<A, B>
auto pow(A&& a, B&& b) {
  return detail::binary<ops::pow>(std::forward<A>(a), std::forward<B>(b));
}
/// Element-wise minimum of two operands broadcast by name (or one a
/// scalar); NaN on either side gives NaN, as torch.minimum: `minimum(a, b)`.
template <class A, class B>
  requires detail::binary_operands<A, B>
auto minimum(A&& a, B&& b) {
  return detail::binary<ops::minimum>(std::forward<A>(a), std::forward<B>(b));
}
/// Element-wise maximum of two operands broadcast by name (or one a
/// scalar); NaN on either side gives NaN, as torch.maximum: `maximum(a, b)`.
template <class A, class B>
  requires detail::binary_operands<A, B>
auto maximum(A&& a, B&& b) {
  return detail::binary<ops::maximum>(std::forward<A>(a), std::forward<B>(b));
}
/// Element-wise min(max(x, lo), hi): lo and hi are scalars or named
/// expressions broadcast by name against x; NaN in x or a bound gives NaN,
/// and lo > hi gives hi, as torch.clamp: `clamp(x, -1.0f, 1.0f)`.
template <named_expression X, class L, class H>
  requires(named_expression<L> || scalar<L>) && (named_expression<H> || scalar<H>)
auto clamp(X&& x, L&& lo, H&& hi) {
  using T = detail::adopted_value_t<detail::adopted_value_t<value_type_of_t<X>, L>, H>;
  return detail::make_elementwise<true>(ops::clamp{}, std::forward<X>(x), detail::as_expression<L, T>(std::forward<L>(lo)),
                                        detail::as_expression<H, T>(std::forward<H>(hi)));
}

}  // namespace dimsum
