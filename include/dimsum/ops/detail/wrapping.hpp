#pragma once
/// \file
/// Integer arithmetic that wraps around (two's complement) where signed
/// arithmetic would overflow: what PyTorch's integer tensors do
/// (`torch.tensor([-2**31], dtype=torch.int32).abs()` is -2**31, the sum of
/// three int64 2**62 is -2**62), computed in unsigned arithmetic so it is
/// never undefined behaviour. Other types (floating point, unsigned, bool)
/// take the plain operation. Integer division by zero throws instead
/// (torch raises ZeroDivisionError for it).

#include <type_traits>
#include <utility>

#include <dimsum/core/errors.hpp>

namespace dimsum::detail {

/// Whether T's arithmetic may overflow (a signed integer type).
template <class T>
inline constexpr bool wraps_v = std::is_integral_v<T> && std::is_signed_v<T>;

/// The unsigned type a T's wrapped arithmetic runs in: at least unsigned
/// int wide, so that a narrow operand is not promoted back to (signed) int.
template <class T>
using wrap_unsigned_t = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

/// a + b, a - b, a * b and -a in T, wrapping around for signed integers.
template <class T>
constexpr T wrapping_add(T a, T b) {
  if constexpr (wraps_v<T>) {
    using U = wrap_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return static_cast<T>(a + b);
  }
}
template <class T>
constexpr T wrapping_sub(T a, T b) {
  if constexpr (wraps_v<T>) {
    using U = wrap_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
  } else {
    return static_cast<T>(a - b);
  }
}
template <class T>
constexpr T wrapping_mul(T a, T b) {
  if constexpr (wraps_v<T>) {
    using U = wrap_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return static_cast<T>(a * b);
  }
}
template <class T>
constexpr T wrapping_neg(T a) {
  if constexpr (wraps_v<T>) {
    using U = wrap_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(U(0) - static_cast<U>(a)));
  } else {
    return static_cast<T>(-a);
  }
}

/// Thrown by wrapping_div; out of line, so the division loop stays small.
[[noreturn]] inline void throw_integer_division_by_zero() {
  throw error("element-wise /: integer division by zero");
}

/// a / b in T: C++'s truncating division for integers, with a zero divisor
/// a dimsum::error and INT_MIN / -1 wrapping to INT_MIN (the quotient 2**31
/// does not fit); floating point takes the plain division (IEEE: inf, NaN),
/// with no check.
template <class T>
constexpr T wrapping_div(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    if (b == T(0)) throw_integer_division_by_zero();
    if constexpr (wraps_v<T>) {
      if (b == T(-1)) return wrapping_neg<T>(a);
    }
  }
  return static_cast<T>(a / b);
}

/// The type an arithmetic operation on an A and a B computes in
/// (`decltype(a + b)`: int for two int8s, int64 for int32 and int64).
template <class A, class B>
using arithmetic_t = decltype(std::declval<A>() + std::declval<B>());

}  // namespace dimsum::detail
