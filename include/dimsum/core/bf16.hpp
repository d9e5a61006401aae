#pragma once
/// \file
/// `dimsum::bf16`: the bfloat16 value type (1 sign bit, 8 exponent bits, 7
/// mantissa bits: float32's range with 8 significant bits), stored in 16
/// bits. A tensor of bf16 (`tensor<bf16, batch, posn, d_model>`) holds half
/// the bytes of a float tensor; every kernel that reads one accumulates in
/// float32 (docs/design.md, "bfloat16").
///
/// Conversions are explicit both ways, so a bf16 never turns into a float
/// (or back) unnoticed: `bf16(1.5f)`, `static_cast<float>(b)`. From float
/// the value is rounded to nearest, ties to even; a NaN stays a NaN (made
/// quiet, sign kept); infinities and subnormals are kept (a float too large
/// for bf16 rounds to infinity, as IEEE rounding says). To float the
/// conversion is exact. Arithmetic between two bf16 computes in float and
/// rounds the result once, as PyTorch's `torch.bfloat16` scalars do.

#include <bit>
#include <cstdint>
#include <limits>
#include <ostream>
#include <type_traits>

namespace dimsum {

/// A bfloat16 number: the upper 16 bits of a float32. See the file comment.
class bf16 {
 public:
  /// `bf16()` and `bf16{}` are zero, as `float()` is; `bf16 x;` leaves x
  /// uninitialised, as `float x;` does (so a bf16 tensor that a kernel
  /// writes in full is allocated without being zero-filled first).
  constexpr bf16() noexcept = default;

  /// Rounds `x` to the nearest bf16, ties to even (NaN stays NaN, quiet).
  constexpr explicit bf16(float x) noexcept : bits_(round_from_float(x)) {}

  /// Any other arithmetic value: converted to float first, then rounded as
  /// above (a double is thus rounded twice; the two roundings can differ
  /// from one only for a double within 2^-24 relative of a bf16 tie).
  template <class A>
    requires(std::is_arithmetic_v<A> && !std::is_same_v<A, float>)
  constexpr explicit bf16(A x) noexcept : bf16(static_cast<float>(x)) {}

  /// The bf16 whose 16 bits are `bits` (sign, exponent, mantissa).
  static constexpr bf16 from_bits(std::uint16_t bits) noexcept {
    bf16 b;
    b.bits_ = bits;
    return b;
  }
  /// The 16 bits of this value.
  constexpr std::uint16_t bits() const noexcept { return bits_; }

  /// The exact float value.
  constexpr float to_float() const noexcept { return std::bit_cast<float>(std::uint32_t(bits_) << 16); }

  /// To any arithmetic type, through the exact float value.
  template <class A>
    requires std::is_arithmetic_v<A>
  constexpr explicit operator A() const noexcept {
    return static_cast<A>(to_float());
  }

  /// The bits of the bf16 nearest to `x`, ties to even. The rounding adds
  /// 0x7fff plus the lowest kept bit to the float's bits and truncates:
  /// above half way rounds up, below rounds down, exactly half way rounds
  /// to the even neighbour; a carry out of the mantissa steps the exponent
  /// (the largest floats round to infinity).
  static constexpr std::uint16_t round_from_float(float x) noexcept {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
    if ((u & 0x7fffffffu) > 0x7f800000u)  // NaN: keep sign and top payload bits, set the quiet bit
      return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
    const std::uint32_t lsb = (u >> 16) & 1u;
    return static_cast<std::uint16_t>((u + 0x7fffu + lsb) >> 16);
  }

  friend constexpr bf16 operator+(bf16 a, bf16 b) noexcept { return bf16(a.to_float() + b.to_float()); }
  friend constexpr bf16 operator-(bf16 a, bf16 b) noexcept { return bf16(a.to_float() - b.to_float()); }
  friend constexpr bf16 operator*(bf16 a, bf16 b) noexcept { return bf16(a.to_float() * b.to_float()); }
  friend constexpr bf16 operator/(bf16 a, bf16 b) noexcept { return bf16(a.to_float() / b.to_float()); }
  friend constexpr bf16 operator-(bf16 a) noexcept { return from_bits(static_cast<std::uint16_t>(a.bits_ ^ 0x8000u)); }
  constexpr bf16& operator+=(bf16 b) noexcept { return *this = *this + b; }
  constexpr bf16& operator-=(bf16 b) noexcept { return *this = *this - b; }
  constexpr bf16& operator*=(bf16 b) noexcept { return *this = *this * b; }
  constexpr bf16& operator/=(bf16 b) noexcept { return *this = *this / b; }

