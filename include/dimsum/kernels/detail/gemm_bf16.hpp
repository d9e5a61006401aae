#pragma once
/// \file
/// The GEMM on bf16 operands with float32 accumulators and a float32 C,
/// on two paths that share the blocked loops of gemm_driver.hpp (B block,
/// A block, micro-tiles) and the split over threads of gemm_threads.hpp:
///
/// - `avx512_bf16_arch` (AVX512-BF16, compiled in with e.g. -march=native on
///   AMD Zen 4/5 or Intel Cooper Lake / Sapphire Rapids): the operands are
///   packed as bf16 pairs along K (A: for each pair of k, MR rows' pairs; B:
///   for each pair of k, NR columns' pairs) and the micro-kernel multiplies
///   them with `vdpbf16ps`, which adds two bf16 products to each float
///   accumulator per lane: twice the multiply-adds of a float FMA per
///   instruction. The instruction treats subnormal bf16 inputs and float
///   results as zero (and rounds to nearest even), as Intel's SDM says.
/// - `amx_bf16_arch` (Intel AMX, compiled in with e.g. -march=native on
///   Sapphire Rapids and later, on Linux): 32 x 32 blocks of C as four
///   16 x 16 float tiles, each step of 32 values of k one `tdpbf16ps` per
///   tile (a 16 x 32 bf16 tile of A times a 32 x 16 one of B: 8192
///   multiply-adds per instruction). `contract` takes it wherever the CPU
///   has it and the kernel grants the process the tile registers.
/// - any other arch (`xsimd::avx512f`, the AVX2 archs, `scalar_arch`): the
///   operands are converted to float while they are packed (exact), and the
///   float micro-kernel of gemm_micro.hpp runs on the packed panels.
///
/// Either way each product of two bf16 is exact in float and the sums are
/// float32, so the result is within K * 2^-24 * sum |a_k b_k| of the exact
/// sum of the bf16 inputs (tests/unit/bf16_gemm.cpp checks this bound on
/// every path the machine runs).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <cstdint>
#include <numeric>
#include <type_traits>

#include "dimsum/core/bf16.hpp"
#include "dimsum/kernels/contraction_args.hpp"
#include "dimsum/kernels/detail/bf16_convert.hpp"
#include "dimsum/kernels/detail/gemm_driver.hpp"
#include "dimsum/kernels/detail/gemm_layout.hpp"
#include "dimsum/kernels/detail/gemm_micro.hpp"
#include "dimsum/kernels/detail/gemm_scratch.hpp"
#include "dimsum/kernels/detail/thread_pool.hpp"
#include "dimsum/kernels/simd.hpp"
#include "dimsum/kernels/threads.hpp"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>
#endif

// The AMX path: the tile instructions, on Linux (the process asks the kernel
// for the tile registers), with the AVX-512 the store and packing use.
#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AVX512BF16__) && defined(__AVX512F__) && \
    defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__linux__)
#define DIMSUM_DETAIL_AMX_BF16 1
#include <sys/syscall.h>
#include <unistd.h>
#else
#define DIMSUM_DETAIL_AMX_BF16 0
#endif

namespace dimsum::kernels::detail {

/// Whether the CPU reports AMX-BF16 and AMX-TILE (cpuid leaf 7), whatever
/// this translation unit is compiled for.
inline bool cpu_has_amx_bf16() noexcept {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (edx & (1u << 22)) != 0 && (edx & (1u << 24)) != 0;  // AMX-BF16, AMX-TILE
#else
  return false;
#endif
}

}  // namespace dimsum::kernels::detail

namespace dimsum::kernels {

/// Arch tag of the bf16 dot-product GEMM (`vdpbf16ps`): supported when the
/// translation unit is compiled with AVX512-BF16 (`__AVX512BF16__`, e.g.
/// -march=native on a CPU that has it), available when the CPU has it.
struct avx512_bf16_arch {
  static constexpr bool supported() noexcept {
#if defined(__AVX512BF16__) && defined(__AVX512F__) && defined(__AVX512BW__)
    return true;
#else
    return false;
#endif
  }
  static bool available() noexcept {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    if constexpr (supported()) return __builtin_cpu_supports("avx512bf16") != 0;
#endif
    return false;
  }
  static constexpr const char* name() noexcept { return "avx512bf16"; }
};

/// Arch tag of the bf16 GEMM on Intel AMX tiles (`tdpbf16ps`): supported
/// when the translation unit is compiled with AMX-BF16 (`__AMX_BF16__`, e.g.
/// -march=native on Sapphire Rapids) for Linux; available when the CPU has
/// it and Linux grants this process the tile registers (asked once, with
/// arch_prctl(ARCH_REQ_XCOMP_PERM); a kernel older than 5.16 says no). Where
/// it is available, `contract` takes it before `best_bf16_gemm_arch`.
struct amx_bf16_arch {
  static constexpr bool supported() noexcept { return DIMSUM_DETAIL_AMX_BF16 != 0; }
  static bool available() noexcept {
#if DIMSUM_DETAIL_AMX_BF16
    static const bool granted = [] {
      if (!detail::cpu_has_amx_bf16()) return false;
      constexpr long arch_req_xcomp_perm = 0x1023, xfeature_xtiledata = 18;
      return syscall(SYS_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata) == 0;
    }();
    return granted;
#else
    return false;
#endif
  }
  static constexpr const char* name() noexcept { return "amx-bf16"; }
};

/// The path `contract` takes for bf16 operands where AMX is not available:
/// `avx512_bf16_arch` when it is compiled in, else the float kernels' arch
/// (`best_gemm_arch`) on operands converted to float while packing.
using best_bf16_gemm_arch = std::conditional_t<avx512_bf16_arch::supported(), avx512_bf16_arch, best_gemm_arch>;

}  // namespace dimsum::kernels

