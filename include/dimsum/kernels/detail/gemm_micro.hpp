#pragma once
/// \file
/// The register-blocked micro-kernel of the GEMM: an MR x NR tile of C kept in
/// registers while it accumulates kc rank-1 updates from packed panels, then
/// written to C through C's strides. Written once against `simd_ops`, which
/// maps to xsimd batches for a SIMD arch and to plain scalars for
/// `scalar_arch`, so every path shares the same loop structure.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <type_traits>
#include <utility>

#include "dimsum/detail/simd.hpp"

namespace dimsum::kernels {

/// Architecture tag of the portable fallback: plain scalar arithmetic, no
/// xsimd batches. Usable everywhere, like the xsimd arch tags it stands with.
struct scalar_arch {
  static constexpr bool supported() noexcept { return true; }
  static constexpr bool available() noexcept { return true; }
  static constexpr const char* name() noexcept { return "scalar"; }
};

}  // namespace dimsum::kernels

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

/// Calls f(std::integral_constant<std::size_t, I>{}) for I = 0..N-1, fully
/// unrolled, so register-array indices are compile-time constants.
template <std::size_t N, class F>
inline void unrolled(F&& f) {
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (f(std::integral_constant<std::size_t, I>{}), ...);
  }(std::make_index_sequence<N>{});
}

/// Where one micro-tile goes in C: row i, column j of the tile is
/// `c + row_offset[i] + col_offset[j]`; only the first `rows` x `cols` exist.
/// When `cols_unit` the columns are consecutive elements (col_offset[j] ==
/// col_offset[0] + j), which allows whole-vector loads and stores.
template <class T>
struct tile_target {
  T* c;
  const std::ptrdiff_t* row_offset;
  const std::ptrdiff_t* col_offset;
  std::size_t rows, cols;
  bool cols_unit;
  T alpha, beta;            // beta == 0: C is not read
  const T* bias = nullptr;  // NR values added to every row (aligned, zero-padded), or none
};

/// Where the micro-kernel reads A. `packed_a`: a packed panel, for each k MR
/// consecutive values (one per tile row). `rows_a`: A unpacked, row i of the
/// tile at `row[i]` with unit stride along k (row-major A with K innermost;
/// small problems skip packing this way). Both give the same values in the
/// same order, so the results are bit-identical.
template <class T, std::size_t MR>
struct packed_a {
  const T* p;
  static constexpr bool is_packed = true;
};
template <class T, std::size_t MR>
struct rows_a {
  const T* row[MR];
  static constexpr bool is_packed = false;
};

/// The MR x NR micro-kernel over kc rank-1 updates: A from `packed_a` or
/// `rows_a`; packed B, for each k NR consecutive values. Packed panels are
/// padded with zeros to full MR / NR and are `scratch_alignment` aligned.
template <class T, class Arch, std::size_t MR, std::size_t NR>
struct micro_kernel {
  using ops = simd_ops<T, Arch>;
  using vec = typename ops::vec;
  static constexpr std::size_t width = ops::width;
  static constexpr std::size_t nv = NR / width;
  static_assert(NR % width == 0, "dimsum: micro-kernel NR must be a multiple of the SIMD width");

  static void run(std::size_t kc, const T* __restrict pa, const T* __restrict pb,
                  const tile_target<T>& t) noexcept {
    run_with(kc, packed_a<T, MR>{pa}, pb, t);
  }

  /// A tile at most one vector wide (an edge of N) runs on one vector
  /// column, which halves its work; the arithmetic per element is the same.
  template <class A>
  static void run_with(std::size_t kc, const A& a, const T* __restrict pb, const tile_target<T>& t) noexcept {
    if constexpr (nv > 1) {
      if (t.cols <= width) return run_cols<1>(kc, a, pb, t);
    }
    run_cols<nv>(kc, a, pb, t);
  }

