#pragma once
/// \file
/// The blocked GEMM driver (BLIS loop order).
///
///   for jc in N step NC           C/B column block
///     for pc in K step KC         pack B[pc:+KC, jc:+NC] into KC x NR panels
///       for ic in M step MC       pack A[ic:+MC, pc:+KC] into MR x KC panels
///         for jr in NC step NR    B micro-panel (KC x NR) reused MC/MR times
///           for ir in MC step MR  A micro-panels from the L2-resident block
///             micro-kernel        MR x NR tile of C in registers
///
/// This file holds the loops on one thread (a rectangle of C, or one M
/// block of a team); gemm_threads.hpp splits a call over threads.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <type_traits>

#include "dimsum/kernels/contraction_args.hpp"
#include "dimsum/kernels/detail/cache_sizes.hpp"
#include "dimsum/kernels/detail/gemm_layout.hpp"
#include "dimsum/kernels/detail/gemm_micro.hpp"
#include "dimsum/kernels/detail/gemm_pack.hpp"
#include "dimsum/kernels/detail/gemm_scratch.hpp"
#include "dimsum/kernels/simd.hpp"
#include "dimsum/kernels/threads.hpp"

namespace dimsum::kernels::detail {

/// Register block MR x NR and the largest cache blocks MC (rows of A per L2
/// block), KC (depth of a panel), NC (columns of B per L3 block). The blocks
/// a call uses are chosen at run time from the machine's cache sizes
/// (`cache_blocks_for`), never above these. A_IN_PLACE_COLS: up to this
/// many columns per block, an A whose K is contiguous is read in place
/// rather than packed (`unpacked_a_max_cols`).
template <std::size_t MR, std::size_t NR, std::size_t MC, std::size_t KC, std::size_t NC,
          std::size_t A_IN_PLACE_COLS = 4 * NR>
struct gemm_blocking {
  static constexpr std::size_t mr = MR, nr = NR, mc = MC, kc = KC, nc = NC, a_in_place_cols = A_IN_PLACE_COLS;
  static_assert(MR > 0 && NR > 0 && KC > 0, "dimsum: empty GEMM block");
  static_assert(MC % MR == 0 && NC % NR == 0, "dimsum: MC and NC must be multiples of MR and NR");
};

template <class T, class Arch, class = void>
struct default_blocking_for {
  // Any other xsimd arch (16 registers assumed): 4 x 2 vectors.
  static constexpr std::size_t w = simd_ops<T, Arch>::width;
  using type = gemm_blocking<4, 2 * w, 128, 256, 512 * w>;
};

template <class T>
struct default_blocking_for<T, scalar_arch> {
  using type = gemm_blocking<4, 4, 128, 256, 2048>;
};

// AVX2 / FMA3 (16 ymm): 6 x 16 floats or 6 x 8 doubles = 12 accumulators, 2
// B vectors and 1 broadcast. Measured on a 2-core AMD EPYC (Zen, AVX2 only;
// 32 KiB L1d, 1 MiB L2, 32 MiB L3): a deep KC (1024, so K <= 1024 is one pass
// and C is read and written once) with a small MC beat the classic
// L1-resident KC = 256 by ~8%: the 64 KiB B micro-panel streams from L2 fast
// enough, and the A block (96 x 1024 floats, 384 KiB) stays in L2. The
// double sizes keep the same byte footprints.
template <class T, class Arch>
struct default_blocking_for<T, Arch,
                            std::enable_if_t<std::is_base_of_v<xsimd::avx, Arch> &&
                                             !std::is_base_of_v<xsimd::avx512f, Arch>>> {
  using type = std::conditional_t<std::is_same_v<T, float>,
                                  gemm_blocking<6, 16, 96, 1024, 2048>,
                                  gemm_blocking<6, 8, 48, 1024, 1024>>;
};

/// An AVX-512 tile of MR rows by NV vectors of T, with cache blocks of at
/// most 480 / 240 rows, KC = 1024 and NC = 8192 / 4096 (floats / doubles).
template <class T, std::size_t MR, std::size_t NV, std::size_t A_IN_PLACE_COLS = 4 * NV * 64 / sizeof(T)>
using avx512_tile = gemm_blocking<MR, NV * 64 / sizeof(T), 1920 / sizeof(T), 1024, 32768 / sizeof(T), A_IN_PLACE_COLS>;

// AVX-512 (32 zmm): 12 x 32 floats or 12 x 16 doubles = 24 accumulators, 2 B
// vectors, 1 broadcast: the fused attention's tiles (attention.hpp). The
// GEMM itself uses contract_blocking below.
template <class T, class Arch>
struct default_blocking_for<T, Arch, std::enable_if_t<std::is_base_of_v<xsimd::avx512f, Arch>>> {
  using type = avx512_tile<T, 12, 2>;
};

template <class T, class Arch>
using default_blocking = typename default_blocking_for<T, Arch>::type;

/// The blocking of `contract_on` (the GEMM): default_blocking, except on
/// AVX-512, where 6 x 64 floats or 6 x 32 doubles (24 accumulators, 4 B
/// vectors, 1 broadcast: 10 loads per 24 FMAs, against 14 for 12 x 2
/// vectors). Measured on AMD EPYC (Zen 5), float on one thread (CPU time of
/// the thread, best of rounds interleaved with OpenBLAS 0.3.21's Cooperlake
/// sgemm), with KC = 1024: at 1024^3 and 2048^3, 6 x 64 at 1.01x and 0.99x
/// of OpenBLAS, 8 x 48 at 1.01x and 0.94x, 12 x 32 at 0.98x and 0.92x (12 x
/// 32 with the old fixed MC = 96, KC = 512: 0.91x and 0.83x); at the
/// attention projections (1024 x 2304 x 768, 240 x 20 x 30) 0.95x and 0.89x
/// against 0.78x and 0.71x before. The fused attention keeps 12 x 32: with
/// 6 x 64 tiles its forward at p4096 took 9% more CPU time. The cache blocks
/// are upper bounds: cache_blocks_for picks MC = 60, KC = 1024, NC = 2048
/// floats on a 1 MiB L2 / 32 MiB L3.
template <class T, class Arch, class = void>
struct contract_blocking_for {
  using type = default_blocking<T, Arch>;
};

template <class T, class Arch>
struct contract_blocking_for<T, Arch, std::enable_if_t<std::is_base_of_v<xsimd::avx512f, Arch>>> {
  // A float A with contiguous K is read in place at every N: faster at every
  // shape measured on Zen 5 (docs/design.md, "GEMM: A read in place on
  // AVX-512"); doubles were not measured and keep the default.
  using type = avx512_tile<T, 6, 4, std::is_same_v<T, float> ? 32768 / sizeof(T) : 4 * 4 * 64 / sizeof(T)>;
};

/// AVX2 + FMA3, float: 4 x 24 (12 accumulators, 3 B vectors, 1 broadcast:
/// all 16 ymm; 7 loads per 12 FMAs against 8 for 6 x 16), A with contiguous
/// K read in place at every N (2040 = the largest NC), like the AVX-512
/// GEMM. Measured on AMD EPYC (Zen 5) running x86-64-v3 code, one thread,
/// thread CPU time interleaved with OpenBLAS 0.3.21's Haswell sgemm, at
/// 1024^3 and 2048^3: 6 x 16 packed (the default tile) 0.96-0.97x and
/// 0.97-1.00x, 6 x 16 in place 0.99-1.00x and 0.96-1.01x, 4 x 24 packed
/// 0.98x, 4 x 24 in place 1.00-1.02x and 1.01-1.02x (MC 48-192 alike).
/// The fused attention and doubles keep 6 x 16 / 6 x 8 (default_blocking).
template <class T, class Arch>
struct contract_blocking_for<T, Arch,
                             std::enable_if_t<std::is_same_v<T, float> &&
                                              std::is_base_of_v<xsimd::fma3<xsimd::avx2>, Arch> &&
                                              !std::is_base_of_v<xsimd::avx512f, Arch>>> {
  using type = gemm_blocking<4, 24, 96, 1024, 2040, 2040>;
};

template <class T, class Arch>
using contract_blocking = typename contract_blocking_for<T, Arch>::type;

/// A contraction with canonical groups and the layout facts the loops use.
template <class T>
struct gemm_problem {
  const T* a;
  const T* b;
  T* c;
  dim_group batch, m, n, k;
  std::size_t nm, nn, nk;
  T alpha, beta;
  bool a_m_unit, a_k_unit, b_k_unit, b_n_unit, c_n_unit;
  const T* bias;  // its strides along N are in n.stride_a (A has no N dims)
};

constexpr std::size_t round_up(std::size_t x, std::size_t to) { return (x + to - 1) / to * to; }

/// The size of `ceil(extent / max)` equal blocks covering `extent`, rounded
/// up to a multiple of `unit`; never more than `max` (a multiple of `unit`).
constexpr std::size_t even_block(std::size_t extent, std::size_t max, std::size_t unit) {
  const std::size_t blocks = (extent + max - 1) / max;
  return std::min(max, round_up((extent + blocks - 1) / blocks, unit));
}

/// Cache blocks for a machine, at most Blk's. The A block (MC x KC) and one
/// B micro-panel (KC x NR) share half of L2, with K as deep as Blk allows
/// (C is then read and written once per KC of K) while an A block keeps at
/// least 4 micro-panels; a B block (KC x NC) takes a quarter of L3. Measured
/// on AMD EPYC (Zen 5, 48 KiB L1d, 1 MiB L2, 32 MiB L3, AVX-512), 1024^3
/// float on one thread, CPU time of the thread: KC = 1024 with MC = 96 beat
/// the fixed KC = 512, MC = 96 by about 7%; the same rule gives the AVX2
/// blocks measured on Zen 2 (6 x 16, MC = 96, KC = 1024).
struct cache_blocks {
  std::size_t mc, kc, nc;
};

template <class T, class Blk>
cache_blocks cache_blocks_for(const cache_sizes& caches) {
  constexpr std::size_t MR = Blk::mr, NR = Blk::nr, S = sizeof(T);
  const std::size_t half_l2 = caches.l2 / 2;
  const std::size_t kc = std::max<std::size_t>(1, std::min(Blk::kc, half_l2 / ((4 * MR + NR) * S)));
  const std::size_t mc_fit = half_l2 / (kc * S);
  const std::size_t mc = std::clamp((mc_fit > NR ? mc_fit - NR : 0) / MR * MR, MR, Blk::mc);
  const std::size_t nc = std::clamp(caches.l3 / 4 / (kc * S) / NR * NR, NR, Blk::nc);
  return {mc, kc, nc};
}

/// This machine's blocks for Blk (computed once).
template <class T, class Blk>
const cache_blocks& machine_blocks() {
  static const cache_blocks b = cache_blocks_for<T, Blk>(machine_caches());
  return b;
}

/// Block sizes of one call: near-equal blocks of at most the machine's KC /
/// NC (so 1024 at KC = 768 is two blocks of 512, not 768 and a sliver of
/// 256). The K blocking depends on K and the machine alone, which keeps
/// results independent of how the threads split M and N.
template <class T, class Blk>
struct block_plan {
  std::size_t kc, nc, mc_max;
  block_plan(std::size_t nk, std::size_t n_extent)
      : kc(even_block(nk, machine_blocks<T, Blk>().kc, 1)),
        nc(even_block(n_extent, machine_blocks<T, Blk>().nc, Blk::nr)),
        mc_max(machine_blocks<T, Blk>().mc) {}
  std::size_t mc(std::size_t m_extent) const { return even_block(m_extent, mc_max, Blk::mr); }
  std::size_t bytes_a(std::size_t m_extent) const {
    return round_up(mc(m_extent) * kc * sizeof(T), scratch_alignment);
  }
  std::size_t bytes_b() const { return round_up(round_up(nc, Blk::nr) * kc * sizeof(T), scratch_alignment); }
};

/// Packs B[pc:pc+kc, jc:jc+nc] into NR-wide panels; or only its columns
/// [jr0, jr1) (multiples of NR, or jr1 == nc), into the same places. With N
/// contiguous in B the full panels are packed row by row (pack_row_panels),
/// reading B sequentially; panel by panel, a 1024^3 float GEMM on Zen 5 spent
/// 3.1% of its time packing B, row by row 2.4% (perf samples).
template <class T, class Blk>
void pack_b_block(const gemm_problem<T>& p, const T* b, std::size_t jc, std::size_t nc,
                  std::size_t pc, std::size_t kc, T* packed_b, std::size_t jr0 = 0,
                  std::size_t jr1 = std::size_t(-1)) {
  constexpr std::size_t NR = Blk::nr;
  std::ptrdiff_t k_off[Blk::kc], col[NR];
  fill_offsets(p.k, p.k.stride_b, pc, kc, k_off);
  if (p.b_n_unit && std::min(nc, jr1) >= jr0 + NR) {
    const std::size_t panels = (std::min(nc, jr1) - jr0) / NR;
    pack_row_panels<NR>(packed_b + jr0 * kc, b + offset_of(p.n, p.n.stride_b, jc + jr0), k_off, kc, panels,
                        NR * kc);
    jr0 += panels * NR;
  }
  for (std::size_t jr = jr0; jr < std::min(nc, jr1); jr += NR) {
    const std::size_t nr = std::min(NR, nc - jr);
    fill_offsets(p.n, p.n.stride_b, jc + jr, nr, col);
    pack_panel<NR>(packed_b + jr * kc, b, k_off, kc, col, nr, p.b_n_unit || consecutive(col, nr), p.b_k_unit);
  }
}

/// Up to this many columns per block, an A whose K is contiguous is read in
/// place. By default a few micro-panels of B (each A micro-panel would be
/// reused only a few times, so packing it costs more than it saves: BLIS's
/// "sup" idea); the AVX-512 GEMM reads such an A in place always
/// (`contract_blocking_for`).
template <class Blk>
inline constexpr std::size_t unpacked_a_max_cols = Blk::a_in_place_cols;

/// C[m0:m1, jc:jc+nc] (+)= A[m0:m1, pc:pc+kc] * packed B block: packs A one
/// MC block at a time into packed_a (or reads it in place, above) and runs
/// the micro-kernel over it.
template <class T, class Arch, class Blk>
void multiply_rows(const gemm_problem<T>& p, const T* a, T* c, std::size_t jc, std::size_t nc,
                   std::size_t pc, std::size_t kc, const T* packed_b, std::size_t m0,
                   std::size_t m1, std::size_t mc_blk, T* packed_a) {
  constexpr std::size_t MR = Blk::mr, NR = Blk::nr;
  using kernel = micro_kernel<T, Arch, MR, NR>;
  std::ptrdiff_t k_off[Blk::kc], row_a[Blk::mc], row_c[Blk::mc], col_c[NR], bias_off[NR];
  alignas(scratch_alignment) T bias_panel[NR];
  const bool add_bias = p.bias != nullptr && pc == 0;  // once, with the first K block
  fill_offsets(p.k, p.k.stride_a, pc, kc, k_off);
  const bool a_in_place = p.a_k_unit && nc <= unpacked_a_max_cols<Blk>;
  // Later K blocks accumulate onto what the first one wrote.
  const T beta = pc == 0 ? p.beta : T(1);
  for (std::size_t ic = m0; ic < m1; ic += mc_blk) {
    const std::size_t mc = std::min(mc_blk, m1 - ic);
    fill_offsets(p.m, p.m.stride_a, ic, mc, row_a);
    if (!a_in_place)
      for (std::size_t ir = 0; ir < mc; ir += MR) {
        const std::size_t mr = std::min(MR, mc - ir);
        pack_panel<MR>(packed_a + ir * kc, a, k_off, kc, row_a + ir, mr,
                       p.a_m_unit || consecutive(row_a + ir, mr), p.a_k_unit);
      }
    fill_offsets(p.m, p.m.stride_c, ic, mc, row_c);
    for (std::size_t jr = 0; jr < nc; jr += NR) {
      const std::size_t nr = std::min(NR, nc - jr);
      fill_offsets(p.n, p.n.stride_c, jc + jr, nr, col_c);
      const bool cols_unit = p.c_n_unit || consecutive(col_c, nr);
      if (add_bias) {
        fill_offsets(p.n, p.n.stride_a, jc + jr, nr, bias_off);
        for (std::size_t j = 0; j < NR; ++j) bias_panel[j] = j < nr ? p.bias[bias_off[j]] : T(0);
      }
      for (std::size_t ir = 0; ir < mc; ir += MR) {
        const std::size_t mr = std::min(MR, mc - ir);
        const tile_target<T> t{c,    row_c + ir, col_c, mr, nr, cols_unit, p.alpha, beta,
                               add_bias ? static_cast<const T*>(bias_panel) : nullptr};
        if (a_in_place) {
          rows_a<T, MR> rows;  // rows past mr repeat the first (not stored)
          for (std::size_t i = 0; i < MR; ++i) rows.row[i] = a + row_a[ir + (i < mr ? i : 0)] + k_off[0];
          kernel::run_with(kc, rows, packed_b + jr * kc, t);
        } else {
          kernel::run(kc, packed_a + ir * kc, packed_b + jr * kc, t);
        }
      }
    }
  }
}

template <class T>
struct batch_operands {
  const T* a;
  const T* b;
  T* c;
  batch_operands(const gemm_problem<T>& p, std::size_t bi)
      : a(p.a + offset_of(p.batch, p.batch.stride_a, bi)),
        b(p.b + offset_of(p.batch, p.batch.stride_b, bi)),
        c(p.c + offset_of(p.batch, p.batch.stride_c, bi)) {}
};

/// C[bi, m0:m1, n0:n1] of problem p on the calling thread alone.
template <class T, class Arch, class Blk>
void gemm_rectangle(const gemm_problem<T>& p, std::size_t bi, std::size_t m0, std::size_t m1,
                    std::size_t n0, std::size_t n1) {
  const batch_operands<T> x(p, bi);
  const block_plan<T, Blk> plan(p.nk, n1 - n0);
  const std::size_t bytes_a = plan.bytes_a(m1 - m0), bytes_b = plan.bytes_b();
  alignas(scratch_alignment) unsigned char local[small_scratch_bytes];
  void* scratch = bytes_a + bytes_b <= sizeof local ? static_cast<void*>(local)
                                                    : thread_scratch().reserve(bytes_a + bytes_b);
  T* packed_b = static_cast<T*>(scratch);
  T* packed_a = reinterpret_cast<T*>(static_cast<unsigned char*>(scratch) + bytes_b);

  for (std::size_t jc = n0; jc < n1; jc += plan.nc) {
    const std::size_t nc = std::min(plan.nc, n1 - jc);
    for (std::size_t pc = 0; pc < p.nk; pc += plan.kc) {
      const std::size_t kc = std::min(plan.kc, p.nk - pc);
      pack_b_block<T, Blk>(p, x.b, jc, nc, pc, kc, packed_b);
      multiply_rows<T, Arch, Blk>(p, x.a, x.c, jc, nc, pc, kc, packed_b, m0, m1,
                                  plan.mc(m1 - m0), packed_a);
    }
  }
}

/// K is empty (an extent is 0): C = beta * C (0 when beta == 0), plus the
/// bias when there is one.
template <class T>
void scale_c(const gemm_problem<T>& p) {
  constexpr std::size_t chunk = 256;
  std::ptrdiff_t col[chunk], bias_off[chunk];
  for (std::size_t bi = 0; bi < p.batch.size(); ++bi) {
    T* cb = p.c + offset_of(p.batch, p.batch.stride_c, bi);
    for (std::size_t i = 0; i < p.nm; ++i) {
      T* row = cb + offset_of(p.m, p.m.stride_c, i);
      for (std::size_t j0 = 0; j0 < p.nn; j0 += chunk) {
        const std::size_t len = std::min(chunk, p.nn - j0);
        fill_offsets(p.n, p.n.stride_c, j0, len, col);
        if (p.bias) fill_offsets(p.n, p.n.stride_a, j0, len, bias_off);
        for (std::size_t j = 0; j < len; ++j) {
          T& cj = row[col[j]];
          // C not read when beta == 0; beta * C + bias as one explicit fma
          // (see `opaque` in gemm_micro.hpp).
          if (p.beta == T(0))
            cj = p.bias ? p.bias[bias_off[j]] : T(0);
          else
            cj = p.bias ? simd_ops<T, scalar_arch>::fma(p.beta, cj, p.bias[bias_off[j]]) : p.beta * cj;
        }
      }
    }
  }
}

}  // namespace dimsum::kernels::detail