namespace dimsum::kernels::detail {

/// How the bf16 GEMM packs and multiplies on arch `Arch`: here, converting
/// to float and running the float micro-kernel (contract_blocking's tile).
template <class Arch>
struct bf16_gemm_path {
  using blocking = contract_blocking<float, Arch>;
  using packed = float;
  static constexpr std::size_t mr = blocking::mr, nr = blocking::nr;
  /// Packed values per k of a panel row (R values for R = MR or NR), and the
  /// padded depth of a panel of kc values of k.
  static constexpr std::size_t padded_k(std::size_t kc) { return kc; }

  /// dst[p * R + x] = src[k_off[p] + x_off[x]] as float, zeros for x >= width.
  template <std::size_t R>
  static void pack(float* __restrict dst, const bf16* src, const std::ptrdiff_t* k_off, std::size_t kc,
                   const std::ptrdiff_t* x_off, std::size_t width, bool x_unit) noexcept {
    for (std::size_t p = 0; p < kc; ++p) {
      const bf16* s = src + k_off[p];
      float* d = dst + p * R;
      if (x_unit) {
        s += x_off[0];
        for (std::size_t x = 0; x < width; ++x) d[x] = s[x].to_float();
      } else {
        for (std::size_t x = 0; x < width; ++x) d[x] = s[x_off[x]].to_float();
      }
      for (std::size_t x = width; x < R; ++x) d[x] = 0.0f;
    }
  }
  static void multiply(std::size_t kc, const float* pa, const float* pb, const tile_target<float>& t) noexcept {
    micro_kernel<float, Arch, mr, nr>::run(kc, pa, pb, t);
  }
};

#if defined(__AVX512BF16__) && defined(__AVX512F__) && defined(__AVX512BW__)

/// The permutex2var index that interleaves the first 16 words of two
/// vectors into 16 pairs (word 2x from the first, 2x + 1 from the second);
/// plus 16, the next 16 words of each.
inline __m512i interleave16_index() noexcept {
  return _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6, 37, 5, 36, 4, 35,
                          3, 34, 2, 33, 1, 32, 0);
}

/// The MR x (16 NV) micro-kernel on bf16 pairs: per pair of k, NV vectors of
/// B (16 columns x 2 k each) and one broadcast pair of A per row, `vdpbf16ps`
/// into MR x NV float accumulators. The store does what the float
/// micro-kernel's does, element for element: C = fma(alpha, acc, fma(beta,
/// C, bias)), each part only where present.
template <std::size_t MR, std::size_t NV>
struct bf16_dot_kernel {
  static constexpr std::size_t nr = 16 * NV;

  static void run(std::size_t kq, const bf16* __restrict pa, const bf16* __restrict pb, const tile_target<float>& t,
                  bf16* rounded = nullptr) noexcept {
    __m512 acc[MR][NV];
    unrolled<MR>([&](auto i) { unrolled<NV>([&](auto v) { acc[i][v] = _mm512_setzero_ps(); }); });
    const auto* a = reinterpret_cast<const unsigned char*>(pa);
#pragma GCC unroll 4
    for (std::size_t q = 0; q < kq; ++q) {
      __builtin_prefetch(a + 16 * MR * 4, 0, 3);
      __m512i bv[NV];
      unrolled<NV>([&](auto v) { bv[v] = _mm512_load_si512(pb + v * 32); });
      unrolled<MR>([&](auto i) {
        // The pair is broadcast as a float: clang 16 at -O3 recurses without
        // end (VectorCombine) on a broadcast int32 bit-cast to bf16 pairs.
        const __m512bh ai = (__m512bh)_mm512_broadcastss_ps(_mm_load_ss(reinterpret_cast<const float*>(a + i * 4)));
        unrolled<NV>([&](auto v) { acc[i][v] = _mm512_dpbf16_ps(acc[i][v], ai, (__m512bh)bv[v]); });
      });
      a += MR * 4;
      pb += 2 * nr;
    }
    // store() gets a copy: with acc's own address passed out, g++ -O2 took
    // acc as escaped memory that the loop's loads might read (the
    // intrinsics' vector types alias anything) and stored all 24
    // accumulators on every pair of k (half the kernel's speed).
    __m512 out[MR][NV];
    unrolled<MR>([&](auto i) { unrolled<NV>([&](auto v) { out[i][v] = acc[i][v]; }); });
    store(out, t, rounded);
  }

