#pragma once
/// \file
/// The backward of the fused attention kernel (FlashAttention-2 backward),
/// name-free like `kernels/attention.hpp`, whose `attention_args` it reads.
///
/// The forward saves only its output O and one statistic per query row,
/// lse[i] = log sum_j exp(f(S[i, j])) (`attention_row_stats` computes it
/// key by key), optionally with its rounding error lse_low[i]. The
/// backward never materialises the scores: with D[i] = sum_c dO[i, c] * O[i, c], for each key tile it recomputes
/// P = exp(f(Q Kᵀ) - lse), then dV += Pᵀ dO, dP = dO Vᵀ, dS = P * (dP - D),
/// and with g = df/ds (the product of the live scale stages, or the
/// stages replayed over each row, forward then backward, when f has tanh,
/// a map or a factor or a learned part is wanted; 0 where a
/// causal or boolean mask replaced the score) dQ += (g dS) K,
/// dK += (g dS)ᵀ Q. Key tiles that a causal mask sends wholly to -inf are
/// skipped, and so are the blocks a boolean mask does (`block_mask`: whole
/// tiles, and the empty blocks at either end of a key tile). Extra memory:
/// one BR x BC tile (and one tile of flags per mask source), one BC row
/// per score stage (the replay's) and two values per query row.
///
/// Semantics are those of PyTorch's autograd on the unfused chain: a
/// masked score's gradient is exactly 0 (masked_fill's backward), a row
/// whose scores are all -inf has NaN probabilities, so dV is NaN for its
/// batch index while dQ of that row is 0.
///
/// With `attention_args::bf16_products` (Q, K, V and dO hold bf16 numbers)
/// on a build with AVX512-BF16, the five products run on `vdpbf16ps` with
/// float32 sums: S and dP from the exact operands, dV from P rounded to
/// bf16, dK and dQ from dS rounded to bf16; lse, D and the softmax
/// arithmetic stay float (kernels/attention_backward_bf16.hpp).
///
/// Gradients are written with the strides of their operands (dQ like Q, dK
/// like K, dV like V, dO read like O), so a broadcast batch dim (stride 0)
/// of Q, K or V sums its gradient over that dim. Threads over batch indices
/// (kernels::parallel_for; one thread when a broadcast batch dim makes them
/// share a gradient).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <type_traits>
#include <vector>

#include "dimsum/kernels/attention.hpp"
#include "dimsum/kernels/threads.hpp"

namespace dimsum::kernels {

/// Buffers of one fused attention backward: `fwd` is the forward's
/// arguments (its `out` the saved output), `lse` its per-row statistics
/// (batch-major, `batch_size() * nq` values), `dout` read with `out`'s
/// strides; `dq`, `dk`, `dv` are written with q's, k's and v's strides.
/// With S = bf16 (T = float): dout, dq, dk, dv are bf16, the statistics
/// and the learned parts' sums float (kernels/attention_bf16.hpp).
template <class T, class S = T>
struct attention_grad_args {
  const attention_args<T, S>* fwd = nullptr;
  const T* lse = nullptr;
  const S* dout = nullptr;
  S* dq = nullptr;
  S* dk = nullptr;
  S* dv = nullptr;
  /// The forward's `lse_low` (nullptr: lse alone). With it, P is
  /// exp((f(s) - lse) - lse_low), which keeps a row whose scores are all a
  /// large finite fill (-1e9, where lse rounds log(l) away) equal to the
  /// unfused softmax.
  const T* lse_low = nullptr;
  /// The gradients of the learned parts of f, per batch index (nullptr:
  /// not wanted): dfactor[s][bi] = sum over (i, j) of dF * x, for a
  /// multiply stage s with a factor (x the score it multiplies, dF the
  /// gradient of its result); dslope[bi] = sum over (i, j) of dB * (j - (i
  /// + offset)) for the affine bias (dB the gradient of the biased score).
  /// Each holds `fwd->batch_size()` values, written.
  std::array<T*, max_score_stages> dfactor{};
  T* dslope = nullptr;
  /// The gradient of a generic bias (`score_bias::add`), row by row
  /// (nullptr: not wanted): `dbias(dbias_ctx, bi, i, j0, n, db)` receives
  /// db[x] = dB at (bi, query i, key j0 + x) for x in [0, n), once per
  /// query row and key tile the backward computes (keys it skips have dB
  /// = 0). It is called by the thread running batch index bi, and one
  /// thread runs all of a batch index: a sum per batch index needs no lock.
  void (*dbias)(void* ctx, std::size_t bi, std::size_t i, std::size_t j0, std::size_t n, const T* db) = nullptr;
  void* dbias_ctx = nullptr;
  /// dsink[bi] = -sum over i of P_sink[i] * D[i], the gradient of the sink
  /// logit of batch index bi (P_sink = exp(sink - lse), D = rowsum(dO * O)).
  T* dsink = nullptr;
  /// With the forward's `q16`, `k16`, `v16`: dO as the bf16 numbers it
  /// holds (see `attention_args::q16`).
  bf16_operand dout16{};
};

namespace detail {

/// The scores f(Q Kᵀ) one key at a time, in plain loops: what
/// `attention_row_stats` computes its statistic from (callers whose
/// forward did not save it).
template <class T>
struct attention_score_loops {
  const attention_args<T>& a;

  explicit attention_score_loops(const attention_args<T>& args) : a(args) {}

  /// The score after the stages (and the additive bias), f(raw), at (bi, i, j).
  T score(T raw, std::size_t bi, std::size_t i, std::size_t j) const {
    const std::size_t bias_at = a.bias.present() ? a.bias.at : a.n_stages + 1;
    auto add_bias = [&](T& x) {
      T b;
      a.bias_row(bi, i, j, 1, &b);
      x += b;
    };
    T x = raw;
    for (std::size_t s = 0; s < a.n_stages; ++s) {
      if (s == bias_at) add_bias(x);
      const score_stage<T>& st = a.stages[s];
      switch (st.op) {
        case score_op::multiply: x *= a.stage_value(s, bi); break;
        case score_op::divide: x /= st.value; break;
        case score_op::tanh: x = std::tanh(x); break;
        case score_op::map: x = st.fn(st.ctx, x); break;
        case score_op::causal: {
          const std::size_t pos = i + st.offset;  // keys (pos - window, pos] are kept
          if (j > pos || (st.window != unbounded_window && pos - j >= st.window)) x = st.value;
          break;
        }
        case score_op::mask:
          if (mask_at(a, st, bi, i, j)) x = st.value;
          break;
      }
    }
    if (bias_at == a.n_stages) add_bias(x);
    return x;
  }

  T raw_score(std::size_t bi, std::size_t i, std::size_t j) const {
    const T* qb = a.q + a.batch_offset(a.q_batch, bi) + std::ptrdiff_t(i) * a.q_row;
    const T* kb = a.k + a.batch_offset(a.k_batch, bi) + std::ptrdiff_t(j) * a.k_row;
    T s = T(0);
    for (std::size_t d = 0; d < a.dk; ++d) s += qb[std::ptrdiff_t(d) * a.q_col] * kb[std::ptrdiff_t(d) * a.k_col];
    return s;
  }

