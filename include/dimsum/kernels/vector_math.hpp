#pragma once
/// \file
/// Vectorised element-wise math (xsimd) for the functions where it pays:
/// exp, log, tanh, sigmoid, erf, gelu (erf and tanh forms) and silu, with
/// PyTorch's NaN and infinity semantics; and the derivatives of the two
/// gelus times a gradient (`math_grad_contiguous`), for their backward. `math_contiguous<F>(in, out, n)`
/// runs whole vectors, then the scalar definition on the tail; the scalar
/// definition (`scalar_math<F>`) is also what element-wise trees call per
/// element, so both paths compute the same function (the vector one within
/// the few ulp stated in tests/unit/vector_math.cpp).
///
/// Non-finite inputs: xsimd's exp turns its argument into integers, in
/// scalar code for double on some targets, where that is undefined for
/// infinities and NaN. So every vector function here feeds xsimd finite
/// arguments only (clamped where the function has already saturated) and
/// puts NaN back afterwards.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <type_traits>

#include "dimsum/detail/simd.hpp"
#include "dimsum/kernels/detail/bf16_convert.hpp"

namespace dimsum::kernels {

/// The vectorised element-wise functions.
enum class math_fn { exp, log, tanh, sigmoid, erf, gelu, gelu_tanh, silu };

/// The scalar definition of F: gelu(x) = x/2 (1 + erf(x / sqrt 2)),
/// gelu_tanh(x) = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) as
/// PyTorch's kernels write them; sigmoid(x) = 1 / (1 + e^-x) written with
/// e = e^-|x| as 1 / (1 + e) for x >= 0 and e / (1 + e) below, so it never
/// overflows (accurate down to subnormal results, where PyTorch's float
/// sigmoid gives 0); silu(x) = x sigmoid(x). So gelu(-inf) and silu(-inf)
/// are NaN, as in PyTorch (-inf times 0).
template <math_fn F, class T>
auto scalar_math(T x) {
  if constexpr (!std::is_floating_point_v<T>) {
    return scalar_math<F>(static_cast<double>(x));
  } else if constexpr (F == math_fn::exp) {
    return std::exp(x);
  } else if constexpr (F == math_fn::log) {
    return std::log(x);
  } else if constexpr (F == math_fn::tanh) {
    return std::tanh(x);
  } else if constexpr (F == math_fn::sigmoid) {
    const T e = std::exp(-std::fabs(x));
    return (x < T(0) ? e : T(1)) / (T(1) + e);
  } else if constexpr (F == math_fn::erf) {
    return std::erf(x);
  } else if constexpr (F == math_fn::gelu) {
    return x * T(0.5) * (T(1) + std::erf(x * T(0.70710678118654752440)));
  } else if constexpr (F == math_fn::gelu_tanh) {
    const T inner = T(0.79788456080286535588) * (x + T(0.044715) * x * x * x);
    return T(0.5) * x * (T(1) + std::tanh(inner));
  } else {
    static_assert(F == math_fn::silu);
    return x * scalar_math<math_fn::sigmoid>(x);
  }
}

namespace detail {

/// f(x) for finite x in [lo, hi]; outside, f at the nearer bound (where f
/// has saturated); NaN stays NaN. xsimd sees no NaN and no infinity.
template <class B, class F>
B saturating(const B& x, typename B::value_type lo, typename B::value_type hi, F&& f) {
  const auto nan = xsimd::isnan(x);
  const B clamped = xsimd::min(xsimd::max(xsimd::select(nan, B(0), x), B(lo)), B(hi));
  return xsimd::select(nan, x, f(clamped));
}

/// e^x: below -1000 it is 0, above 1000 infinity, for float and double.
/// xsimd's exp gives 0 where the result is subnormal (x below about -87.3
/// in float, -708.4 in double); there e^x = (e^(x/2))^2, which rounds to
/// the subnormal result as the standard library's exp does.
template <class B>
B exp(const B& x) {
  using T = typename B::value_type;
  const T subnormal_below = std::is_same_v<T, float> ? T(-87) : T(-708);
  return saturating(x, -1000, 1000, [&](const B& y) {
    const auto low = y < B(subnormal_below);
    if (!xsimd::any(low)) return xsimd::exp(y);
    const B half = xsimd::exp(y * B(T(0.5)));
    return xsimd::select(low, half * half, xsimd::exp(y));
  });
}

/// log x: xsimd's double log is wrong for subnormal x, so a subnormal
/// argument is scaled by 2^54 first and 54 log 2 taken off after.
template <class B>
B log(const B& x) {
  using T = typename B::value_type;
  const auto sub = x < B(std::numeric_limits<T>::min()) && x > B(0);
  if (!xsimd::any(sub)) return xsimd::log(x);  // 0, negatives, inf and NaN handled by xsimd
  const B scaled = xsimd::log(xsimd::select(sub, x * B(T(18014398509481984.0)), x));
  return xsimd::select(sub, scaled - B(T(54) * T(0.693147180559945309417232121458176568L)), scaled);
}

/// tanh is +-1 (rounded) beyond |x| = 20 in float and double.
template <class B>
B tanh(const B& x) {
  return saturating(x, -40, 40, [](const B& y) { return xsimd::tanh(y); });
}

/// erf is +-1 (rounded) beyond |x| = 6 in float and double.
template <class B>
B erf(const B& x) {
  return saturating(x, -10, 10, [](const B& y) { return xsimd::erf(y); });
}

}  // namespace detail

/// The vector form of F on one batch (same formulas as scalar_math).
template <math_fn F, class T, class A>
xsimd::batch<T, A> vector_math(const xsimd::batch<T, A>& x) {
  using B = xsimd::batch<T, A>;
  if constexpr (F == math_fn::exp) {
    return detail::exp(x);
  } else if constexpr (F == math_fn::log) {
    return detail::log(x);
  } else if constexpr (F == math_fn::tanh) {
    return detail::tanh(x);
  } else if constexpr (F == math_fn::sigmoid) {
    const B e = detail::exp(-xsimd::abs(x));
    return xsimd::select(x < B(0), e, B(1)) / (B(1) + e);
  } else if constexpr (F == math_fn::erf) {
    return detail::erf(x);
  } else if constexpr (F == math_fn::gelu) {
    return x * B(T(0.5)) * (B(1) + detail::erf(x * B(T(0.70710678118654752440))));
  } else if constexpr (F == math_fn::gelu_tanh) {
    const B inner = B(T(0.79788456080286535588)) * (x + B(T(0.044715)) * x * x * x);
    return B(T(0.5)) * x * (B(1) + detail::tanh(inner));
  } else {
    static_assert(F == math_fn::silu);
    return x * vector_math<math_fn::sigmoid>(x);
  }
}

/// Whether math_contiguous runs F vectorised on value type T: float for
/// every F; double for all but erf and gelu, whose xsimd erf is off by up
/// to 60 ulp in double (they run std::erf per element there).
template <math_fn F, class T>
inline constexpr bool has_vector_math =
    std::is_same_v<T, float> || (std::is_same_v<T, double> && F != math_fn::erf && F != math_fn::gelu);

/// The arch math_contiguous uses by default: xsimd's best for the target,
/// except in g++ builds without optimisation on AVX-512BW. There GCC
/// defines `_mm512_mask_blend_epi8/16` as macros whose casts reject
/// xsimd 8.1's integer batches (its avx512bw `select`, which xsimd's log
/// reaches), so a Debug build would not compile; avx512dq has the same
/// width and blends through functions.
#if defined(__GNUC__) && !defined(__clang__) && !defined(__OPTIMIZE__) && XSIMD_WITH_AVX512BW
using vector_math_arch = xsimd::avx512dq;
#else
using vector_math_arch = xsimd::default_arch;
#endif

/// out[i] = F(in[i]) for i < n on arch A: whole vectors, then scalar_math
/// on the tail (all of it scalar where has_vector_math<F, T> is false).
/// `in` may equal `out` (in place).
template <math_fn F, class A = vector_math_arch, class T>
void math_contiguous(const T* in, T* out, std::size_t n) noexcept {
  static_assert(std::is_floating_point_v<T>);
  std::size_t i = 0;
  if constexpr (has_vector_math<F, T>) {
    using B = xsimd::batch<T, A>;
    constexpr std::size_t W = B::size;
    for (; i + W <= n; i += W) vector_math<F>(B::load_unaligned(in + i)).store_unaligned(out + i);
  }
  for (; i < n; ++i) out[i] = scalar_math<F>(in[i]);
}

}  // namespace dimsum::kernels

