#pragma once
/// \file
/// Integer arithmetic that wraps around (two's complement) where signed
/// arithmetic would overflow: what PyTorch's integer tensors do
/// (`torch.tensor([-2**31], dtype=torch.int32).abs()` is -2**31, the sum of
/// three int64 2**62 is -2**62), computed in unsigned arithmetic so it is
/// never undefined behaviour. Other types (floating point, unsigned, bool)
/// take the plain operation.

#include <type_traits>
#include <utility>

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

/// The type an arithmetic operation on an A and a B computes in
/// (`decltype(a + b)`: int for two int8s, int64 for int32 and int64).
template <class A, class B>
using arithmetic_t = decltype(std::declval<A>() + std::declval<B>());

}  // namespace dimsum::detail