  void row_stats(T* lse, T* lse_low) const {
    constexpr T ninf = -std::numeric_limits<T>::infinity();
    const std::size_t nb = a.batch_size();
    for (std::size_t bi = 0; bi < nb; ++bi)
      for (std::size_t i = 0; i < a.nq; ++i) {
        T m, l;  // online: running maximum and sum (from the sink, if any)
        a.row_start(bi, m, l);
        for (std::size_t j = 0; j < a.nk; ++j) {
          const T x = score(raw_score(bi, i, j), bi, i, j);
          if (x > m) {
            l = (m == ninf ? T(0) : l * std::exp(m - x)) + T(1);
            m = x;
          } else if (x == x && m != ninf) {
            l += std::exp(x - m);
          } else if (x != x) {
            m = x;  // NaN score: the row is NaN
          }
        }
        T hi, lo;
        split_log_sum_exp(m, l, hi, lo);
        lse[bi * a.nq + i] = hi;
        if (lse_low) lse_low[bi * a.nq + i] = lo;
      }
  }
};

/// The FlashAttention-2 backward on packed tiles (see the file comment).
/// Per batch index, keys outer and queries inner: for key tile j and query
/// tile i, five products on the GEMM micro-kernel, S = Q Kᵀ and dP = dO Vᵀ
/// (BR x BC), dVᵀ += dOᵀ P and dKᵀ += Qᵀ dS (d x BC, kept for the whole key
/// tile) and dQ += dS K (BR x dk, kept for the whole batch index). P and dS
/// are written row by row and copied into NR-key panels, so every product
/// reads its operands as the micro-kernel wants them with no transposes:
/// K and V are packed once per batch index as NR-key panels (kp, vp), K
/// also as NR-column panels (kc), Q and dO transposed (qt, dot).
template <class T, class Arch>
struct attention_backward_kernel {
  using blk = default_blocking<T, Arch>;
  using kernel = micro_kernel<T, Arch, blk::mr, blk::nr>;
  using forward = attention_kernel<T, Arch>;
  static constexpr std::size_t MR = blk::mr, NR = blk::nr;
  static constexpr std::size_t BR = round_up(64, MR);  // query rows per tile
  // keys per tile: a whole number of NR panels and of MR rows (the dVᵀ and
  // dKᵀ products' columns and the dQ product's rows)
  static constexpr std::size_t BC = round_up(64, std::lcm(MR, NR));

  const attention_args<T>& a;
  forward fwd;  // the score stages, row by row (`prepare_row`)
  std::size_t dk_pad, dv_pad, nk_pad, d_rows;
  // Row stride of the packed Qᵀ and dOᵀ: nq rounded up to a cache line
  // plus one line, so that their rows do not all map to one cache set
  // when nq * sizeof(T) is a multiple of 4 KiB (p = 1024 in float).
  std::size_t t_ld;
  // Whether two batch indices share a gradient element (a broadcast batch
  // dim): then gradients are zeroed first and added to, else written.
  bool accumulate;
  T scale = T(1);  // df/ds where no mask replaced the score (no tanh, no factor)
  bool has_mask = false;
  // A tanh or map stage or a factor per batch index: df/ds varies, and the
  // scores' gradients are found by replaying the stages over each row
  // (`attention_kernel::stage_row`, `replay_backward`).
  bool nonlinear = false;
  std::vector<std::ptrdiff_t> off_bc, off_dq, unit;
  /// The five products run on bf16 pairs (`vdpbf16ps`, float32 sums):
  /// `attention_args::bf16_products` on a build with AVX512-BF16. Q, K, V
  /// and dO hold bf16 numbers; P is rounded to bf16 for dVᵀ += dOᵀ P, and
  /// dS for dKᵀ += Qᵀ dS and dQ += dS K (as FlashAttention's bf16 kernels
  /// round them); lse, D and the softmax arithmetic stay float.
  static constexpr bool dot_arch = forward::dot_arch;
  static_assert(!dot_arch || (MR % 2 == 0 && BR % 2 == 0), "query tiles start on a pair of rows");
  bool dot;
  // dk and dv rounded up to pairs, nq to whole MR panels; the row stride of
  // the bf16 Qᵀ and dOᵀ (past nq: zeros, then one cache line)
  std::size_t dk2, dv2, nq_pad, t2_ld;

  explicit attention_backward_kernel(const attention_args<T>& args)
      : a(args),
        fwd(args),
        dk_pad(round_up(args.dk, NR)),
        nk_pad(round_up(args.nk, NR)),
        d_rows(round_up(std::max({args.dk, args.dv, BR}), MR)),
        t_ld(round_up(args.nq, 64 / sizeof(T)) + 64 / sizeof(T)),
        accumulate(shares_operands()),
        dot(dot_arch && args.bf16_products),
        dk2(round_up(args.dk, 2)),
        dv2(round_up(args.dv, 2)),
        nq_pad(round_up(args.nq, MR)),
        t2_ld(round_up(args.nq + 1, 32) + 32) {
    dv_pad = round_up(args.dv, NR);
    for (std::size_t s = 0; s < a.n_stages; ++s) {
      const score_stage<T>& st = a.stages[s];
      if (st.op == score_op::multiply) scale *= st.value;
      if (st.op == score_op::divide) scale /= st.value;
      if (st.op == score_op::mask) has_mask = true;
      if (st.op == score_op::tanh || st.op == score_op::map || st.factor) nonlinear = true;
    }
    off_bc.resize(d_rows);
    for (std::size_t i = 0; i < d_rows; ++i) off_bc[i] = static_cast<std::ptrdiff_t>(i * BC);
    off_dq.resize(BR);
    for (std::size_t i = 0; i < BR; ++i) off_dq[i] = static_cast<std::ptrdiff_t>(i * dk_pad);
    unit.resize(std::max(BC, dk_pad));
    for (std::size_t j = 0; j < unit.size(); ++j) unit[j] = static_cast<std::ptrdiff_t>(j);
  }

  bool q_in_place() const { return a.q_col == 1; }
  bool dout_in_place() const { return a.out_col == 1; }

  /// The per-thread buffers, carved from one scratch block.
  struct buffers {
    // raw: a generic bias's gradient of one row (`replay_backward`);
    // kept: the stages' inputs (a tanh's output) of one row, BC per stage
    T *kp, *vp, *kc, *qt, *dot, *qrow, *dorow, *dq, *dsum, *s, *dp, *ds, *pp, *dsp, *dvt, *dkt, *bias, *raw, *kept;
    // The bf16 products (`dot`; the float panels above are then empty):
    // Q and dO rows (q2[i][dk2], do2[i][dv2]); K and V in NR-key panels of
    // d pairs (kp2, vp2: [panel][d / 2][NR][2]); K in NR-column panels of
    // key pairs (kc2[panel][j / 2][NR][2]); Qᵀ and dOᵀ (qt2[d][t2_ld],
    // dot2); P and dS of the tile in NR-key panels of query-row pairs (pp2,
    // dsp2: [panel][r / 2][NR][2]) and dS row-major (ds2[r][BC]).
    bf16 *q2, *do2, *kp2, *vp2, *kc2, *qt2, *dot2, *pp2, *dsp2, *ds2;
    bool* flags;  // the mask sources' flags of one tile, BR * BC per source
  };
  static constexpr std::size_t n_buffers = 19, n_pair_buffers = 10;
  std::array<std::size_t, n_buffers> sizes() const {
    const std::size_t tile = BR * BC, f = dot ? 0 : 1;  // f: the float products' panels
    return {f * nk_pad * a.dk, f * nk_pad * a.dv, f * dk_pad * a.nk, f * a.dk * t_ld, f * a.dv * t_ld,
            q_in_place() ? 0 : f * a.nq * a.dk, dout_in_place() ? 0 : f * a.nq * a.dv, a.nq * dk_pad, a.nq,
            tile, tile, tile, f * tile, f * tile, a.dv * BC, a.dk * BC, BC, BC, a.n_stages * BC};
  }
  std::array<std::size_t, n_pair_buffers> pair_sizes() const {
    if (!dot) return {};
    const std::size_t tile = BR * BC;
    return {nq_pad * dk2, nq_pad * dv2, nk_pad * dk2, nk_pad * dv2, dk_pad * nk_pad,
            round_up(a.dk, MR) * t2_ld, round_up(a.dv, MR) * t2_ld, tile, tile, tile};
  }
  std::size_t scratch_bytes() const {
    std::size_t total = round_up(mask_sources(a) * BR * BC, scratch_alignment);
    for (std::size_t n : sizes()) total += round_up(n * sizeof(T), scratch_alignment);
    for (std::size_t n : pair_sizes()) total += round_up(n * sizeof(bf16), scratch_alignment);
    return total;
  }
  buffers carve(void* base) const {
    auto* p = static_cast<unsigned char*>(base);
    T* ptr[n_buffers];
    const auto n = sizes();
    for (std::size_t x = 0; x < n_buffers; ++x) {
      ptr[x] = reinterpret_cast<T*>(p);
      p += round_up(n[x] * sizeof(T), scratch_alignment);
    }
    bf16* pair[n_pair_buffers];
    const auto n2 = pair_sizes();
    for (std::size_t x = 0; x < n_pair_buffers; ++x) {
      pair[x] = reinterpret_cast<bf16*>(p);
      p += round_up(n2[x] * sizeof(bf16), scratch_alignment);
    }
    return {ptr[0],  ptr[1],  ptr[2],  ptr[3],  ptr[4],  ptr[5],  ptr[6],  ptr[7],  ptr[8],  ptr[9],
            ptr[10], ptr[11], ptr[12], ptr[13], ptr[14], ptr[15], ptr[16], ptr[17], ptr[18],
            pair[0], pair[1], pair[2], pair[3], pair[4], pair[5], pair[6], pair[7], pair[8], pair[9],
            reinterpret_cast<bool*>(p)};
  }