namespace dimsum::kernels {

/// The scalar derivative F'(x) of F = gelu or gelu_tanh, as PyTorch's
/// GeluBackward writes them: gelu' = Phi(x) + x phi(x) with phi(x) =
/// e^(-x^2/2) / sqrt(2 pi); gelu_tanh' = (1 + t) / 2 + x (1 - t^2) c (1 +
/// 3 a x^2) / 2, t = tanh(c (x + a x^3)), c = sqrt(2/pi), a = 0.044715.
/// So +-inf gives NaN (inf times 0), as in PyTorch.
template <math_fn F, class T>
T scalar_math_grad(T x) {
  static_assert(F == math_fn::gelu || F == math_fn::gelu_tanh, "dimsum: math_grad is defined for gelu and gelu_tanh");
  if constexpr (F == math_fn::gelu) {
    const T cdf = T(0.5) * (T(1) + std::erf(x * T(0.70710678118654752440)));
    const T pdf = std::exp(T(-0.5) * x * x) * T(0.39894228040143267794);
    return cdf + x * pdf;
  } else {
    constexpr T c = T(0.79788456080286535588), a = T(0.044715);
    const T t = std::tanh(c * (x + a * x * x * x));
    return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * c * (T(1) + T(3) * a * x * x);
  }
}

/// The vector form of scalar_math_grad on one batch (same formulas).
template <math_fn F, class T, class A>
xsimd::batch<T, A> vector_math_grad(const xsimd::batch<T, A>& x) {
  using B = xsimd::batch<T, A>;
  if constexpr (F == math_fn::gelu) {
    const B cdf = B(T(0.5)) * (B(1) + detail::erf(x * B(T(0.70710678118654752440))));
    const B pdf = detail::exp(B(T(-0.5)) * x * x) * B(T(0.39894228040143267794));
    return cdf + x * pdf;
  } else {
    static_assert(F == math_fn::gelu_tanh);
    const B c(T(0.79788456080286535588)), a(T(0.044715));
    const B t = detail::tanh(c * (x + a * x * x * x));
    return B(T(0.5)) * (B(1) + t) + B(T(0.5)) * x * (B(1) - t * t) * c * (B(1) + B(T(3)) * a * x * x);
  }
}

/// out[i] = g[i] * F'(x[i]) for i < n (F = gelu or gelu_tanh): whole
/// vectors where has_vector_math<F, T>, then scalar_math_grad on the tail.
/// `out` may equal `g` (in place).
template <math_fn F, class A = vector_math_arch, class T>
void math_grad_contiguous(const T* x, const T* g, T* out, std::size_t n) noexcept {
  static_assert(std::is_floating_point_v<T>);
  std::size_t i = 0;
  if constexpr (has_vector_math<F, T>) {
    using B = xsimd::batch<T, A>;
    constexpr std::size_t W = B::size;
    for (; i + W <= n; i += W)
      (B::load_unaligned(g + i) * vector_math_grad<F>(B::load_unaligned(x + i))).store_unaligned(out + i);
  }
  for (; i < n; ++i) out[i] = g[i] * scalar_math_grad<F>(x[i]);
}

}  // namespace dimsum::kernels