  /// The same product with A read in place: row i of the tile at a + i *
  /// lda, row-major bf16 with k innermost (so each pair of k is one 32-bit
  /// word); kq pairs. With `odd`, the last pair's second k lies outside
  /// the operands: A must hold 0 there, and B's half of that pair is
  /// cleared before the product, so that a NaN or an infinity beyond the
  /// end reaches no sum (0 * inf would). The fused attention's Q·Kᵀ and
  /// P·V on bf16 (kernels/attention.hpp).
  static void run_strided(std::size_t kq, const bf16* a, std::size_t lda, const bf16* __restrict pb, bool odd,
                          const tile_target<float>& t) noexcept {
    __m512 acc[MR][NV];
    unrolled<MR>([&](auto i) { unrolled<NV>([&](auto v) { acc[i][v] = _mm512_setzero_ps(); }); });
    const auto* base = reinterpret_cast<const unsigned char*>(a);
    const std::size_t row_bytes = lda * sizeof(bf16);
#pragma GCC unroll 2
    for (std::size_t q = 0; q < kq; ++q) {
      // every pair's both halves, but the last one's first alone when odd
      const __mmask32 keep = odd && q + 1 == kq ? __mmask32(0x55555555u) : __mmask32(0xffffffffu);
      __m512i bv[NV];
      unrolled<NV>([&](auto v) { bv[v] = _mm512_maskz_mov_epi16(keep, _mm512_load_si512(pb + v * 32)); });
      unrolled<MR>([&](auto i) {
        const __m512bh ai = (__m512bh)_mm512_broadcastss_ps(
            _mm_load_ss(reinterpret_cast<const float*>(base + i * row_bytes + q * 4)));
        unrolled<NV>([&](auto v) { acc[i][v] = _mm512_dpbf16_ps(acc[i][v], ai, (__m512bh)bv[v]); });
      });
      pb += 2 * nr;
    }
    __m512 out[MR][NV];
    unrolled<MR>([&](auto i) { unrolled<NV>([&](auto v) { out[i][v] = acc[i][v]; }); });
    store(out, t);
  }

  /// With `rounded`, C is bf16 there (t's offsets, t.c unused, beta 0):
  /// each element's float result rounded to nearest even, once.
  static void store(const __m512 (&acc)[MR][NV], const tile_target<float>& t, bf16* rounded = nullptr) noexcept {
    const bool read_c = t.beta != 0.0f;
#if defined(__AVX512VL__)
    constexpr bool masked_words = true;  // a part of 16 rounded words stored under a mask
#else
    constexpr bool masked_words = false;
#endif
    // Rows in place along C (unit column offsets): whole vectors, the last
    // part of a row (cols < nr) read and written under a mask, rows past
    // t.rows left alone. The edge tiles of a product whose M or N is not a
    // multiple of the tile's (the fused attention's d = 64 in 12-row
    // panels) take this path as well.
    if (t.cols_unit && t.rows <= MR && t.cols <= nr && (!rounded || masked_words || t.cols == nr)) {
      const __m512 alpha = _mm512_set1_ps(t.alpha), beta = _mm512_set1_ps(t.beta);
      unrolled<MR>([&](auto i) {
        if (i >= t.rows) return;
        const std::ptrdiff_t row = t.row_offset[i] + t.col_offset[0];
        unrolled<NV>([&](auto v) {
          if (v * 16 >= t.cols) return;
          const std::size_t left = t.cols - v * 16;
          const __mmask16 m = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
          // an offset, made a pointer only into the C that is there (t.c is null when rounded)
          const std::ptrdiff_t at = row + std::ptrdiff_t(v * 16);
          __m512 r;
          if (t.bias) {
            const __m512 bias = _mm512_load_ps(t.bias + v * 16);
            r = _mm512_fmadd_ps(alpha, acc[i][v],
                                read_c ? _mm512_fmadd_ps(beta, _mm512_maskz_loadu_ps(m, t.c + at), bias) : bias);
          } else {
            r = read_c ? _mm512_fmadd_ps(alpha, acc[i][v], opaque(_mm512_mul_ps(beta, _mm512_maskz_loadu_ps(m, t.c + at))))
                       : _mm512_mul_ps(alpha, acc[i][v]);
          }
          if (rounded) {
#if defined(__AVX512VL__)
            _mm256_mask_storeu_epi16(rounded + at, m, round16_bits(r));
#else
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(rounded + at), round16_bits(r));
#endif
          } else {
            _mm512_mask_storeu_ps(t.c + at, m, r);
          }
        });
      });
      return;
    }
    // An edge tile: the same arithmetic per element, one at a time.
    alignas(64) float tile[MR * nr];
    unrolled<MR>([&](auto i) { unrolled<NV>([&](auto v) { _mm512_store_ps(tile + i * nr + v * 16, acc[i][v]); }); });
    for (std::size_t i = 0; i < t.rows; ++i)
      for (std::size_t j = 0; j < t.cols; ++j) {
        const float x = tile[i * nr + j];
        if (rounded) {
          rounded[t.row_offset[i] + t.col_offset[j]] = bf16(t.bias ? std::fma(t.alpha, x, t.bias[j]) : t.alpha * x);
          continue;
        }
        float& c = t.c[t.row_offset[i] + t.col_offset[j]];
        if (t.bias)
          c = std::fma(t.alpha, x, read_c ? std::fma(t.beta, c, t.bias[j]) : t.bias[j]);
        else
          c = read_c ? std::fma(t.alpha, x, opaque(t.beta * c)) : t.alpha * x;
      }
  }
};

