#pragma once
/// \file
/// The SIMD vocabulary every kernel is written against: the arch tags
/// (xsimd's, plus `scalar_arch`), the arch the kernels choose
/// (`best_gemm_arch`), `simd_ops<T, Arch>` (zero, broadcast, loads, stores,
/// multiply-add on xsimd batches or plain scalars), and the multiply-add
/// itself: fused or not by construction (`fused_multiply_add`, `opaque`),
/// never left to the compiler's -ffp-contract. Name-free, like every kernel.

#include <cmath>
#include <cstddef>
#include <type_traits>

#include "dimsum/detail/simd.hpp"

namespace dimsum::kernels {

/// Architecture tag of the portable fallback: plain scalar arithmetic, no
/// xsimd batches. Usable everywhere, like the xsimd arch tags it stands with.
struct scalar_arch {
  static constexpr bool supported() noexcept { return true; }
  static constexpr bool available() noexcept { return true; }
  static constexpr const char* name() noexcept { return "scalar"; }
};

/// The arch the kernels (`contract`, `attention`, softmax rows) use: the
/// best of AVX-512F, AVX2+FMA, AVX2 enabled at compile time (e.g. by
/// -march=native), else `scalar_arch`.
using best_gemm_arch = std::conditional_t<
    xsimd::avx512f::supported(), xsimd::avx512f,
    std::conditional_t<xsimd::fma3<xsimd::avx2>::supported(), xsimd::fma3<xsimd::avx2>,
                       std::conditional_t<xsimd::avx2::supported(), xsimd::avx2, scalar_arch>>>;

}  // namespace dimsum::kernels

namespace dimsum {
/// The vector instruction set dimsum's kernels (GEMM, fused attention,
/// softmax rows) were compiled for in this translation unit: "avx512f",
/// "fma3+avx2", "avx2" or "scalar". It follows the compiler's target
/// flags (`-march`); the `dimsum::dimsum` CMake target passes
/// `-march=native` to its consumers unless configured otherwise
/// (`DIMSUM_ARCH`). Example: `std::cout << "kernels: " << kernel_isa();`
constexpr const char* kernel_isa() noexcept { return kernels::best_gemm_arch::name(); }
}  // namespace dimsum

// A consumer built without vector flags gets the scalar kernels, several
// times slower: say so at compile time (define DIMSUM_ALLOW_SCALAR_KERNELS
// to accept it quietly).
#if !defined(DIMSUM_ALLOW_SCALAR_KERNELS) && (defined(__x86_64__) || defined(_M_X64)) && !defined(__AVX2__)
#pragma message( \
    "dimsum: compiled without AVX2/AVX-512 flags, so the kernels run scalar code; link the dimsum::dimsum CMake target (it passes -march=native by default), pass -march=native yourself, or define DIMSUM_ALLOW_SCALAR_KERNELS")
#endif

