#pragma once
/// \file
/// bf16 <-> float over contiguous runs, as `bf16(float)` and
/// `bf16::to_float` convert one value: widening is exact (each 16-bit word
/// shifted into a float's upper half), rounding is to nearest, ties to
/// even, a NaN staying a NaN (made quiet). Vector code on AVX-512 and AVX2
/// (the compiler does not vectorise the plain loops at -O2), the scalar
/// conversion for the tail and on other builds. The tape's bf16 gradient
/// sums, the element-wise casts between float and bf16, the bf16 bias add
/// and the bf16 fused attention's operand conversions run on these. Also
/// the 16 x 16 transposition of 32-bit words (bf16 pairs) that the bf16
/// kernels pack their operands with.

#include <bit>
#include <cstddef>
#include <cstdint>

#include "dimsum/core/bf16.hpp"
// the intrinsics, through the header that includes them with g++'s false
// warnings inside avx512fintrin.h silenced (it must be the first to include them)
#include "dimsum/detail/simd.hpp"

namespace dimsum::kernels::detail {

// The conversions below use the masked (maskz) forms of vpmovzxwd and
// vpmovdw: the unmasked intrinsics pass g++'s "undefined" register idiom,
// which g++ 12 at -O3 reports as maybe-uninitialized once inlined.

/// dst[c] = float(w[c]) for c < n, w the bf16 words (exact).
inline void widen_contiguous(const std::uint16_t* w, std::size_t n, float* __restrict dst) noexcept {
  std::size_t c = 0;
#if defined(__AVX512F__)
  for (; c + 16 <= n; c += 16) {
    const __m512i x = _mm512_maskz_cvtepu16_epi32(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + c)));
    _mm512_storeu_ps(dst + c, _mm512_castsi512_ps(_mm512_slli_epi32(x, 16)));
  }
#elif defined(__AVX2__)
  for (; c + 8 <= n; c += 8) {
    const __m256i x = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + c)));
    _mm256_storeu_ps(dst + c, _mm256_castsi256_ps(_mm256_slli_epi32(x, 16)));
  }
#endif
  for (; c < n; ++c) dst[c] = std::bit_cast<float>(std::uint32_t(w[c]) << 16);
}

/// acc[c] += float(w[c]) for c < n (the widening exact, the sum in float).
inline void widen_add_contiguous(const std::uint16_t* w, std::size_t n, float* __restrict acc) noexcept {
  std::size_t c = 0;
#if defined(__AVX512F__)
  for (; c + 16 <= n; c += 16) {
    const __m512i x = _mm512_maskz_cvtepu16_epi32(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + c)));
    _mm512_storeu_ps(acc + c, _mm512_add_ps(_mm512_loadu_ps(acc + c), _mm512_castsi512_ps(_mm512_slli_epi32(x, 16))));
  }
#elif defined(__AVX2__)
  for (; c + 8 <= n; c += 8) {
    const __m256i x = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + c)));
    _mm256_storeu_ps(acc + c, _mm256_add_ps(_mm256_loadu_ps(acc + c), _mm256_castsi256_ps(_mm256_slli_epi32(x, 16))));
  }
#endif
  for (; c < n; ++c) acc[c] += std::bit_cast<float>(std::uint32_t(w[c]) << 16);
}

#if defined(__AVX512F__) && defined(__AVX512BW__)
/// 16 floats rounded to bf16 bits (round_from_float's integer arithmetic
/// on a vector: nearest, ties to even, subnormals rounded as any other
/// value, a NaN kept a NaN and made quiet).
inline __m256i round16_bits(__m512 x) noexcept {
  const __m512i one = _mm512_set1_epi32(1), half = _mm512_set1_epi32(0x7fff), abs = _mm512_set1_epi32(0x7fffffff),
                inf = _mm512_set1_epi32(0x7f800000), quiet = _mm512_set1_epi32(0x40);
  const __m512i u = _mm512_castps_si512(x);
  const __m512i hi = _mm512_srli_epi32(u, 16);
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(half, _mm512_and_si512(hi, one))), 16);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs), inf);
  r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(hi, quiet));
  return _mm512_maskz_cvtepi32_epi16(0xffff, r);
}
#endif

