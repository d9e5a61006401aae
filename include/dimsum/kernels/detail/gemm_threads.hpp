#pragma once
/// \file
/// How one contraction is split over threads; gemm_driver.hpp runs the loops.
///
/// - Independent rectangles: every batch index times `parts` ranges of M or
///   N, each running the whole loop nest with its own packing buffers; no
///   shared writes, no waiting. Used for batches, and for matrices too short
///   in M to share.
/// - A team on one matrix (one batch index, enough MC blocks of M): the
///   threads pack each B block together (NR-wide panels handed out in
///   chunks) into one shared buffer, then take pieces one at a time: an M
///   block (equal blocks, as many as a multiple of the threads), or with A
///   read in place half of one, each packing its own A block. B is packed
///   once, not once per thread.
///   Every piece of work is claimed from a counter, so nobody waits for a
///   given thread: a thread waits only for pieces others have claimed and
///   are running, and a thread the OS has descheduled before it joins finds
///   the work done by the others.
///
/// Every element of C sees the same sequence of operations whatever the
/// split (the K blocking and the micro-kernel's arithmetic do not depend on
/// it), so results are bit-identical for any thread count.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <numeric>
#include <thread>

#include "dimsum/kernels/contraction_args.hpp"
#include "dimsum/kernels/detail/gemm_driver.hpp"
#include "dimsum/kernels/detail/gemm_layout.hpp"
#include "dimsum/kernels/detail/gemm_scratch.hpp"
#include "dimsum/kernels/detail/thread_pool.hpp"
#include "dimsum/kernels/threads.hpp"