/// The vdpbf16ps path: 6 x 64 tiles (24 accumulators, 4 B vectors, 1
/// broadcast), panels of bf16 pairs along K, the last pair zero-padded
/// when kc is odd.
template <>
struct bf16_gemm_path<avx512_bf16_arch> {
  using blocking = gemm_blocking<6, 64, 480, 2048, 16384>;
  using packed = bf16;
  static constexpr std::size_t mr = blocking::mr, nr = blocking::nr;
  static constexpr std::size_t padded_k(std::size_t kc) { return (kc + 1) / 2 * 2; }

  /// dst[q * 2R + 2x + s] = src[k_off[2q + s] + x_off[x]] (0 past kc and
  /// for x >= width): for each pair of k, R pairs.
  template <std::size_t R>
  static void pack(bf16* __restrict dst, const bf16* src, const std::ptrdiff_t* k_off, std::size_t kc,
                   const std::ptrdiff_t* x_off, std::size_t width, bool x_unit) noexcept {
    const std::size_t kq = (kc + 1) / 2;
    if (!x_unit && kc >= 2 && consecutive(k_off, kc)) {
      // K contiguous in each row (A row-major, k innermost): each pair of k
      // is one 32-bit word of its row, copied whole; rows read in turn.
      const std::size_t whole = kc / 2;
      std::size_t q0 = 0;
      if constexpr (R == 6) {
        if (width == R) q0 = pack_six_rows(dst, src + k_off[0], x_off, whole);
      }
      for (std::size_t x = 0; x < width; ++x) {
        const bf16* row = src + k_off[0] + x_off[x];
        bf16* d = dst + 2 * x;
        for (std::size_t q = q0; q < whole; ++q) std::memcpy(d + q * 2 * R, row + 2 * q, 2 * sizeof(bf16));
        if (kc % 2 != 0) {
          d[whole * 2 * R] = row[kc - 1];
          d[whole * 2 * R + 1] = bf16();
        }
      }
      for (std::size_t q = 0; q < kq; ++q)
        for (std::size_t x = width; x < R; ++x) dst[q * 2 * R + 2 * x] = dst[q * 2 * R + 2 * x + 1] = bf16();
      return;
    }
    for (std::size_t q = 0; q < kq; ++q) {
      const bf16* s0 = src + k_off[2 * q];
      const bf16* s1 = 2 * q + 1 < kc ? src + k_off[2 * q + 1] : nullptr;
      bf16* d = dst + q * 2 * R;
      std::size_t x = 0;
#if defined(__AVX512VL__)
      if constexpr (R <= 8) {
        if (x_unit) {
          // an A panel (R = MR rows along M, unit stride): the two rows' R
          // values read under a mask (nothing past width is touched, zeros
          // there), interleaved into R pairs, written under a mask
          const auto m = static_cast<__mmask8>((1u << width) - 1);
          const __m128i r0 = _mm_maskz_loadu_epi16(m, s0 + x_off[0]);
          const __m128i r1 = s1 ? _mm_maskz_loadu_epi16(m, s1 + x_off[0]) : _mm_setzero_si128();
          const __m256i pairs =
              _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_unpacklo_epi16(r0, r1)), _mm_unpackhi_epi16(r0, r1), 1);
          _mm256_mask_storeu_epi16(d, static_cast<__mmask16>((1u << (2 * R)) - 1), pairs);
          continue;
        }
      }
#endif
      if (x_unit) {
        s0 += x_off[0];
        if (s1) {
          s1 += x_off[0];
          // 32 columns of two rows at a time, interleaved by one permute each half.
          const __m512i lo = interleave16_index();
          const __m512i hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
          for (; x + 32 <= width; x += 32) {
            const __m512i r0 = _mm512_loadu_si512(s0 + x), r1 = _mm512_loadu_si512(s1 + x);
            _mm512_storeu_si512(d + 2 * x, _mm512_permutex2var_epi16(r0, lo, r1));
            _mm512_storeu_si512(d + 2 * x + 32, _mm512_permutex2var_epi16(r0, hi, r1));
          }
        }
        for (; x < width; ++x) {
          d[2 * x] = s0[x];
          d[2 * x + 1] = s1 ? s1[x] : bf16();
        }
      } else {
        for (; x < width; ++x) {
          d[2 * x] = s0[x_off[x]];
          d[2 * x + 1] = s1 ? s1[x_off[x]] : bf16();
        }
      }
      for (; x < R; ++x) d[2 * x] = d[2 * x + 1] = bf16();
    }
  }
  static void multiply(std::size_t kc, const bf16* pa, const bf16* pb, const tile_target<float>& t,
                       bf16* rounded = nullptr) noexcept {
    bf16_dot_kernel<mr, nr / 16>::run((kc + 1) / 2, pa, pb, t, rounded);
  }

 private:
  /// pack<6>'s rows with K contiguous, 16 pairs of k at a time: the six
  /// rows' 16 words (a word = one pair of k) loaded, interleaved two rows
  /// at a time into (row 2i, row 2i+1) word pairs, and those 64-bit pairs
  /// permuted three ways into the panel's order (for each pair of k, the six
  /// rows' words). Returns how many pairs of k it packed (a multiple of 16).
  static std::size_t pack_six_rows(bf16* __restrict dst, const bf16* base, const std::ptrdiff_t* x_off,
                                   std::size_t whole) noexcept {
    // word q of rows (2i, 2i+1) -> 64-bit lane q % 8 of the low (q < 8) or high half
    const __m512i pair_lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i pair_hi = _mm512_add_epi32(pair_lo, _mm512_set1_epi32(8));
    // Output vector j (of 3 per half) holds 64-bit items w = 8j .. 8j+7 of
    // that half, item w = (pair of k w / 3, row pair w % 3): the first two
    // row pairs by one two-source permute, the third merged under a mask.
    const __m512i two[3] = {_mm512_set_epi64(10, 2, 0, 9, 1, 0, 8, 0), _mm512_set_epi64(5, 0, 12, 4, 0, 11, 3, 0),
                            _mm512_set_epi64(0, 15, 7, 0, 14, 6, 0, 13)};
    const __m512i third[3] = {_mm512_set_epi64(0, 0, 1, 0, 0, 0, 0, 0), _mm512_set_epi64(0, 4, 0, 0, 3, 0, 0, 2),
                              _mm512_set_epi64(7, 0, 0, 6, 0, 0, 5, 0)};
    const __mmask8 third_mask[3] = {0x24, 0x49, 0x92};
    const bf16* rows[6];
    for (std::size_t x = 0; x < 6; ++x) rows[x] = base + x_off[x];
    std::size_t q = 0;
    for (; q + 16 <= whole; q += 16) {
      __m512i r[6];
      for (std::size_t x = 0; x < 6; ++x) r[x] = _mm512_loadu_si512(rows[x] + 2 * q);
      __m512i pairs[2][3];
      for (std::size_t i = 0; i < 3; ++i) {
        pairs[0][i] = _mm512_permutex2var_epi32(r[2 * i], pair_lo, r[2 * i + 1]);
        pairs[1][i] = _mm512_permutex2var_epi32(r[2 * i], pair_hi, r[2 * i + 1]);
      }
      bf16* d = dst + q * 12;
      for (std::size_t h = 0; h < 2; ++h)
        for (std::size_t j = 0; j < 3; ++j) {
          const __m512i ab = _mm512_permutex2var_epi64(pairs[h][0], two[j], pairs[h][1]);
          _mm512_storeu_si512(d + (3 * h + j) * 32, _mm512_mask_permutexvar_epi64(ab, third_mask[j], third[j], pairs[h][2]));
        }
    }
    return q;
  }
};