  /// The tile on the first NV of the nv vector columns.
  template <std::size_t NV, class A>
  static void run_cols(std::size_t kc, const A& a, const T* __restrict pb, const tile_target<T>& t) noexcept {
    const bool direct = t.cols_unit && t.rows == MR && t.cols == NV * width;
    if (direct) {
      // The tile is written right after the loop; start fetching it now.
      unrolled<MR>([&](auto i) {
        const T* row = t.c + t.row_offset[i] + t.col_offset[0];
        __builtin_prefetch(row, 1, 3);
        __builtin_prefetch(row + NV * width - 1, 1, 3);
      });
    }

    // An edge tile goes through a local tile. C is gathered into it before
    // the loop: gathered right before the vector loads below, its scalar
    // stores would still be in flight and stall them (store forwarding).
    const bool read_c = t.beta != T(0);
    alignas(64) T tile[MR * NR];
    if (!direct && read_c) {
      unrolled<MR>([&](auto i) { unrolled<NV>([&](auto v) { ops::store(tile + i * NR + v * width, ops::zero()); }); });
      for (std::size_t i = 0; i < t.rows; ++i) {
        T* dst = tile + i * NR;
        if (t.cols_unit)
          std::copy_n(t.c + t.row_offset[i] + t.col_offset[0], t.cols, dst);
        else
          for (std::size_t j = 0; j < t.cols; ++j) dst[j] = t.c[t.row_offset[i] + t.col_offset[j]];
      }
    }

    vec acc[MR][NV];
    unrolled<MR>([&](auto i) { unrolled<NV>([&](auto v) { acc[i][v] = ops::zero(); }); });
    if constexpr (A::is_packed) {
      const T* __restrict pa = a.p;
      // Unrolled by 4 to cut loop overhead; the A panel is prefetched 16
      // steps ahead because with a deep KC the panels stream from L2, not L1.
#pragma GCC unroll 4
      for (std::size_t p = 0; p < kc; ++p) {
        if constexpr (width > 1) __builtin_prefetch(pa + 16 * MR, 0, 3);
        vec bv[NV];
        unrolled<NV>([&](auto v) { bv[v] = ops::load(pb + v * width); });
        unrolled<MR>([&](auto i) {
          const vec ai = ops::broadcast(pa[i]);
          unrolled<NV>([&](auto v) { acc[i][v] = ops::fma(ai, bv[v], acc[i][v]); });
        });
        pa += MR;
        pb += NR;
      }
    } else {
#pragma GCC unroll 4
      for (std::size_t p = 0; p < kc; ++p) {
        vec bv[NV];
        unrolled<NV>([&](auto v) { bv[v] = ops::load(pb + v * width); });
        unrolled<MR>([&](auto i) {
          const vec ai = ops::broadcast(a.row[i][p]);
          unrolled<NV>([&](auto v) { acc[i][v] = ops::fma(ai, bv[v], acc[i][v]); });
        });
        pb += NR;
      }
    }

    const vec alpha = ops::broadcast(t.alpha);
    const vec beta = ops::broadcast(t.beta);
    // fma(alpha, acc, fma(beta, C, bias)), each part only when present
    // (every multiply-add explicit: see `opaque`). Both
    // store paths do the same arithmetic per element, so a result does not
    // depend on whether its tile was an edge tile (or on thread count).
    auto result = [&](const vec& a, const T* c, auto v) {
      if (t.bias) {
        const vec bias = ops::load(t.bias + v * width);
        return ops::fma(alpha, a, read_c ? ops::fma(beta, ops::loadu(c), bias) : bias);
      }
      return read_c ? ops::fma(alpha, a, beta * ops::loadu(c)) : alpha * a;
    };
    if (direct) {
      unrolled<MR>([&](auto i) {
        T* row = t.c + t.row_offset[i] + t.col_offset[0];
        unrolled<NV>([&](auto v) {
          T* p = row + v * width;
          ops::storeu(p, result(acc[i][v], p, v));
        });
      });
      return;
    }
    unrolled<MR>([&](auto i) {
      unrolled<NV>([&](auto v) {
        T* p = tile + i * NR + v * width;
        ops::store(p, result(acc[i][v], p, v));
      });
    });
    for (std::size_t i = 0; i < t.rows; ++i) {
      if (t.cols_unit) {
        T* dst = t.c + t.row_offset[i] + t.col_offset[0];
        for (std::size_t j = 0; j < t.cols; ++j) dst[j] = tile[i * NR + j];
      } else {
        for (std::size_t j = 0; j < t.cols; ++j) t.c[t.row_offset[i] + t.col_offset[j]] = tile[i * NR + j];
      }
    }
  }
};

}  // namespace dimsum::kernels::detail