  /// src[r, c] (strides rs, cs; rows x cols) into NR-row panels,
  /// dst[panel][c][NR], zero-padded to whole panels.
  static void pack_row_panels(const T* src, std::ptrdiff_t rs, std::ptrdiff_t cs, std::size_t rows,
                              std::size_t cols, T* dst) {
    for (std::size_t p = 0; p * NR < rows; ++p) {
      T* out = dst + p * NR * cols;
      const std::size_t n = std::min(NR, rows - p * NR);
      if (n < NR) std::fill(out, out + NR * cols, T(0));
      // c outer: each c writes NR consecutive values from NR read streams
      const T* row[NR];
      for (std::size_t x = 0; x < n; ++x) row[x] = src + static_cast<std::ptrdiff_t>(p * NR + x) * rs;
      for (std::size_t c = 0; c < cols; ++c) {
        const std::ptrdiff_t off = static_cast<std::ptrdiff_t>(c) * cs;
        for (std::size_t x = 0; x < n; ++x) out[c * NR + x] = row[x][off];
      }
    }
  }
  /// src[r, c] into NR-column panels, dst[panel][r][NR], zero-padded.
  static void pack_col_panels(const T* src, std::ptrdiff_t rs, std::ptrdiff_t cs, std::size_t rows,
                              std::size_t cols, T* dst) {
    for (std::size_t p = 0; p * NR < cols; ++p) {
      const std::size_t n = std::min(NR, cols - p * NR);
      for (std::size_t r = 0; r < rows; ++r) {
        T* out = dst + (p * rows + r) * NR;
        const T* row = src + static_cast<std::ptrdiff_t>(r) * rs + static_cast<std::ptrdiff_t>(p * NR) * cs;
        for (std::size_t x = 0; x < n; ++x) out[x] = row[static_cast<std::ptrdiff_t>(x) * cs];
        for (std::size_t x = n; x < NR; ++x) out[x] = T(0);
      }
    }
  }
  /// dst[r, c] = src[r, c] (Add: +=) for rows x cols elements, any
  /// strides, in 16 x 16 blocks: when one side walks a column, a block
  /// keeps its cache lines (and, with a large stride, its cache sets) from
  /// being evicted before their other elements are used.
  /// Float rows walked in both (dQ's store) take whole vectors; a float
  /// transposition (dK's and dV's, src_rs = dst_cs = 1) on AVX-512 takes
  /// 16 x 16 blocks transposed in registers, its edges the loops below.
  template <bool Add = false>
  static void copy_2d(const T* src, std::ptrdiff_t src_rs, std::ptrdiff_t src_cs, std::size_t rows,
                      std::size_t cols, T* dst, std::ptrdiff_t dst_rs, std::ptrdiff_t dst_cs) {
    if constexpr (std::is_same_v<T, float>) {
      if (src_cs == 1 && dst_cs == 1) {
        using ops = simd_ops<T, Arch>;
        constexpr std::size_t W = ops::width;
        for (std::size_t r = 0; r < rows; ++r) {
          const T* in = src + static_cast<std::ptrdiff_t>(r) * src_rs;
          T* out = dst + static_cast<std::ptrdiff_t>(r) * dst_rs;
          std::size_t c = 0;
          if constexpr (W > 1)
            for (; c + W <= cols; c += W) ops::storeu(out + c, Add ? ops::loadu(out + c) + ops::loadu(in + c) : ops::loadu(in + c));
          for (; c < cols; ++c) out[c] = Add ? out[c] + in[c] : in[c];
        }
        return;
      }
#if defined(__AVX512F__)
      constexpr std::size_t B = 16;
      if (src_rs == 1 && dst_cs == 1 && rows >= B && cols >= B) {
        const std::size_t rows16 = rows / B * B, cols16 = cols / B * B;
        for (std::size_t r0 = 0; r0 < rows16; r0 += B)
          for (std::size_t c0 = 0; c0 < cols16; c0 += B)
            transpose16<Add>(src + static_cast<std::ptrdiff_t>(c0) * src_cs + static_cast<std::ptrdiff_t>(r0), src_cs,
                             dst + static_cast<std::ptrdiff_t>(r0) * dst_rs + static_cast<std::ptrdiff_t>(c0), dst_rs);
        if (cols16 < cols)
          copy_2d_loops<Add>(src + static_cast<std::ptrdiff_t>(cols16) * src_cs, src_rs, src_cs, rows16, cols - cols16,
                             dst + static_cast<std::ptrdiff_t>(cols16), dst_rs, dst_cs);
        if (rows16 < rows)
          copy_2d_loops<Add>(src + static_cast<std::ptrdiff_t>(rows16), src_rs, src_cs, rows - rows16, cols,
                             dst + static_cast<std::ptrdiff_t>(rows16) * dst_rs, dst_rs, dst_cs);
        return;
      }
#endif
    }
    copy_2d_loops<Add>(src, src_rs, src_cs, rows, cols, dst, dst_rs, dst_cs);
  }
#if defined(__AVX512F__)
  /// The 16 x 16 floats at src (rows ld apart) transposed into dst (rows
  /// dld apart), or added to it: pairs, quads, then 128-bit lanes swapped.
  template <bool Add>
  static void transpose16(const float* src, std::ptrdiff_t ld, float* dst, std::ptrdiff_t dld) {
    __m512 r[16];
    for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * ld);
    transpose16_words(r);
    for (int i = 0; i < 16; ++i) {
      float* d = dst + i * dld;
      _mm512_storeu_ps(d, Add ? _mm512_add_ps(_mm512_loadu_ps(d), r[i]) : r[i]);
    }
  }
#endif
  template <bool Add>
  static void copy_2d_loops(const T* src, std::ptrdiff_t src_rs, std::ptrdiff_t src_cs, std::size_t rows,
                            std::size_t cols, T* dst, std::ptrdiff_t dst_rs, std::ptrdiff_t dst_cs) {
    constexpr std::size_t B = 16;
    for (std::size_t r0 = 0; r0 < rows; r0 += B)
      for (std::size_t c0 = 0; c0 < cols; c0 += B) {
        const std::size_t r1 = std::min(rows, r0 + B), c1 = std::min(cols, c0 + B);
        for (std::size_t r = r0; r < r1; ++r) {
          const T* in = src + static_cast<std::ptrdiff_t>(r) * src_rs;
          T* out = dst + static_cast<std::ptrdiff_t>(r) * dst_rs;
          for (std::size_t c = c0; c < c1; ++c) {
            const T x = in[static_cast<std::ptrdiff_t>(c) * src_cs];
            T& y = out[static_cast<std::ptrdiff_t>(c) * dst_cs];
            y = Add ? y + x : x;
          }
        }
      }
  }

