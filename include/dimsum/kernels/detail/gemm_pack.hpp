#pragma once
/// \file
/// Packing: gathers a panel of A or B, wherever its elements live, into the
/// contiguous, zero-padded order the micro-kernel streams. This is where the
/// operands' strides are absorbed: a permuted or non-contiguous operand costs
/// a strided gather here and nothing anywhere else (no transpose copies).

#include <cstddef>
#include <cstring>

namespace dimsum::kernels::detail {

/// Copies R consecutive values: 64 bytes at a time while whole 64-byte
/// chunks remain, then one 32-byte chunk when R leaves one (the AVX2 GEMM's
/// 24-float rows: 64 + 32), as inlined vector moves; a plain loop here
/// becomes a memcpy call per row.
template <std::size_t R, class T>
inline void copy_panel_row(T* __restrict dst, const T* __restrict src) noexcept {
  constexpr std::size_t bytes = R * sizeof(T);
  if constexpr (bytes % 32 == 0) {
    const auto* s = reinterpret_cast<const unsigned char*>(src);
    auto* d = reinterpret_cast<unsigned char*>(dst);
#pragma GCC unroll 16
    for (std::size_t x = 0; x + 64 <= bytes; x += 64) {
      unsigned char chunk[64];
      std::memcpy(chunk, s + x, 64);
      std::memcpy(d + x, chunk, 64);
    }
    if constexpr (bytes % 64 != 0) {
      unsigned char chunk[32];
      std::memcpy(chunk, s + bytes - 32, 32);
      std::memcpy(d + bytes - 32, chunk, 32);
    }
  } else {
    for (std::size_t x = 0; x < R; ++x) dst[x] = src[x];
  }
}

/// Packs R-wide panels side by side from rows whose R * panels values are
/// consecutive (row-major B, N contiguous): row by row, so the rows are
/// read sequentially; panel j of row q goes to dst + j * panel_stride + q * R.
template <std::size_t R, class T>
inline void pack_row_panels(T* __restrict dst, const T* src, const std::ptrdiff_t* k_offset, std::size_t kc,
                            std::size_t panels, std::size_t panel_stride) noexcept {
  for (std::size_t q = 0; q < kc; ++q) {
    const T* s = src + k_offset[q];
    T* d = dst + q * R;
    for (std::size_t j = 0; j < panels; ++j, s += R, d += panel_stride) copy_panel_row<R>(d, s);
  }
}

/// Packs one panel of width R (R = MR for A, R = NR for B) over kc values of k:
/// `dst[p * R + x] = src[k_offset[p] + x_offset[x]]` for x < width, and 0 for
/// width <= x < R (padding the edge panels keeps the micro-kernel branch-free).
/// `x_unit` / `k_unit` say that x_offset / k_offset are consecutive, which
/// picks a loop order that reads memory sequentially.
template <std::size_t R, class T>
inline void pack_panel(T* __restrict dst, const T* src, const std::ptrdiff_t* k_offset,
                       std::size_t kc, const std::ptrdiff_t* x_offset, std::size_t width,
                       bool x_unit, bool k_unit) noexcept {
  if (x_unit && width == R) {
    // Rows of the panel are contiguous in memory: copy R at a time.
    for (std::size_t p = 0; p < kc; ++p) copy_panel_row<R>(dst + p * R, src + k_offset[p] + x_offset[0]);
    return;
  }
  if (width < R) {
    for (std::size_t p = 0; p < kc; ++p)
      std::memset(static_cast<void*>(dst + p * R + width), 0, (R - width) * sizeof(T));
  }
  if (k_unit && !x_unit) {
    // Each x is a contiguous run along k (e.g. A row-major with K innermost).
    for (std::size_t x = 0; x < width; ++x) {
      const T* s = src + x_offset[x] + k_offset[0];
      for (std::size_t p = 0; p < kc; ++p) dst[p * R + x] = s[p];
    }
    return;
  }
  for (std::size_t p = 0; p < kc; ++p) {
    const T* s = src + k_offset[p];
    for (std::size_t x = 0; x < width; ++x) dst[p * R + x] = s[x_offset[x]];
  }
}

}  // namespace dimsum::kernels::detail
