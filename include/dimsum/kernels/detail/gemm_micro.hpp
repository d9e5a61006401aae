#pragma once
/// \file
/// The register-blocked micro-kernel of the GEMM: an MR x NR tile of C kept in
/// registers while it accumulates kc rank-1 updates from packed panels, then
/// written to C through C's strides. Written once against `simd_ops`
/// (kernels/simd.hpp), which maps to xsimd batches for a SIMD arch and to
/// plain scalars for `scalar_arch`, so every path shares the same loop
/// structure.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <type_traits>
#include <utility>

#include "dimsum/kernels/simd.hpp"

namespace dimsum::kernels::detail {

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

  /// A tile narrower than NR (an edge of N, or a small N) runs on as many
  /// vector columns as it needs; the arithmetic per element is the same.
  template <class A>
  static void run_with(std::size_t kc, const A& a, const T* __restrict pb, const tile_target<T>& t) noexcept {
    const std::size_t needed = (t.cols + width - 1) / width;
    if constexpr (nv > 1) {
      if (needed <= 1) return run_cols<1>(kc, a, pb, t);
    }
    if constexpr (nv > 2) {
      if (needed <= 2) return run_cols<2>(kc, a, pb, t);
    }
    if constexpr (nv > 3) {
      if (needed <= 3) return run_cols<3>(kc, a, pb, t);
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
    // g++ 12 keeps `result` out of line (a call per accumulator, about 2%
    // of a GEMM). Inlined (always_inline, or branch-free variants per case)
    // it stores every accumulator to the stack in each step of the loop
    // above and the GEMM ran at 0.36x: leave it so.
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