  /// A gradient block into its strided place: written, or added when batch
  /// indices share it.
  void store(const T* src, std::ptrdiff_t rs, std::ptrdiff_t cs, std::size_t rows, std::size_t cols, T* dst,
             std::ptrdiff_t drs, std::ptrdiff_t dcs) const {
    if (accumulate)
      copy_2d<true>(src, rs, cs, rows, cols, dst, drs, dcs);
    else
      copy_2d(src, rs, cs, rows, cols, dst, drs, dcs);
  }

  /// The sums of one batch index's learned-part gradients
  /// (`attention_grad_args::dfactor`, `dslope`), in double: each sums a
  /// term per score (p^2 of them), which in float drifted by ~1e-3 of the
  /// sum at p = 1024 where PyTorch's pairwise sums stay within ~1e-7.
  struct learned_sums {
    double factor[max_score_stages] = {};
    double slope = 0.0;
    const attention_grad_args<T>* g = nullptr;  // its dbias, called per row
  };

  /// sum over j < n of x[j] * y[j] (y == nullptr: x[j] * (base + j)), in
  /// T's lanes over the row and in double across them: a row holds at most
  /// BC terms, and the callers add each row's sum to a double.
  static double row_dot(const T* x, const T* y, T base, std::size_t n) {
    using ops = simd_ops<T, Arch>;
    constexpr std::size_t W = ops::width;
    alignas(64) T lane[W];
    for (std::size_t l = 0; l < W; ++l) lane[l] = T(l);
    const auto iota = ops::load(lane);
    auto acc = ops::zero();
    std::size_t j = 0;
    for (; j + W <= n; j += W) {
      const auto other = y ? ops::loadu(y + j) : iota + ops::broadcast(base + T(j));
      acc = ops::fma(ops::loadu(x + j), other, acc);
    }
    ops::store(lane, acc);
    double sum = 0.0;
    for (std::size_t l = 0; l < W; ++l) sum += double(lane[l]);
    for (; j < n; ++j) sum += double(x[j]) * double(y ? y[j] : base + T(j));
    return sum;
  }

  /// The gradient of the raw scores of the row from d, the gradient of
  /// the final scores f(raw) (in place; n_vec values, only [0, n) meaningful), by
  /// running the stages backward over the whole row on what
  /// `attention_kernel::stage_row` kept: a multiply or divide scales it, tanh multiplies
  /// it by 1 - tanh², a map by its derivative at the map's input, a mask
  /// that replaced a score makes it 0 there (masked_fill's backward). A
  /// factor stage adds sum_j d * input to acc's sum, the affine bias sum_j
  /// d * distance to the slope's; a generic bias's gradient row (the
  /// gradient of the biased score) goes to acc's dbias through `db`.
  void replay_backward(T* d, const T* kept, T* db, const flag_view* views, std::size_t r, std::size_t bi,
                       std::size_t i, std::size_t j0, std::size_t n, std::size_t n_vec, bool unmasked,
                       learned_sums* acc) const {
    using ops = simd_ops<T, Arch>;
    constexpr std::size_t W = ops::width;
    const std::size_t bias_at = a.bias.present() ? a.bias.at : a.n_stages + 1;
    const bool learn_slope = acc != nullptr && a.bias.slope != nullptr;
    const bool learn_bias = acc && acc->g && acc->g->dbias && a.bias.add;
    const T distance0 = learn_slope ? a.bias_distance(i, j0) : T(0);  // of key j0; whole numbers, exact in T
    auto at_bias = [&] {
      if (learn_slope) acc->slope += row_dot(d, nullptr, distance0, n);
      if (learn_bias) {
        std::copy_n(d, n, db);
        acc->g->dbias(acc->g->dbias_ctx, bi, i, j0, n, db);
      }
    };
    if (bias_at == a.n_stages) at_bias();
    const auto one = ops::broadcast(T(1));
    for (std::size_t s = a.n_stages; s-- > 0;) {
      const score_stage<T>& st = a.stages[s];
      const auto v = ops::broadcast(a.stage_value(s, bi));
      const T* in = kept + s * BC;
      switch (st.op) {
        case score_op::multiply:
          if (acc && st.factor) acc->factor[s] += row_dot(d, in, T(0), n);
          for (std::size_t j = 0; j < n_vec; j += W) ops::storeu(d + j, ops::loadu(d + j) * v);
          break;
        case score_op::divide:
          for (std::size_t j = 0; j < n_vec; j += W) ops::storeu(d + j, ops::loadu(d + j) / v);
          break;
        case score_op::map:
          if (st.dfn_row)
            st.dfn_row(st.ctx, in, d, n);
          else
            for (std::size_t j = 0; j < n; ++j) d[j] *= st.dfn(st.ctx, in[j]);
          break;
        case score_op::tanh:
          for (std::size_t j = 0; j < n_vec; j += W) {
            const auto t = ops::loadu(in + j);
            ops::storeu(d + j, ops::loadu(d + j) * (one - t * t));
          }
          break;
        case score_op::causal: {
          const key_range kept_cols = causal_kept_columns(st, i, j0, n);
          std::fill(d, d + kept_cols.lo, T(0));
          std::fill(d + kept_cols.hi, d + n, T(0));
          break;
        }
        case score_op::mask:
          if (unmasked) break;
          for (std::size_t j = 0; j < n; ++j) d[j] = views[s](r, j) ? T(0) : d[j];
          break;
      }
      if (s == bias_at) at_bias();
    }
  }