/// w[c] = the bf16 word of src[c] for c < n, as `bf16(float)` rounds (to
/// nearest, ties to even; a NaN stays a NaN, made quiet): the same integer
/// arithmetic on whole vectors.
/// Where the CPU has AVX512-BF16, 32 values at a time take vcvtne2ps2bf16
/// (the same rounding and NaN rule) unless one of them is subnormal: the
/// instruction reads those as zero, so such a block takes the integer path.
inline void round_contiguous(const float* __restrict src, std::size_t n, std::uint16_t* w) noexcept {
  std::size_t c = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__)
  const auto round16 = [&](std::size_t at) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(w + at), round16_bits(_mm512_loadu_ps(src + at)));
  };
#if defined(__AVX512BF16__)
  const __m512i inf = _mm512_set1_epi32(0x7f800000), mantissa = _mm512_set1_epi32(0x007fffff);
  const auto subnormal = [&](__m512 x) {
    const __m512i u = _mm512_castps_si512(x);
    return _mm512_mask_test_epi32_mask(_mm512_testn_epi32_mask(u, inf), u, mantissa);
  };
  for (; c + 32 <= n; c += 32) {
    const __m512 lo = _mm512_loadu_ps(src + c), hi = _mm512_loadu_ps(src + c + 16);
    if ((subnormal(lo) | subnormal(hi)) != 0) {
      round16(c);
      round16(c + 16);
      continue;
    }
    _mm512_storeu_si512(w + c, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo)));
  }
#endif
  for (; c + 16 <= n; c += 16) round16(c);
#elif defined(__AVX2__)
  const __m256i one = _mm256_set1_epi32(1), half = _mm256_set1_epi32(0x7fff), abs = _mm256_set1_epi32(0x7fffffff),
                inf = _mm256_set1_epi32(0x7f800000), quiet = _mm256_set1_epi32(0x40);
  for (; c + 8 <= n; c += 8) {
    const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(src + c));
    const __m256i hi = _mm256_srli_epi32(u, 16);
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(half, _mm256_and_si256(hi, one))), 16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs), inf);  // both non-negative as int32
    r = _mm256_blendv_epi8(r, _mm256_or_si256(hi, quiet), nan);
    // 8 words of at most 16 bits: pack within lanes, then gather the two lanes' halves
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(w + c), _mm256_castsi256_si128(packed));
  }
#endif
  for (; c < n; ++c) w[c] = bf16::round_from_float(src[c]);
}

#if defined(__AVX512F__)
/// The 16 x 16 matrix of 32-bit words r[row][lane] transposed in place:
/// pairs, quads, then 128-bit lanes swapped (bit moves only: any float,
/// NaN included, or any pair of bf16 words keeps its bits).
inline void transpose16_words(__m512 (&r)[16]) noexcept {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int h = 0; h < 16; h += 8)
    for (int i = 0; i < 4; ++i) {
      t[h + i] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0x88);
      t[h + i + 4] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0xdd);
    }
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
  }
}
#endif

/// The same on bf16 values: dst[c] = float(src[c]), acc[c] += float(src[c])
/// and dst[c] = bf16(src[c]) (bf16 is 16 plain bits: core/bf16.hpp).
inline void widen_contiguous(const bf16* src, std::size_t n, float* __restrict dst) noexcept {
  widen_contiguous(reinterpret_cast<const std::uint16_t*>(src), n, dst);
}
inline void widen_add_contiguous(const bf16* src, std::size_t n, float* __restrict acc) noexcept {
  widen_add_contiguous(reinterpret_cast<const std::uint16_t*>(src), n, acc);
}
inline void round_contiguous(const float* __restrict src, std::size_t n, bf16* dst) noexcept {
  round_contiguous(src, n, reinterpret_cast<std::uint16_t*>(dst));
}

}  // namespace dimsum::kernels::detail