namespace dimsum::kernels::detail {

/// Returns `x` unchanged, but opaque to the optimiser: a product passed
/// through it cannot be contracted with a following addition into a fused
/// multiply-add. GCC contracts `a * b + c` across statements by default
/// (-ffp-contract=fast) and clang within an expression, and both see
/// through xsimd's operators, which are plain vector arithmetic; a
/// header-only library cannot rely on its users' -ffp-contract, so the
/// kernels decide by construction (fused via `fused_multiply_add`, unfused
/// via this barrier). Costs nothing: an empty asm that keeps x in a register.
template <class V>
inline V opaque(V x) noexcept {
  if constexpr (std::is_integral_v<V>) {
    return x;  // integer arithmetic is exact: nothing to contract
  } else if constexpr (std::is_same_v<V, long double>) {
    volatile V v = x;
    return v;
  } else {  // float, double, or a vector register type (__m256, ...)
#if defined(__GNUC__) && defined(__SSE2__)
#if defined(__AVX512F__)
    asm("" : "+v"(x));  // any xmm/ymm/zmm register, 16..31 included
#else
    asm("" : "+x"(x));
#endif
#elif defined(__GNUC__) && defined(__aarch64__)
    asm("" : "+w"(x));
#else
    volatile V v = x;
    x = v;
#endif
    return x;
  }
}

template <class T, class A>
inline xsimd::batch<T, A> opaque(const xsimd::batch<T, A>& x) noexcept {
  return xsimd::batch<T, A>(opaque(static_cast<typename xsimd::batch<T, A>::register_type>(x)));
}

template <class Arch>
struct is_fma3_arch : std::false_type {};
template <class Base>
struct is_fma3_arch<xsimd::fma3<Base>> : std::true_type {};

/// `x * y + z` on batches of arch `Arch`, always the same way: with one
/// rounding where the arch has an FMA instruction (AVX-512F, the FMA3
/// archs), else as a rounded product plus `z` (two roundings, never
/// contracted). xsimd 8 implements `xsimd::fma` on AVX-512F as `x * y + z`,
/// which is contracted or not at the compiler's whim, so that arch calls
/// the intrinsic directly.
template <class Arch, class T>
inline xsimd::batch<T, Arch> fused_multiply_add(const xsimd::batch<T, Arch>& x, const xsimd::batch<T, Arch>& y,
                                                const xsimd::batch<T, Arch>& z) noexcept {
#if XSIMD_WITH_AVX512F
  if constexpr (std::is_base_of_v<xsimd::avx512f, Arch> && std::is_same_v<T, float>) {
    return _mm512_fmadd_ps(x, y, z);
  } else if constexpr (std::is_base_of_v<xsimd::avx512f, Arch> && std::is_same_v<T, double>) {
    return _mm512_fmadd_pd(x, y, z);
  } else
#endif
  if constexpr (is_fma3_arch<Arch>::value) {
    return xsimd::fma(x, y, z);  // _mm256_fmadd_* / _mm_fmadd_*
  } else {
    return opaque(x * y) + z;
  }
}

/// Vector operations of arch `Arch` on element type `T`.
template <class T, class Arch>
struct simd_ops {
  static_assert(Arch::supported(),
                "dimsum: this SIMD arch is not enabled in this translation unit "
                "(compile with the matching -m flags, e.g. -march=native)");
  using vec = xsimd::batch<T, Arch>;
  static constexpr std::size_t width = vec::size;
  static vec zero() noexcept { return vec(T(0)); }
  static vec broadcast(T x) noexcept { return vec(x); }
  static vec load(const T* p) noexcept { return vec::load_aligned(p); }
  static vec loadu(const T* p) noexcept { return vec::load_unaligned(p); }
  static void store(T* p, const vec& v) noexcept { v.store_aligned(p); }
  static void storeu(T* p, const vec& v) noexcept { v.store_unaligned(p); }
  static vec fma(const vec& x, const vec& y, const vec& z) noexcept { return fused_multiply_add<Arch>(x, y, z); }
};

/// Whether std::fma on float and double is a hardware instruction (x86
/// with -mfma, AArch64, or what <cmath> reports; clang does not define
/// FP_FAST_FMA).
template <class T>
inline constexpr bool fast_fma = (std::is_same_v<T, float> || std::is_same_v<T, double>)&&
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA) || defined(FP_FAST_FMA)
    true;
#else
    false;
#endif

template <class T>
struct simd_ops<T, scalar_arch> {
  using vec = T;
  static constexpr std::size_t width = 1;
  static T zero() noexcept { return T(0); }
  static T broadcast(T x) noexcept { return x; }
  static T load(const T* p) noexcept { return *p; }
  static T loadu(const T* p) noexcept { return *p; }
  static void store(T* p, T v) noexcept { *p = v; }
  static void storeu(T* p, T v) noexcept { *p = v; }
  // With hardware FMA, std::fma (one instruction, one rounding); without
  // it, a rounded product plus z (std::fma would be a slow library call),
  // kept apart by `opaque` so no compiler fuses it at one call site and not
  // at another.
  static T fma(T x, T y, T z) noexcept {
    if constexpr (fast_fma<T>)
      return std::fma(x, y, z);
    else
      return opaque(x * y) + z;
  }
};

}  // namespace dimsum::kernels::detail