  /// Row r (query i) of the tile, keys [j0, j0 + n) at tile columns [c0,
  /// c0 + n) (c0 a multiple of NR: the empty blocks before are skipped): s
  /// holds the raw scores and becomes P = exp(f(s) - lse), dp holds dO Vᵀ
  /// and ds becomes dS = df/ds * P * (dP - D), exactly 0 where a mask
  /// replaced the score; both are zero on [n, round_up(n, NR)) and copied
  /// into the NR-key panels pp and dsp (row r of each panel).
  /// `views`: the mask stages' flags of keys [j0, j0 + n) (`mask_views`);
  /// `unmasked`: the block mask found no score of the tile masked.
  void row_grad(buffers& buf, const flag_view* views, std::size_t bi, std::size_t r, std::size_t i, std::size_t j0,
                std::size_t c0, std::size_t n, T lse, T lse_low, learned_sums* acc, bool unmasked) const {
    using ops = simd_ops<T, Arch>;
    constexpr std::size_t W = ops::width;
    const std::size_t n_vec = round_up(n, W), n_nr = round_up(n, NR);
    T* s = buf.s + r * BC + c0;
    T* dp = buf.dp + r * BC + c0;
    T* ds = buf.ds + r * BC + c0;
    const bool replayed = nonlinear || acc != nullptr;
    if (replayed)  // f(s), keeping what the stages' backward reads
      fwd.stage_row(s, buf.bias, buf.kept, BC, views, r, bi, i, j0, n, n_vec, unmasked, acc != nullptr);
    else
      fwd.prepare_row(s, buf.bias, views, r, nullptr, bi, i, j0, n, n_vec, unmasked);  // f(s); -inf on [n, n_vec)
    if (std::isfinite(lse) && lse_low != T(0)) {  // exp((s - lse) - lse_low): the low part survives
      const auto hi = ops::broadcast(lse);
      for (std::size_t j = 0; j < n_vec; j += W) ops::storeu(s + j, ops::loadu(s + j) - hi);
      exp_shifted_sum<T, Arch>(s, n_vec, lse_low);
    } else if (std::isfinite(lse)) {
      exp_shifted_sum<T, Arch>(s, n_vec, lse);
    } else {  // a row of only -inf scores: NaN, as exp(-inf - -inf)
      for (std::size_t j = 0; j < n_vec; ++j) s[j] = std::exp(s[j] - lse);
    }
    for (std::size_t j = n; j < n_nr; ++j) s[j] = T(0);
    const auto vd = ops::broadcast(buf.dsum[i]), vg = ops::broadcast(replayed ? T(1) : scale);
    for (std::size_t j = 0; j < n_vec; j += W)
      ops::storeu(ds + j, vg * (ops::loadu(s + j) * (ops::loadu(dp + j) - vd)));
    if (replayed) replay_backward(ds, buf.kept, buf.raw, views, r, bi, i, j0, n, n_vec, unmasked, acc);
    // masked_fill's backward: exactly 0 where a mask replaced the score;
    // a causal stage keeps the tile columns [from, to) (as prepare_row)
    std::size_t from = 0, to = n;
    for (std::size_t st = 0; st < a.n_stages; ++st) {
      if (a.stages[st].op != score_op::causal) continue;
      const key_range kept = causal_kept_columns(a.stages[st], i, j0, n);
      from = std::max(from, kept.lo);
      to = std::min(to, kept.hi);
    }
    if (scale == T(0) || from > to) from = to = 0;
    for (std::size_t j = 0; j < from; ++j) ds[j] = T(0);
    for (std::size_t j = to; j < n_nr; ++j) ds[j] = T(0);
    if (has_mask && !unmasked)
      for (std::size_t st = 0; st < a.n_stages; ++st) {
        if (a.stages[st].op != score_op::mask) continue;
        for (std::size_t j = from; j < to; ++j)
          if (views[st](r, j)) ds[j] = T(0);
      }
    if (dot) return;  // the panels of row pairs: `pair_panels`, once the tile's rows are done
    for (std::size_t jp = 0; jp < n_nr; jp += NR) {
      std::copy_n(s + jp, NR, buf.pp + ((c0 + jp) / NR) * BR * NR + r * NR);
      std::copy_n(ds + jp, NR, buf.dsp + ((c0 + jp) / NR) * BR * NR + r * NR);
    }
  }

#if defined(__AVX512BF16__) && defined(__AVX512F__) && defined(__AVX512BW__)
  /// Rows [0, rows) and columns [0, cols) of src (bf16, row stride rs,
  /// columns contiguous; both counts multiples of 32) transposed into dst
  /// (dst[c * t2_ld + i] = src[i, c]): per 32 rows and 32 columns, each
  /// pair of rows interleaved into 32 words (one per column, the two rows'
  /// values), and the 16 pairs' words transposed in registers.
  void transpose_rows(const bf16* src, std::ptrdiff_t rs, std::size_t rows, std::size_t cols, bf16* dst) const {
    const __m512i lo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6, 37,
                                        5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
    const __m512i hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
    for (std::size_t i0 = 0; i0 < rows; i0 += 32)
      for (std::size_t c0 = 0; c0 < cols; c0 += 32) {
        __m512 w[2][16];
        for (std::size_t ip = 0; ip < 16; ++ip) {
          const bf16* r0 = src + static_cast<std::ptrdiff_t>(i0 + 2 * ip) * rs + static_cast<std::ptrdiff_t>(c0);
          const __m512i a0 = _mm512_loadu_si512(r0), a1 = _mm512_loadu_si512(r0 + rs);
          w[0][ip] = _mm512_castsi512_ps(_mm512_permutex2var_epi16(a0, lo, a1));
          w[1][ip] = _mm512_castsi512_ps(_mm512_permutex2var_epi16(a0, hi, a1));
        }
        for (std::size_t h = 0; h < 2; ++h) {
          transpose16_words(w[h]);
          for (std::size_t c = 0; c < 16; ++c)
            _mm512_storeu_ps(reinterpret_cast<float*>(dst + (c0 + 16 * h + c) * t2_ld + i0), w[h][c]);
        }
      }
  }
#endif

  /// One operand of the packing below: S = T holding bf16 numbers, or bf16.
  template <class S>
  struct source {
    const S* p;
    std::ptrdiff_t row, col;
  };

  /// The bf16 operands of batch index bi (`dot`), packed once: Q and dO
  /// rows, K and V in key panels of d pairs, K in column panels of key
  /// pairs, Qᵀ and dOᵀ; zero wherever a product reads past the operands.
  template <class S>
  void pack_pairs(buffers& buf, source<S> q, source<S> k, source<S> v, source<S> dout) const {
    auto rows_of_pairs = [&](source<S> src, std::size_t cols, std::size_t cols2, bf16* dst) {
      for (std::size_t i = 0; i < nq_pad; ++i) {
        bf16* out = dst + i * cols2;
        std::size_t c = 0;
        if (i < a.nq) {
          const S* row = src.p + static_cast<std::ptrdiff_t>(i) * src.row;
          if (src.col == 1) {
            if constexpr (std::is_same_v<S, bf16>)
              std::copy_n(row, cols, out);
            else
              forward::round_p_row(row, cols, out);  // exact: bf16 numbers
            c = cols;
          }
          for (; c < cols; ++c) out[c] = forward::bf16_word(row[static_cast<std::ptrdiff_t>(c) * src.col]);
        }
        std::fill(out + c, out + cols2, bf16());
      }
    };
    rows_of_pairs(q, a.dk, dk2, buf.q2);
    rows_of_pairs(dout, a.dv, dv2, buf.do2);
    forward::pack_pairs_along_cols(k.p, k.row, k.col, a.nk, a.dk, dk2, 0, a.nk, buf.kp2);
    forward::pack_pairs_along_cols(v.p, v.row, v.col, a.nk, a.dv, dv2, 0, a.nk, buf.vp2);
    forward::pack_pairs_along_rows(k.p, k.row, k.col, a.nk, a.dk, nk_pad, 0, a.nk, buf.kc2);
    // transposed, in 16 x 16 blocks (as copy_2d); past nq and past d: zero
    auto transposed = [&](source<S> src, std::size_t cols, bf16* dst) {
      // rows [0, iv) and columns [0, cv) in registers (bf16 rows in place)
      std::size_t iv = 0, cv = 0;
#if defined(__AVX512BF16__) && defined(__AVX512F__) && defined(__AVX512BW__)
      if constexpr (std::is_same_v<S, bf16> && dot_arch) {
        if (src.col == 1) {
          iv = a.nq / 32 * 32;
          cv = cols / 32 * 32;
          transpose_rows(src.p, src.row, iv, cv, dst);
        }
      }
#endif
      constexpr std::size_t B = 16;
      for (std::size_t i0 = 0; i0 < a.nq; i0 += B)
        for (std::size_t c0 = i0 < iv ? cv : 0; c0 < cols; c0 += B)
          for (std::size_t i = i0; i < std::min(a.nq, i0 + B); ++i) {
            const S* row = src.p + static_cast<std::ptrdiff_t>(i) * src.row;
            for (std::size_t c = c0; c < std::min(cols, c0 + B); ++c)
              dst[c * t2_ld + i] = forward::bf16_word(row[static_cast<std::ptrdiff_t>(c) * src.col]);
          }
      for (std::size_t c = 0; c < cols; ++c) std::fill(dst + c * t2_ld + a.nq, dst + (c + 1) * t2_ld, bf16());
      std::fill(dst + cols * t2_ld, dst + round_up(cols, MR) * t2_ld, bf16());
    };
    transposed(q, a.dk, buf.qt2);
    transposed(dout, a.dv, buf.dot2);
  }