#endif

#if DIMSUM_DETAIL_AMX_BF16

/// An AMX tile configuration (palette 1): tiles 0-7 of 16 rows of 64 bytes.
struct alignas(64) amx_tile_config {
  std::uint8_t palette = 1, start_row = 0, reserved[14] = {};
  std::uint16_t bytes_per_row[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  std::uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};

/// The AMX path: 32 x 32 blocks of C in four float tiles (tmm0-3: rows 0-15
/// and 16-31 by columns 0-15 and 16-31), and per 32 values of k two A tiles
/// (tmm4-5: 16 rows x 32 values) and two B tiles (tmm6-7: 16 pairs of k x
/// 16 columns' pairs), four `tdpbf16ps`. K is padded with zeros to a
/// multiple of 32. A panels: for each 32 values of k, the 32 rows' 32
/// values (a tile row is a row of A); B panels: the vdpbf16ps path's pairs
/// along K (a tile row is half a panel row: 16 columns' pairs). The store is
/// the vdpbf16ps kernel's, on the tiles' sums.
template <>
struct bf16_gemm_path<amx_bf16_arch> {
  using blocking = gemm_blocking<32, 32, 512, 2048, 16384>;
  using packed = bf16;
  static constexpr std::size_t mr = blocking::mr, nr = blocking::nr;
  static constexpr std::size_t padded_k(std::size_t kc) { return (kc + 31) / 32 * 32; }