namespace dimsum::kernels::detail {

/// What a team has claimed and finished so far. Pieces are numbered across
/// the whole call (B blocks in loop order), so the counters only grow.
struct gemm_team_progress {
  std::atomic<std::size_t> pack_next{0}, pack_done{0}, mul_next{0}, mul_done{0};
};

/// Claims the next piece below `end` into `got`; false when none is left.
inline bool claim_piece(std::atomic<std::size_t>& next, std::size_t end, std::size_t& got) noexcept {
  std::size_t i = next.load(std::memory_order_relaxed);
  while (i < end)
    if (next.compare_exchange_weak(i, i + 1, std::memory_order_relaxed)) {
      got = i;
      return true;
    }
  return false;
}

/// Waits until `done` reaches `target`: pieces other threads are running.
/// Spins briefly, then yields the core (the thread it waits for may need it).
inline void wait_for_pieces(const std::atomic<std::size_t>& done, std::size_t target) noexcept {
  for (int spins = 0; done.load(std::memory_order_acquire) < target; ++spins) {
    if (spins < (1 << 12))
      cpu_relax();
    else
      std::this_thread::yield();
  }
}

/// The M blocks of a team: `count` blocks, a multiple of the thread count,
/// of whole MR tiles spread as evenly as they go (sizes differ by one tile
/// at most, the last may be shorter), none above `max_rows`: 1024 rows under
/// MC = 60 on 2 threads are 18 blocks of 54-60 rows, not 17 of 60 and one
/// of 4.
struct team_m_blocks {
  std::size_t m, mr, tiles, count, max_rows;
  team_m_blocks(std::size_t m_, std::size_t mr_, std::size_t mc_max, std::size_t threads)
      : m(m_), mr(mr_), tiles((m_ + mr_ - 1) / mr_) {
    count = round_up((m + mc_max - 1) / mc_max, threads);
    max_rows = (tiles + count - 1) / count * mr;
  }
  /// The first row of block j (j == count: m).
  std::size_t first(std::size_t j) const { return std::min(m, j * tiles / count * mr); }
};

/// One thread of a team on batch index 0: walks the B blocks in loop order;
/// for each, helps pack it into packed_b[block % 2], waits until it is
/// packed and the previous block's products are in C (K blocks accumulate
/// onto them), then multiplies pieces against it until none is left: an M
/// block times one of `n_parts` column ranges of the B block (whole
/// panels). Halving the columns of a piece halves the work a thread can be
/// left with at the end, at the same B traffic per flop; it is used when A
/// is read in place (a packed A block would be packed once per part).
/// Double buffering lets a thread pack the next block while others finish
/// their last products of this one; a buffer is packed again only after
/// every product that read it has finished (they precede the wait of the
/// block in between).
template <class T, class Arch, class Blk>
void gemm_team_member(const gemm_problem<T>& p, const block_plan<T, Blk>& plan, const team_m_blocks& rows,
                      T* const* packed_b, std::size_t chunk_cols, std::size_t n_parts, gemm_team_progress& g) {
  const batch_operands<T> x(p, 0);
  const std::size_t mc = rows.max_rows, pieces = rows.count * n_parts;
  T* packed_a = nullptr;  // reserved when first needed: a latecomer with no work allocates nothing
  std::size_t pack_end = 0, block = 0;
  for (std::size_t jc = 0; jc < p.nn; jc += plan.nc) {
    const std::size_t nc = std::min(plan.nc, p.nn - jc);
    const std::size_t chunks = (nc + chunk_cols - 1) / chunk_cols;
    for (std::size_t pc = 0; pc < p.nk; pc += plan.kc, ++block) {
      const std::size_t kc = std::min(plan.kc, p.nk - pc);
      T* b = packed_b[block % 2];
      const std::size_t pack_begin = pack_end;
      pack_end += chunks;
      for (std::size_t i = 0; claim_piece(g.pack_next, pack_end, i);) {
        const std::size_t j0 = (i - pack_begin) * chunk_cols;
        pack_b_block<T, Blk>(p, x.b, jc, nc, pc, kc, b, j0, j0 + chunk_cols);
        g.pack_done.fetch_add(1, std::memory_order_release);
      }
      wait_for_pieces(g.pack_done, pack_end);
      wait_for_pieces(g.mul_done, block * pieces);
      const std::size_t part_cols = round_up((nc + n_parts - 1) / n_parts, Blk::nr);
      for (std::size_t i = 0; claim_piece(g.mul_next, (block + 1) * pieces, i);) {
        const std::size_t j = (i - block * pieces) / n_parts, part = (i - block * pieces) % n_parts;
        const std::size_t j0 = std::min(nc, part * part_cols), j1 = std::min(nc, j0 + part_cols);
        if (j0 < j1) {
          if (packed_a == nullptr) packed_a = static_cast<T*>(thread_scratch().reserve(plan.bytes_a(mc)));
          multiply_rows<T, Arch, Blk>(p, x.a, x.c, jc + j0, j1 - j0, pc, kc, b + j0 * kc, rows.first(j),
                                      rows.first(j + 1), mc, packed_a);
        }
        g.mul_done.fetch_add(1, std::memory_order_release);
      }
    }
  }
}

/// The shared packed-B buffers of the teams a thread leads (two B blocks).
inline aligned_scratch& team_scratch() {
  thread_local aligned_scratch scratch;
  return scratch;
}

/// C of batch index 0 by a team of `threads` (the calling thread and pool
/// workers), M in the blocks of `rows`.
template <class T, class Arch, class Blk>
void gemm_team(const gemm_problem<T>& p, const block_plan<T, Blk>& plan, const team_m_blocks& rows,
               std::size_t threads) {
  const std::size_t bytes_b = plan.bytes_b();
  auto* buf = static_cast<unsigned char*>(team_scratch().reserve(2 * bytes_b));
  T* const packed_b[2] = {reinterpret_cast<T*>(buf), reinterpret_cast<T*>(buf + bytes_b)};
  // About four chunks per thread per B block, of whole panels.
  const std::size_t panels = (plan.nc + Blk::nr - 1) / Blk::nr;
  const std::size_t chunk_cols = std::max<std::size_t>(1, panels / (4 * threads)) * Blk::nr;
  const std::size_t n_parts = p.a_k_unit && plan.nc <= unpacked_a_max_cols<Blk> && panels >= 4 ? 2 : 1;
  gemm_team_progress g;
  parallel_for(
      threads,
      [&](std::size_t) { gemm_team_member<T, Arch, Blk>(p, plan, rows, packed_b, chunk_cols, n_parts, g); },
      threads);
}

template <class T, class Arch, class Blk>
void contract_blocked(const contraction_args<T>& args) {
  const std::size_t nb = args.batch.size();
  gemm_problem<T> p{};
  p.a = args.a;
  p.b = args.b;
  p.c = args.c;
  p.nm = args.m.size();
  p.nn = args.n.size();
  p.nk = args.k.size();
  if (nb == 0 || p.nm == 0 || p.nn == 0) return;
  p.batch = canonical_group(args.batch, operand_a | operand_b | operand_c);
  p.m = canonical_group(args.m, operand_a | operand_c);
  p.bias = args.bias;
  if (args.bias) {
    // The bias's N strides ride in the N group's unused A slot, so its dims
    // merge only where the bias is contiguous too.
    dim_group n = args.n;
    n.stride_a = args.bias_n;
    p.n = canonical_group(n, operand_a | operand_b | operand_c);
  } else {
    p.n = canonical_group(args.n, operand_b | operand_c);
  }
  p.k = canonical_group(args.k, operand_a | operand_b);
  p.alpha = args.alpha;
  p.beta = args.beta;
  if (p.nk == 0) {
    scale_c(p);
    return;
  }
  p.a_m_unit = unit_stride(p.m, p.m.stride_a);
  p.a_k_unit = unit_stride(p.k, p.k.stride_a);
  p.b_k_unit = unit_stride(p.k, p.k.stride_b);
  p.b_n_unit = unit_stride(p.n, p.n.stride_b);
  p.c_n_unit = unit_stride(p.n, p.n.stride_c);

  // Inside another parallel_for a call runs on its thread alone.
  const std::size_t threads =
      in_pool_job() ? 1 : threads_for_flops(2.0 * double(nb) * double(p.nm) * double(p.nn) * double(p.nk));
  if (nb == 1 && threads > 1) {
    const block_plan<T, Blk> plan(p.nk, p.nn);
    const team_m_blocks rows(p.nm, Blk::mr, plan.mc_max, threads);
    if ((p.nm + plan.mc_max - 1) / plan.mc_max >= 2 * threads) return gemm_team<T, Arch, Blk>(p, plan, rows, threads);
  }
  const std::size_t tiles_m = (p.nm + Blk::mr - 1) / Blk::mr;
  const std::size_t tiles_n = (p.nn + Blk::nr - 1) / Blk::nr;

  // Independent work items, one thread each: every batch index times `parts`
  // ranges of M or N (MR / NR aligned), `parts` chosen so the items divide
  // evenly among the threads. Splitting M makes each item pack all of B,
  // splitting N all of A: split the one that repacks less.
  bool split_m = p.nn <= p.nm;
  std::size_t parts = threads / std::gcd(nb, threads);
  if ((split_m ? tiles_m : tiles_n) < parts && (split_m ? tiles_n : tiles_m) > (split_m ? tiles_m : tiles_n))
    split_m = !split_m;
  parts = std::min(parts, split_m ? tiles_m : tiles_n);
  const std::size_t tiles_per_part = ((split_m ? tiles_m : tiles_n) + parts - 1) / parts;
  const std::size_t step = tiles_per_part * (split_m ? Blk::mr : Blk::nr);
  auto work = [&](std::size_t item) {
    const std::size_t bi = item / parts, part = item % parts;
    const std::size_t extent = split_m ? p.nm : p.nn;
    const std::size_t lo = std::min(extent, part * step), hi = std::min(extent, lo + step);
    if (lo == hi) return;
    if (split_m)
      gemm_rectangle<T, Arch, Blk>(p, bi, lo, hi, 0, p.nn);
    else
      gemm_rectangle<T, Arch, Blk>(p, bi, 0, p.nm, lo, hi);
  };
  parallel_for(nb * parts, work, threads);
}

}  // namespace dimsum::kernels::detail