  /// The tile's P and dS (rows [r0, rows), tile columns [lead, ne_nr))
  /// rounded to bf16 into the panels of row pairs pp2 and dsp2, and dS
  /// row-major into ds2 (`dot`). An odd last row is paired with whatever
  /// the next row of s and ds holds (rows < BR: BR is even): the products
  /// clear that half (`grads_on_pairs`).
  void pair_panels(buffers& buf, std::size_t r0, std::size_t rows, std::size_t lead, std::size_t ne_nr) const {
    auto interleave = [](const T* r0_, const T* r1_, bf16* dst) {
      if (forward::interleave_rows(r0_, r1_, dst)) return;
      for (std::size_t c = 0; c < NR; ++c) {
        dst[2 * c] = bf16(static_cast<float>(r0_[c]));
        dst[2 * c + 1] = bf16(static_cast<float>(r1_[c]));
      }
    };
    for (std::size_t r = r0; r < rows; r += 2)
      for (std::size_t jp = lead; jp < ne_nr; jp += NR) {
        const std::size_t at = (jp / NR) * BR * NR + r * NR;
        interleave(buf.s + r * BC + jp, buf.s + (r + 1) * BC + jp, buf.pp2 + at);
        interleave(buf.ds + r * BC + jp, buf.ds + (r + 1) * BC + jp, buf.dsp2 + at);
      }
    for (std::size_t r = r0; r < rows; ++r) forward::round_p_row(buf.ds + r * BC + lead, ne_nr - lead, buf.ds2 + r * BC + lead);
  }

  /// S = Q Kᵀ and dP = dO Vᵀ of query panels [p0, panels) of the tile at
  /// i0 and its columns [lead, ne) on bf16 pairs (`dot`; whole NR panels).
  void scores_on_pairs(buffers& buf, std::size_t i0, std::size_t p0, std::size_t panels, std::size_t j0,
                       std::size_t lead, std::size_t ne) const {
#if defined(__AVX512BF16__) && defined(__AVX512F__) && defined(__AVX512BW__)
    if constexpr (dot_arch) {
      using dot_kernel = bf16_dot_kernel<MR, NR / 16>;
      for (std::size_t jp = lead; jp < ne; jp += NR)
        for (std::size_t p = p0; p < panels; ++p) {
          const std::size_t row = i0 + p * MR;
          dot_kernel::run_strided(dk2 / 2, buf.q2 + row * dk2, dk2, buf.kp2 + (j0 + jp) * dk2, false,
                                  tile_target<T>{buf.s, off_bc.data() + p * MR, unit.data() + jp, MR, NR, true, T(1), T(0)});
          dot_kernel::run_strided(dv2 / 2, buf.do2 + row * dv2, dv2, buf.vp2 + (j0 + jp) * dv2, false,
                                  tile_target<T>{buf.dp, off_bc.data() + p * MR, unit.data() + jp, MR, NR, true, T(1), T(0)});
        }
      return;
    }
#endif
    (void)buf, (void)i0, (void)p0, (void)panels, (void)j0, (void)lead, (void)ne;
  }

  /// dVᵀ += dOᵀ P, dKᵀ += Qᵀ dS (the sums over the tile's query rows
  /// [r0, rows), in pairs) and dQ += dS K (over its keys [lead, ne), in
  /// pairs) on bf16 pairs (`dot`). An odd count of rows or keys ends on a
  /// half pair: the kernel clears the B operand's half (pp2, dsp2, kc2),
  /// and the A operand's is 0 (Qᵀ and dOᵀ past nq; dS past the tile's keys).
  void grads_on_pairs(buffers& buf, std::size_t i0, std::size_t r0, std::size_t rows, std::size_t p0,
                      std::size_t panels, std::size_t j0, std::size_t lead, std::size_t ne) const {
#if defined(__AVX512BF16__) && defined(__AVX512F__) && defined(__AVX512BW__)
    if constexpr (dot_arch) {
      using dot_kernel = bf16_dot_kernel<MR, NR / 16>;
      const std::size_t ne_nr = round_up(ne, NR), row_pairs = (rows - r0 + 1) / 2;
      const bool odd_rows = (rows - r0) % 2 != 0;
      for (std::size_t jp = lead; jp < ne_nr; jp += NR) {
        const std::size_t cols = std::min(NR, ne - jp), at = (jp / NR) * BR * NR + r0 * NR;
        for (std::size_t p = 0; p * MR < a.dv; ++p)  // dVᵀ += dOᵀ P
          dot_kernel::run_strided(row_pairs, buf.dot2 + p * MR * t2_ld + i0 + r0, t2_ld, buf.pp2 + at, odd_rows,
                                  tile_target<T>{buf.dvt, off_bc.data() + p * MR, unit.data() + jp,
                                                 std::min(MR, a.dv - p * MR), cols, true, T(1), T(1)});
        for (std::size_t p = 0; p * MR < a.dk; ++p)  // dKᵀ += Qᵀ dS
          dot_kernel::run_strided(row_pairs, buf.qt2 + p * MR * t2_ld + i0 + r0, t2_ld, buf.dsp2 + at, odd_rows,
                                  tile_target<T>{buf.dkt, off_bc.data() + p * MR, unit.data() + jp,
                                                 std::min(MR, a.dk - p * MR), cols, true, T(1), T(1)});
      }
      const std::size_t key_pairs = (ne - lead + 1) / 2;
      const bool odd_keys = (ne - lead) % 2 != 0;
      for (std::size_t p = p0; p < panels; ++p)  // dQ += dS K
        for (std::size_t dp = 0; dp < dk_pad; dp += NR)
          dot_kernel::run_strided(key_pairs, buf.ds2 + p * MR * BC + lead, BC,
                                  buf.kc2 + ((dp / NR) * (nk_pad / 2) + (j0 + lead) / 2) * 2 * NR, odd_keys,
                                  tile_target<T>{buf.dq + i0 * dk_pad, off_dq.data() + p * MR, unit.data() + dp,
                                                 std::min(MR, rows - p * MR), NR, true, T(1), T(1)});
      return;
    }
#endif
    (void)buf, (void)i0, (void)r0, (void)rows, (void)p0, (void)panels, (void)j0, (void)lead, (void)ne;
  }

  /// The keys query rows [i_first, i_last] keep (kept_keys), or every key
  /// when one of the rows has no finite score (lse = -inf or NaN): as in
  /// the unfused softmax its P is NaN at every key, masked ones included,
  /// and reaches dV there, so no key tile may be skipped for it.
  key_range kept_or_all(const T* lse, std::size_t i_first, std::size_t i_last) const {
    if (!rows_have_finite_lse(lse, i_first, i_last)) return key_range{0, a.nk};
    return kept_keys(a, fwd.vanish, i_first, i_last);
  }
  /// Whether every query row of [i_first, i_last] has a finite lse.
  static bool rows_have_finite_lse(const T* lse, std::size_t i_first, std::size_t i_last) {
    for (std::size_t i = i_first; i <= i_last; ++i)
      if (!std::isfinite(lse[i])) return false;
    return true;
  }