  /// The calling thread's tiles configured for the life of the object.
  struct tile_scope {
    tile_scope() noexcept {
      static const amx_tile_config config;
      _tile_loadconfig(&config);
    }
    ~tile_scope() { _tile_release(); }
    tile_scope(const tile_scope&) = delete;
    tile_scope& operator=(const tile_scope&) = delete;
  };

  /// B panels (R = NR columns): the vdpbf16ps path's pairs, zero pairs up to
  /// the padded depth.
  template <std::size_t R>
  static void pack(bf16* __restrict dst, const bf16* src, const std::ptrdiff_t* k_off, std::size_t kc,
                   const std::ptrdiff_t* x_off, std::size_t width, bool x_unit) noexcept {
    bf16_gemm_path<avx512_bf16_arch>::pack<R>(dst, src, k_off, kc, x_off, width, x_unit);
    const std::size_t kq = (kc + 1) / 2;
    std::fill_n(dst + kq * 2 * R, (padded_k(kc) / 2 - kq) * 2 * R, bf16());
  }

  /// A panels (R = MR rows at x_off, K at k_off): dst[(c * R + x) * 32 + j]
  /// = src[k_off[32 c + j] + x_off[x]], zeros past kc and width.
  template <std::size_t R>
  static void pack_a(bf16* __restrict dst, const bf16* src, const std::ptrdiff_t* k_off, std::size_t kc,
                     const std::ptrdiff_t* x_off, std::size_t width, bool x_unit) noexcept {
    static_assert(R % 16 == 0);
    const std::size_t chunks = padded_k(kc) / 32;
    if (consecutive(k_off, kc)) {
      // K contiguous in each row (x, or dY, read along K): 32 values of a
      // row at a time, the last ones under a mask
      for (std::size_t c = 0; c < chunks; ++c) {
        const std::size_t left = kc - 32 * c;
        const __mmask32 m = left >= 32 ? ~__mmask32(0) : (__mmask32(1) << left) - 1;
        for (std::size_t x = 0; x < R; ++x)
          _mm512_store_si512(dst + (c * R + x) * 32,
                             x < width ? _mm512_maskz_loadu_epi16(m, src + k_off[32 * c] + x_off[x]) : _mm512_setzero_si512());
      }
      return;
    }
    if (x_unit) {
      // The rows contiguous (A read along M: x^T dY, the weights'
      // gradients): per 16 rows, each pair of k's two rows of A interleaved
      // into 16 words (row x: its two values), and the 16 x 16 words
      // transposed (row x: its 16 pairs, 32 values of k).
      const __m512i interleave = interleave16_index();
      for (std::size_t x0 = 0; x0 < R; x0 += 16) {
        const std::size_t rows = width > x0 ? std::min<std::size_t>(16, width - x0) : 0;
        const __mmask16 m = rows == 16 ? __mmask16(0xffff) : __mmask16((1u << rows) - 1);
        for (std::size_t c = 0; c < chunks; ++c) {
          __m512 w[16];
          for (std::size_t q = 0; q < 16; ++q) {
            const std::size_t k = 32 * c + 2 * q;
            const __m256i r0 = k < kc ? _mm256_maskz_loadu_epi16(m, src + k_off[k] + x_off[x0]) : _mm256_setzero_si256();
            const __m256i r1 = k + 1 < kc ? _mm256_maskz_loadu_epi16(m, src + k_off[k + 1] + x_off[x0]) : _mm256_setzero_si256();
            w[q] = _mm512_castsi512_ps(
                _mm512_permutex2var_epi16(_mm512_zextsi256_si512(r0), interleave, _mm512_zextsi256_si512(r1)));
          }
          transpose16_words(w);
          for (std::size_t x = 0; x < 16; ++x) _mm512_store_ps(dst + (c * R + x0 + x) * 32, w[x]);
        }
      }
      return;
    }
    for (std::size_t c = 0; c < chunks; ++c)
      for (std::size_t x = 0; x < R; ++x)
        for (std::size_t j = 0; j < 32; ++j) {
          const std::size_t k = 32 * c + j;
          dst[(c * R + x) * 32 + j] = x < width && k < kc ? src[k_off[k] + x_off[x]] : bf16();
        }
  }