namespace dimsum::kernels {

/// out[r n + j] = op(x[r n + j], y[j]) for r < rows, j < n (op(y[j], x[r n
/// + j]) when YFirst): an element-wise binary operation whose operand y is
/// broadcast along rows (a bias added to every position), vectorised for
/// float and double; op is applied to xsimd batches and to scalars alike.
/// For bf16 (op one of + - * /, whose bf16 result is the float result
/// rounded once) each stretch of a row is widened to float, op runs on float
/// vectors and the results are rounded back: the same values as op on each
/// bf16 pair. `out` may equal `x`.
template <bool YFirst, class Op, class T, class A = vector_math_arch>
void broadcast_rows(Op op, const T* x, const T* y, T* out, std::size_t rows, std::size_t n) noexcept {
  auto apply = [&](const auto& xv, const auto& yv) { return YFirst ? op(yv, xv) : op(xv, yv); };
  if constexpr (std::is_same_v<T, bf16>) {
    using B = xsimd::batch<float, A>;
    constexpr std::size_t C = 512;  // floats a stretch
    alignas(64) float xf[C], yf[C];
    for (std::size_t j0 = 0; j0 < n; j0 += C) {
      const std::size_t m = std::min(C, n - j0);
      detail::widen_contiguous(y + j0, m, yf);
      for (std::size_t r = 0; r < rows; ++r) {
        detail::widen_contiguous(x + r * n + j0, m, xf);
        std::size_t j = 0;
        for (; j + B::size <= m; j += B::size)
          B(apply(B::load_aligned(xf + j), B::load_aligned(yf + j))).store_aligned(xf + j);
        for (; j < m; ++j) xf[j] = apply(xf[j], yf[j]);
        detail::round_contiguous(xf, m, out + r * n + j0);
      }
    }
    return;
  }
  for (std::size_t r = 0; r < rows; ++r) {
    const T* xr = x + r * n;
    T* orow = out + r * n;
    std::size_t j = 0;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      using B = xsimd::batch<T, A>;
      for (; j + B::size <= n; j += B::size)
        B(apply(B::load_unaligned(xr + j), B::load_unaligned(y + j))).store_unaligned(orow + j);
    }
    for (; j < n; ++j) orow[j] = apply(xr[j], y[j]);
  }
}

}  // namespace dimsum::kernels