  /// The gradients' contributions of batch index bi (added to dQ, dK, dV).
  void run_batch(buffers& buf, const block_mask<T>& blocks, const attention_grad_args<T>& g, std::size_t bi) const {
    const T* qb = a.q + a.batch_offset(a.q_batch, bi);
    const T* kb = a.k + a.batch_offset(a.k_batch, bi);
    const T* vb = a.v + a.batch_offset(a.v_batch, bi);
    const std::ptrdiff_t ob = a.batch_offset(a.out_batch, bi);
    const T* dob = g.dout + ob;
    const T* lse = g.lse + bi * a.nq;
    const T* lse_low = g.lse_low ? g.lse_low + bi * a.nq : nullptr;
    // Operands packed once per batch index.
    const auto tld = static_cast<std::ptrdiff_t>(t_ld);
    if (dot && fwd.in_place_pairs() && g.dout16.p) {
      pack_pairs<bf16>(buf, {a.q16.p, a.q16.row, a.q16.col}, {a.k16.p, a.k16.row, a.k16.col},
                       {a.v16.p, a.v16.row, a.v16.col}, {g.dout16.p, g.dout16.row, g.dout16.col});
    } else if (dot) {
      pack_pairs<T>(buf, {qb, a.q_row, a.q_col}, {kb, a.k_row, a.k_col}, {vb, a.v_row, a.v_col},
                    {dob, a.out_row, a.out_col});
    } else {
      pack_row_panels(kb, a.k_row, a.k_col, a.nk, a.dk, buf.kp);
      pack_row_panels(vb, a.v_row, a.v_col, a.nk, a.dv, buf.vp);
      pack_col_panels(kb, a.k_row, a.k_col, a.nk, a.dk, buf.kc);
      copy_2d(qb, a.q_row, a.q_col, a.nq, a.dk, buf.qt, 1, tld);  // Qᵀ
      copy_2d(dob, a.out_row, a.out_col, a.nq, a.dv, buf.dot, 1, tld);  // dOᵀ
      if (!q_in_place()) copy_2d(qb, a.q_row, a.q_col, a.nq, a.dk, buf.qrow, std::ptrdiff_t(a.dk), 1);
      if (!dout_in_place()) copy_2d(dob, a.out_row, a.out_col, a.nq, a.dv, buf.dorow, std::ptrdiff_t(a.dv), 1);
    }
    const T* qrows = q_in_place() ? qb : buf.qrow;
    const std::ptrdiff_t q_ld = q_in_place() ? a.q_row : static_cast<std::ptrdiff_t>(a.dk);
    const T* drows = dout_in_place() ? dob : buf.dorow;
    const std::ptrdiff_t d_ld = dout_in_place() ? a.out_row : static_cast<std::ptrdiff_t>(a.dv);
    // D = rowsum(dO * O): with rows contiguous, per row; else, with dOᵀ
    // packed, O's columns are walked once each and the rows' sums advance
    // together (contiguous in dsum)
    if (a.out_col == 1) {  // rows contiguous in both: one dot product per row
      const T* o = a.out + ob;
      for (std::size_t i = 0; i < a.nq; ++i) {
        const std::ptrdiff_t at = static_cast<std::ptrdiff_t>(i) * a.out_row;
        buf.dsum[i] = static_cast<T>(row_dot(dob + at, o + at, T(0), a.dv));
      }
    } else {
      std::fill(buf.dsum, buf.dsum + a.nq, T(0));
    }
    for (std::size_t c = 0; a.out_col != 1 && c < a.dv; ++c) {
      const T* o = a.out + ob + static_cast<std::ptrdiff_t>(c) * a.out_col;
      if (dot) {  // no float dOᵀ: dO read in place
        const T* d = dob + static_cast<std::ptrdiff_t>(c) * a.out_col;
        for (std::size_t i = 0; i < a.nq; ++i)
          buf.dsum[i] += d[static_cast<std::ptrdiff_t>(i) * a.out_row] * o[static_cast<std::ptrdiff_t>(i) * a.out_row];
        continue;
      }
      const T* d = buf.dot + c * t_ld;
      for (std::size_t i = 0; i < a.nq; ++i) buf.dsum[i] += d[i] * o[static_cast<std::ptrdiff_t>(i) * a.out_row];
    }
    if (g.dsink) {  // the sink's weight times D, per row
      const T sink = a.sink[a.batch_offset(a.sink_batch, bi)];
      T sum = T(0);
      for (std::size_t i = 0; i < a.nq; ++i)
        sum += std::exp((sink - lse[i]) - (lse_low ? lse_low[i] : T(0))) * buf.dsum[i];
      g.dsink[bi] = -sum;
    }
    std::fill(buf.dq, buf.dq + a.nq * dk_pad, T(0));
    const bool learns = learns_parts(g);
    learned_sums acc;
    acc.g = &g;
    for (std::size_t j0 = 0; j0 < a.nk; j0 += BC) {
      const std::size_t n = std::min(BC, a.nk - j0);
      std::fill(buf.dkt, buf.dkt + a.dk * BC, T(0));  // dKᵀ and dVᵀ of the key tile, summed over query tiles
      std::fill(buf.dvt, buf.dvt + a.dv * BC, T(0));
      bool started = false;
      for (std::size_t i0 = 0; i0 < a.nq; i0 += BR) {
        const std::size_t rows = std::min(BR, a.nq - i0), panels = (rows + MR - 1) / MR;
        // causal or window stages whose masked keys vanish: a query tile
        // that keeps none of this key tile's keys adds nothing to it
        const key_range kept = kept_or_all(lse, i0, i0 + rows - 1);
        if (kept.hi <= j0 || kept.lo >= j0 + n) continue;
        // Within it, the keys past the last one any row keeps and the
        // leading row panels that keep none of the keys (the tiles along a
        // causal diagonal) contribute nothing either: P and dS are 0 there.
        std::size_t ne = std::min(n, kept.hi - j0);
        // The block mask: a tile whose blocks are all empty adds nothing
        // (its P and dS are 0; a row with no finite score made `kept` all
        // keys and is never skipped), empty blocks at either end are cut
        // off (the tile's columns [lead, ne) are computed), and a full tile
        // does not read the masks.
        bool unmasked = false;
        std::size_t lead = 0;
        if (blocks.active()) {
          const std::size_t qb = i0 / BR;
          const bool finite_rows = rows_have_finite_lse(lse, i0, i0 + rows - 1);
          std::size_t live = ne;
          while (finite_rows && live > 0 && blocks.at(bi, qb, (j0 + live - 1) / NR) == block_kind::empty)
            live = (live - 1) / NR * NR;
          while (finite_rows && lead < live && blocks.at(bi, qb, (j0 + lead) / NR) == block_kind::empty) lead += NR;
          lead = std::min(lead, live);
          count_blocks(a.tile_counts, block_kind::empty, (ne - live + NR - 1) / NR + lead / NR);
          if (live == lead) continue;
          ne = live;
          unmasked = blocks.all_full(bi, qb, j0 + lead, j0 + ne);
          count_blocks(a.tile_counts, unmasked ? block_kind::full : block_kind::partial, (ne - lead + NR - 1) / NR);
        }
        flag_view views[max_score_stages];
        if (has_mask && !unmasked) mask_views(a, views, buf.flags, BR * BC, bi, i0, rows, j0 + lead, ne - lead);
        const std::size_t ne_nr = round_up(ne, NR);
        std::size_t p0 = 0;
        for (; p0 + 1 < panels; ++p0) {
          const key_range pk = kept_or_all(lse, i0 + p0 * MR, i0 + (p0 + 1) * MR - 1);
          if (pk.hi > j0 && pk.lo < j0 + ne) break;
        }
        const std::size_t r0 = p0 * MR;
        if (dot) {
          scores_on_pairs(buf, i0, p0, panels, j0, lead, ne);
          for (std::size_t r = r0; r < rows; ++r)
            row_grad(buf, views, bi, r, i0 + r, j0 + lead, lead, ne - lead, lse[i0 + r], lse_low ? lse_low[i0 + r] : T(0),
                     learns ? &acc : nullptr, unmasked);
          started = true;
          pair_panels(buf, r0, rows, lead, ne_nr);
          grads_on_pairs(buf, i0, r0, rows, p0, panels, j0, lead, ne);
          if (a.tile_counts) a.tile_counts->bf16_tiles.fetch_add(1, std::memory_order_relaxed);
          continue;
        }
        for (std::size_t jp = lead; jp < ne; jp += NR)
          for (std::size_t p = p0; p < panels; ++p) {  // S = Q Kᵀ, dP = dO Vᵀ
            const std::size_t cols = std::min(NR, round_up(ne - jp, simd_ops<T, Arch>::width));
            kernel::run_with(a.dk, forward::rows_of(qrows + static_cast<std::ptrdiff_t>(i0) * q_ld, q_ld, p, rows),
                             buf.kp + (j0 + jp) * a.dk,
                             tile_target<T>{buf.s, off_bc.data() + p * MR, unit.data() + jp, MR, cols, true, T(1), T(0)});
            kernel::run_with(a.dv, forward::rows_of(drows + static_cast<std::ptrdiff_t>(i0) * d_ld, d_ld, p, rows),
                             buf.vp + (j0 + jp) * a.dv,
                             tile_target<T>{buf.dp, off_bc.data() + p * MR, unit.data() + jp, MR, cols, true, T(1), T(0)});
          }
        for (std::size_t r = r0; r < rows; ++r)
          row_grad(buf, views, bi, r, i0 + r, j0 + lead, lead, ne - lead, lse[i0 + r], lse_low ? lse_low[i0 + r] : T(0),
                   learns ? &acc : nullptr, unmasked);
        started = true;
        for (std::size_t jp = lead; jp < ne_nr; jp += NR) {
          const std::size_t cols = std::min(NR, ne - jp);
          const T* pp = buf.pp + (jp / NR) * BR * NR + r0 * NR;  // panel rows [r0, rows)
          const T* dsp = buf.dsp + (jp / NR) * BR * NR + r0 * NR;
          for (std::size_t p = 0; p * MR < a.dv; ++p)  // dVᵀ += dOᵀ P
            kernel::run_with(rows - r0, forward::rows_of(buf.dot + i0 + r0, tld, p, a.dv), pp,
                             tile_target<T>{buf.dvt, off_bc.data() + p * MR, unit.data() + jp,
                                            std::min(MR, a.dv - p * MR), cols, true, T(1), T(1)});
          for (std::size_t p = 0; p * MR < a.dk; ++p)  // dKᵀ += Qᵀ dS
            kernel::run_with(rows - r0, forward::rows_of(buf.qt + i0 + r0, tld, p, a.dk), dsp,
                             tile_target<T>{buf.dkt, off_bc.data() + p * MR, unit.data() + jp,
                                            std::min(MR, a.dk - p * MR), cols, true, T(1), T(1)});
        }
        for (std::size_t p = p0; p < panels; ++p)  // dQ += dS K
          for (std::size_t dp = 0; dp < dk_pad; dp += NR)
            kernel::run_with(ne - lead, forward::rows_of(buf.ds + lead, static_cast<std::ptrdiff_t>(BC), p, rows),
                             buf.kc + (dp / NR * a.nk + j0 + lead) * NR,
                             tile_target<T>{buf.dq + i0 * dk_pad, off_dq.data() + p * MR, unit.data() + dp,
                                            std::min(MR, rows - p * MR), NR, true, T(1), T(1)});
      }
      if (!started && accumulate) continue;  // no query reaches these keys: nothing to add
      const auto bc = static_cast<std::ptrdiff_t>(BC);
      store(buf.dkt, 1, bc, n, a.dk, g.dk + a.batch_offset(a.k_batch, bi) + std::ptrdiff_t(j0) * a.k_row, a.k_row,
            a.k_col);  // dK = (dKᵀ)ᵀ
      store(buf.dvt, 1, bc, n, a.dv, g.dv + a.batch_offset(a.v_batch, bi) + std::ptrdiff_t(j0) * a.v_row, a.v_row,
            a.v_col);
    }
    store(buf.dq, std::ptrdiff_t(dk_pad), 1, a.nq, a.dk, g.dq + a.batch_offset(a.q_batch, bi), a.q_row, a.q_col);
    for (std::size_t st = 0; st < a.n_stages; ++st)
      if (g.dfactor[st]) g.dfactor[st][bi] = static_cast<T>(acc.factor[st]);
    if (g.dslope) g.dslope[bi] = static_cast<T>(acc.slope);
  }