  static void multiply(std::size_t kc, const bf16* pa, const bf16* pb, const tile_target<float>& t,
                       bf16* rounded = nullptr) noexcept {
    constexpr std::size_t b_row_bytes = 2 * nr * sizeof(bf16);  // one pair of k across the panel
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (std::size_t c = 0, chunks = padded_k(kc) / 32; c < chunks; ++c) {
      const bf16* a = pa + c * 32 * mr;  // 32 rows x 32 values of k
      const bf16* b = pb + c * 32 * nr;  // 16 pairs of k x 32 columns' pairs
      _tile_loadd(4, a, 64);
      _tile_loadd(5, a + 16 * 32, 64);
      _tile_loadd(6, b, b_row_bytes);
      _tile_loadd(7, b + 32, b_row_bytes);
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
    alignas(64) __m512 sums[mr][2];
    _tile_stored(0, &sums[0][0], sizeof sums[0]);
    _tile_stored(1, &sums[0][1], sizeof sums[0]);
    _tile_stored(2, &sums[16][0], sizeof sums[0]);
    _tile_stored(3, &sums[16][1], sizeof sums[0]);
    bf16_dot_kernel<mr, 2>::store(sums, t, rounded);
  }
};

#endif

/// No tile state to configure (every path but AMX's).
struct no_tile_scope {};
template <class Path>
auto tile_scope_of(int) -> typename Path::tile_scope;
template <class Path>
no_tile_scope tile_scope_of(...);

/// C[bi, m0:m1, n0:n1] of a bf16 problem on the calling thread: B blocks
/// (KC x NC) and A blocks (MC x KC) packed by Path, micro-tiles multiplied
/// by it. With `c16` (the vdpbf16ps path, K within one block, beta 0; see
/// bf16_rounds_in_store) C is bf16 there, at p's C strides, each element
/// rounded once in the micro-kernel's store.
template <class Arch>
void bf16_gemm_rectangle(const gemm_problem<float>& p, const bf16* a0, const bf16* b0, std::size_t bi,
                         std::size_t m0, std::size_t m1, std::size_t n0, std::size_t n1, bf16* c16 = nullptr) {
  using path = bf16_gemm_path<Arch>;
  using Blk = typename path::blocking;
  using P = typename path::packed;
  constexpr std::size_t MR = Blk::mr, NR = Blk::nr;
  [[maybe_unused]] const decltype(tile_scope_of<path>(0)) tiles;
  const bf16* a = a0 + offset_of(p.batch, p.batch.stride_a, bi);
  const bf16* b = b0 + offset_of(p.batch, p.batch.stride_b, bi);
  float* c = c16 ? nullptr : p.c + offset_of(p.batch, p.batch.stride_c, bi);
  if (c16) c16 += offset_of(p.batch, p.batch.stride_c, bi);
  const block_plan<P, Blk> plan(p.nk, n1 - n0);
  const std::size_t mc_blk = plan.mc(m1 - m0);
  const std::size_t kp = path::padded_k(plan.kc);
  const std::size_t bytes_b = round_up(round_up(plan.nc, NR) * kp * sizeof(P), scratch_alignment);
  const std::size_t bytes_a = round_up(mc_blk * kp * sizeof(P), scratch_alignment);
  auto* scratch = static_cast<unsigned char*>(thread_scratch().reserve(bytes_a + bytes_b));
  P* packed_b = reinterpret_cast<P*>(scratch);
  P* packed_a = reinterpret_cast<P*>(scratch + bytes_b);

  std::ptrdiff_t k_off_a[Blk::kc], k_off_b[Blk::kc], idx[Blk::mc > NR ? Blk::mc : NR], row_c[Blk::mc], col_c[NR],
      bias_off[NR];
  alignas(scratch_alignment) float bias_panel[NR];
  for (std::size_t jc = n0; jc < n1; jc += plan.nc) {
    const std::size_t nc = std::min(plan.nc, n1 - jc);
    for (std::size_t pc = 0; pc < p.nk; pc += plan.kc) {
      const std::size_t kc = std::min(plan.kc, p.nk - pc);
      const std::size_t kpad = path::padded_k(kc);
      fill_offsets(p.k, p.k.stride_b, pc, kc, k_off_b);
      for (std::size_t jr = 0; jr < nc; jr += NR) {
        const std::size_t nr = std::min(NR, nc - jr);
        fill_offsets(p.n, p.n.stride_b, jc + jr, nr, idx);
        path::template pack<NR>(packed_b + jr * kpad, b, k_off_b, kc, idx, nr, p.b_n_unit || consecutive(idx, nr));
      }
      fill_offsets(p.k, p.k.stride_a, pc, kc, k_off_a);
      const bool add_bias = p.bias != nullptr && pc == 0;
      const float beta = pc == 0 ? p.beta : 1.0f;
      for (std::size_t ic = m0; ic < m1; ic += mc_blk) {
        const std::size_t mc = std::min(mc_blk, m1 - ic);
        fill_offsets(p.m, p.m.stride_a, ic, mc, idx);
        // A is packed with its rows as the panel's x and K as its k: the
        // row offsets play x_off, the K offsets k_off.
        for (std::size_t ir = 0; ir < mc; ir += MR) {
          const std::size_t mr = std::min(MR, mc - ir);
          const bool rows_unit = p.a_m_unit || consecutive(idx + ir, mr);
          if constexpr (requires { &path::template pack_a<MR>; })  // A in a layout of its own
            path::template pack_a<MR>(packed_a + ir * kpad, a, k_off_a, kc, idx + ir, mr, rows_unit);
          else
            path::template pack<MR>(packed_a + ir * kpad, a, k_off_a, kc, idx + ir, mr, rows_unit);
        }
        fill_offsets(p.m, p.m.stride_c, ic, mc, row_c);
        for (std::size_t jr = 0; jr < nc; jr += NR) {
          const std::size_t nr = std::min(NR, nc - jr);
          fill_offsets(p.n, p.n.stride_c, jc + jr, nr, col_c);
          const bool cols_unit = p.c_n_unit || consecutive(col_c, nr);
          if (add_bias) {
            fill_offsets(p.n, p.n.stride_a, jc + jr, nr, bias_off);
            for (std::size_t j = 0; j < NR; ++j) bias_panel[j] = j < nr ? p.bias[bias_off[j]] : 0.0f;
          }
          for (std::size_t ir = 0; ir < mc; ir += MR) {
            const tile_target<float> t{c,       row_c + ir, col_c, std::min(MR, mc - ir), nr, cols_unit, p.alpha,
                                       beta,    add_bias ? static_cast<const float*>(bias_panel) : nullptr};
            if constexpr (std::is_same_v<P, bf16>)
              path::multiply(kc, packed_a + ir * kpad, packed_b + jr * kpad, t, c16);
            else
              path::multiply(kc, packed_a + ir * kpad, packed_b + jr * kpad, t);
          }
        }
      }
    }
  }
}

/// The bf16 GEMM on `Arch` (see the file comment): independent rectangles
/// (batch index times a range of M or N) spread over up to num_threads()
/// threads. Results do not depend on the thread count: K is blocked the
/// same way whatever the split.
template <class Arch>
void contract_bf16(const contraction_args<bf16, float>& args, bf16* c16 = nullptr) {
  using Blk = typename bf16_gemm_path<Arch>::blocking;
  const std::size_t nb = args.batch.size();
  gemm_problem<float> p{};
  p.c = args.c;
  p.nm = args.m.size();
  p.nn = args.n.size();
  p.nk = args.k.size();
  if (nb == 0 || p.nm == 0 || p.nn == 0) return;
  p.batch = canonical_group(args.batch, operand_a | operand_b | operand_c);
  p.m = canonical_group(args.m, operand_a | operand_c);
  p.bias = args.bias;
  dim_group n = args.n;
  if (args.bias) n.stride_a = args.bias_n;  // as in contract_blocked: the bias rides in A's unused N slot
  p.n = canonical_group(n, (args.bias ? operand_a : 0u) | operand_b | operand_c);
  p.k = canonical_group(args.k, operand_a | operand_b);
  p.alpha = args.alpha;
  p.beta = args.beta;
  if (p.nk == 0) return scale_c(p);
  p.a_m_unit = unit_stride(p.m, p.m.stride_a);
  p.a_k_unit = unit_stride(p.k, p.k.stride_a);
  p.b_k_unit = unit_stride(p.k, p.k.stride_b);
  p.b_n_unit = unit_stride(p.n, p.n.stride_b);
  p.c_n_unit = unit_stride(p.n, p.n.stride_c);

  const std::size_t threads =
      in_pool_job() ? 1 : threads_for_flops(2.0 * double(nb) * double(p.nm) * double(p.nn) * double(p.nk));
  // Split M (each part packs all of B) unless N has more tiles to share.
  const std::size_t tiles_m = (p.nm + Blk::mr - 1) / Blk::mr, tiles_n = (p.nn + Blk::nr - 1) / Blk::nr;
  const bool split_m = tiles_m >= tiles_n || tiles_m >= threads;
  const std::size_t parts = std::min(threads / std::gcd(nb, threads), split_m ? tiles_m : tiles_n);
  const std::size_t step = ((split_m ? tiles_m : tiles_n) + parts - 1) / parts * (split_m ? Blk::mr : Blk::nr);
  parallel_for(
      nb * parts,
      [&](std::size_t item) {
        const std::size_t bi = item / parts, part = item % parts;
        const std::size_t extent = split_m ? p.nm : p.nn;
        const std::size_t lo = std::min(extent, part * step), hi = std::min(extent, lo + step);
        if (lo == hi) return;
        if (split_m)
          bf16_gemm_rectangle<Arch>(p, args.a, args.b, bi, lo, hi, 0, p.nn, c16);
        else
          bf16_gemm_rectangle<Arch>(p, args.a, args.b, bi, 0, p.nm, lo, hi, c16);
      },
      threads);
}

}  // namespace dimsum::kernels::detail
