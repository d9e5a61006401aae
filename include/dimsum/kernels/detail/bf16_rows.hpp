#pragma once
/// \file
/// bf16 words to float and back a row at a time, in vector code on AVX-512
/// and AVX2 (the compiler does not vectorise the plain loops at -O2): the
/// exact widening of bf16 to float and the rounding of float to bf16 as
/// `bf16(float)` rounds. The bf16 attention (kernels/attention_bf16.hpp,
/// attention_backward_bf16.hpp) converts its operands with them, and the
/// float kernel's bf16 products round their probabilities with them.

#include <bit>
#include <cstddef>
#include <cstdint>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "dimsum/core/bf16.hpp"

namespace dimsum::kernels::detail {

/// n contiguous bf16 (as their 16-bit words) into float, exactly: each word
/// shifted into a float's upper half. Vector code on AVX-512 and AVX2 (the
/// compiler does not vectorise the plain loop at -O2).
inline void widen_contiguous(const std::uint16_t* w, std::size_t n, float* __restrict dst) noexcept {
  std::size_t c = 0;
#if defined(__AVX512F__)
  for (; c + 16 <= n; c += 16) {
    const __m512i x = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + c)));
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

/// n floats rounded to bf16 words, as `bf16(float)` rounds (to nearest,
/// ties to even; a NaN stays a NaN, made quiet): vector code on AVX-512
/// and AVX2, the same integer arithmetic.
inline void round_contiguous(const float* __restrict src, std::size_t n, std::uint16_t* w) noexcept {
  std::size_t c = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__)
  const __m512i one = _mm512_set1_epi32(1), half = _mm512_set1_epi32(0x7fff), abs = _mm512_set1_epi32(0x7fffffff),
                inf = _mm512_set1_epi32(0x7f800000), quiet = _mm512_set1_epi32(0x40);
  for (; c + 16 <= n; c += 16) {
    const __m512i u = _mm512_castps_si512(_mm512_loadu_ps(src + c));
    const __m512i hi = _mm512_srli_epi32(u, 16);
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(half, _mm512_and_si512(hi, one))), 16);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs), inf);
    r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(hi, quiet));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(w + c), _mm512_cvtepi32_epi16(r));
  }
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

/// rows x cols elements of src (strides rs, cs) into dst, row-major, as float (exact).
inline void widen_rows(const bf16* src, std::ptrdiff_t rs, std::ptrdiff_t cs, std::size_t rows, std::size_t cols,
                       float* __restrict dst) noexcept {
  for (std::size_t r = 0; r < rows; ++r, dst += cols) {
    const bf16* s = src + static_cast<std::ptrdiff_t>(r) * rs;
    if (cs == 1)  // bf16 is 16 plain bits (core/bf16.hpp)
      widen_contiguous(reinterpret_cast<const std::uint16_t*>(s), cols, dst);
    else
      for (std::size_t c = 0; c < cols; ++c) dst[c] = s[static_cast<std::ptrdiff_t>(c) * cs].to_float();
  }
}

/// rows x cols floats of src (row-major) rounded once into dst (strides rs, cs).
inline void round_rows(const float* __restrict src, std::size_t rows, std::size_t cols, bf16* dst, std::ptrdiff_t rs,
                       std::ptrdiff_t cs) noexcept {
  for (std::size_t r = 0; r < rows; ++r, src += cols) {
    bf16* d = dst + static_cast<std::ptrdiff_t>(r) * rs;
    if (cs == 1)
      round_contiguous(src, cols, reinterpret_cast<std::uint16_t*>(d));
    else
      for (std::size_t c = 0; c < cols; ++c) d[static_cast<std::ptrdiff_t>(c) * cs] = bf16(src[c]);
  }
}

}  // namespace dimsum::kernels::detail