  /// Whether g asks for the gradient of a learned part of f.
  static bool learns_parts(const attention_grad_args<T>& g) {
    bool any = g.dslope != nullptr || g.dbias != nullptr;
    for (T* p : g.dfactor) any = any || p != nullptr;
    return any;
  }

  /// Whether two batch indices share an element of q, k or v (a broadcast
  /// batch dim): then their gradients add into one place and batch indices
  /// must run one after another.
  bool shares_operands() const {
    for (std::size_t d = 0; d < a.batch_rank; ++d)
      if (a.batch_extents[d] > 1 && (a.q_batch[d] == 0 || a.k_batch[d] == 0 || a.v_batch[d] == 0)) return true;
    return false;
  }

  void run(const attention_grad_args<T>& g) const {
    const std::size_t nb = a.batch_size();
    // Zero dQ, dK and dV when batch indices add into them or nothing is
    // computed (a broadcast batch dim zeroes the same place again).
    const bool empty = nb == 0 || a.nq == 0 || a.nk == 0;
    for (std::size_t bi = 0; bi < nb && (accumulate || empty); ++bi) {
      T* dqb = g.dq + a.batch_offset(a.q_batch, bi);
      T* dkb = g.dk + a.batch_offset(a.k_batch, bi);
      T* dvb = g.dv + a.batch_offset(a.v_batch, bi);
      for (std::size_t i = 0; i < a.nq; ++i)
        for (std::size_t d = 0; d < a.dk; ++d) dqb[std::ptrdiff_t(i) * a.q_row + std::ptrdiff_t(d) * a.q_col] = T(0);
      for (std::size_t j = 0; j < a.nk; ++j) {
        for (std::size_t d = 0; d < a.dk; ++d) dkb[std::ptrdiff_t(j) * a.k_row + std::ptrdiff_t(d) * a.k_col] = T(0);
        for (std::size_t c = 0; c < a.dv; ++c) dvb[std::ptrdiff_t(j) * a.v_row + std::ptrdiff_t(c) * a.v_col] = T(0);
      }
    }
    for (T* p : g.dfactor)
      if (p) std::fill(p, p + nb, T(0));
    if (g.dslope) std::fill(g.dslope, g.dslope + nb, T(0));
    if (g.dsink) std::fill(g.dsink, g.dsink + nb, T(0));
    if (empty) return;
    const std::size_t bytes = scratch_bytes();
    const block_mask<T> blocks(a, BR, NR);  // once per call, on the grid of query tiles and key panels
    if (a.tile_counts && blocks.active()) {
      a.tile_counts->rows = BR;
      a.tile_counts->cols = NR;
    }
    // five products of the forward's two sizes: serial below the threshold
    const double flops = 2.0 * double(nb) * double(a.nq) * double(a.nk) * double(3 * a.dk + 2 * a.dv);
    const std::size_t threads = flops < parallel_min_flops * 8 || accumulate ? 1 : threads_for_flops(flops);
    parallel_for(
        nb,
        [&](std::size_t bi) {
          buffers buf = carve(thread_scratch().reserve(bytes));
          run_batch(buf, blocks, g, bi);
        },
        std::min(threads, nb));
  }
};

}  // namespace detail

/// The per-query-row statistic the fused backward needs,
/// lse[b * nq + i] = log sum_j exp(f(S[b, i, j])) (-inf for a row of only
/// -inf scores), computed key by key without materialising the scores;
/// with `lse_low`, also each row's rounding error (`attention_args::lse_low`).
/// Example: `std::vector<float> lse(args.batch_size() * args.nq); attention_row_stats(args, lse.data());`
template <class T>
void attention_row_stats(const attention_args<T>& args, T* lse, T* lse_low = nullptr) {
  detail::attention_score_loops<T>(args).row_stats(lse, lse_low);
}

/// The backward of `attention(args)`: dQ, dK, dV from dO, the saved output
/// `args.out` and `attention_row_stats`. Shapes are the forward's (dq like
/// q, dk like k, dv like v). Example:
/// `attention_backward(attention_grad_args<float>{&args, lse.data(), dout, dq, dk, dv});`
template <class T>
void attention_backward(const attention_grad_args<T>& g) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "dimsum: fused attention supports float and double");
  detail::attention_backward_kernel<T, best_gemm_arch>(*g.fwd).run(g);
}

}  // namespace dimsum::kernels