  // Comparisons as floats: NaN is unordered and unequal to itself, -0 == +0.
  friend constexpr bool operator==(bf16 a, bf16 b) noexcept { return a.to_float() == b.to_float(); }
  friend constexpr bool operator<(bf16 a, bf16 b) noexcept { return a.to_float() < b.to_float(); }
  friend constexpr bool operator>(bf16 a, bf16 b) noexcept { return a.to_float() > b.to_float(); }
  friend constexpr bool operator<=(bf16 a, bf16 b) noexcept { return a.to_float() <= b.to_float(); }
  friend constexpr bool operator>=(bf16 a, bf16 b) noexcept { return a.to_float() >= b.to_float(); }

  /// Prints the value as its float (`1.5`, `inf`, `nan`).
  friend std::ostream& operator<<(std::ostream& os, bf16 b) { return os << b.to_float(); }

 private:
  std::uint16_t bits_;
};

static_assert(sizeof(bf16) == 2 && std::is_trivially_copyable_v<bf16> && std::is_trivially_default_constructible_v<bf16>,
              "dimsum: bf16 must be 16 plain bits");

/// Whether T is a 16-bit floating-point storage type whose arithmetic
/// happens in float32 (true for `bf16`).
template <class T>
inline constexpr bool is_bf16_v = std::is_same_v<std::remove_cv_t<T>, bf16>;

/// The type a kernel accumulates a T in: float for bf16, T otherwise.
template <class T>
using accumulator_t = std::conditional_t<is_bf16_v<T>, float, T>;

/// Classification, as for float.
constexpr bool isnan(bf16 b) noexcept { return (b.bits() & 0x7fffu) > 0x7f80u; }
constexpr bool isinf(bf16 b) noexcept { return (b.bits() & 0x7fffu) == 0x7f80u; }
constexpr bool isfinite(bf16 b) noexcept { return (b.bits() & 0x7f80u) != 0x7f80u; }

}  // namespace dimsum

/// numeric_limits of bf16 (8 significant bits, float32's exponent range).
template <>
class std::numeric_limits<dimsum::bf16> {
 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr bool has_signaling_NaN = true;
  static constexpr bool is_iec559 = false;
  static constexpr bool is_bounded = true;
  static constexpr float_round_style round_style = round_to_nearest;
  static constexpr int radix = 2;
  static constexpr int digits = 8;
  static constexpr int digits10 = 2;
  static constexpr int max_digits10 = 4;
  static constexpr int min_exponent = -125;
  static constexpr int min_exponent10 = -37;
  static constexpr int max_exponent = 128;
  static constexpr int max_exponent10 = 38;
  static constexpr dimsum::bf16 min() noexcept { return dimsum::bf16::from_bits(0x0080); }
  static constexpr dimsum::bf16 max() noexcept { return dimsum::bf16::from_bits(0x7f7f); }
  static constexpr dimsum::bf16 lowest() noexcept { return dimsum::bf16::from_bits(0xff7f); }
  static constexpr dimsum::bf16 epsilon() noexcept { return dimsum::bf16::from_bits(0x3c00); }  // 2^-7
  static constexpr dimsum::bf16 round_error() noexcept { return dimsum::bf16::from_bits(0x3f00); }  // 0.5
  static constexpr dimsum::bf16 infinity() noexcept { return dimsum::bf16::from_bits(0x7f80); }
  static constexpr dimsum::bf16 quiet_NaN() noexcept { return dimsum::bf16::from_bits(0x7fc0); }
  static constexpr dimsum::bf16 signaling_NaN() noexcept { return dimsum::bf16::from_bits(0x7fa0); }
  static constexpr dimsum::bf16 denorm_min() noexcept { return dimsum::bf16::from_bits(0x0001); }
};
