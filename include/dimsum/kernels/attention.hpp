#pragma once
/// \file
/// The name-free fused attention kernel (flash-attention style):
///
///     out[b, i, c] = sum_j softmax_j( f(S[b, i, j]) ) * V[b, j, c]
///     S[b, i, j]   = sum_d Q[b, i, d] * K[b, j, d]
///
/// where f applies the score stages in order (multiply or divide by a
/// scalar or by a factor per batch index, tanh, a user's function, causal
/// or sliding-window mask, boolean mask) and adds an
/// optional bias (`score_bias`, never materialised: ALiBi's slope times
/// distance computed a vector at a time, any other bias by a row callback)
/// at its place among them; optional sink logits add exp(sink) to each
/// row's denominator. The scores are never materialised:
/// each thread keeps one BR x BC score tile, the running row maxima and sums
/// (online softmax) and a BR x dv accumulator. Keys a causal or window
/// stage sends to -inf for every row of a query tile (past its last row,
/// before its first row's window) are skipped, and so are the blocks a
/// boolean mask sends wholly to -inf (`block_mask`, built once per call;
/// decoding rows too). A boolean mask is read in place from memory or
/// evaluated a tile at a time from a mask source (`score_stage`), so its
/// extra memory is one tile per thread.
/// Q·Kᵀ and P·V run
/// on the GEMM micro-kernel, so raw scores are bit-identical to the unfused
/// einsum's (except for at most `few_rows` query rows, incremental
/// decoding, which run row by row on dot products without packing); exp is vectorised with xsimd. Work items (batch index, query
/// tile) are spread over OpenMP threads; each thread packs K and V of the
/// batch index it works on into its own buffer, so there are no barriers.
///
/// Semantics equal the unfused path's (materialise the scores, apply f,
/// softmax along j, contract with V), which are PyTorch's: a row whose
/// values are all -inf gives NaN, a finite masked value takes part in the
/// softmax like any score, an empty key range gives zeros, and a key whose
/// weight is 0 still multiplies its V row, so NaN or ±inf in V at a masked
/// key makes that output column NaN (0 * NaN, 0 * inf), skipped key tiles
/// included (`skipped_keys_term`).

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "dimsum/kernels/contraction_args.hpp"
#include "dimsum/kernels/detail/bf16_convert.hpp"
#include "dimsum/kernels/detail/gemm_driver.hpp"
#include "dimsum/kernels/detail/gemm_micro.hpp"
#include "dimsum/kernels/detail/gemm_scratch.hpp"
#include "dimsum/kernels/gemm.hpp"
#include "dimsum/kernels/simd.hpp"
#include "dimsum/kernels/softmax.hpp"
#include "dimsum/kernels/threads.hpp"
#include "dimsum/kernels/vector_math.hpp"

namespace dimsum::kernels {

/// Most score stages one fused attention can apply.
inline constexpr std::size_t max_score_stages = 8;

/// What one score stage does to a score s at (b, i, j).
enum class score_op {
  multiply,  ///< s * value
  divide,    ///< s / value
  causal,    ///< value where j > i + offset or i + offset - j >= window, else s
  mask,      ///< value where mask[b, i, j], else s
  tanh,      ///< tanh(s) (soft-capping: a divide, tanh, multiply)
  map        ///< fn(ctx, s): a user's function (its derivative dfn for the backward)
};

/// The window of a causal stage that has none: the plain causal mask.
inline constexpr std::size_t unbounded_window = static_cast<std::size_t>(-1);

template <class T>
struct score_stage {
  score_op op = score_op::multiply;
  T value = T(1);
  // score_op::causal: query i sits at position i + offset and keeps the
  // keys j with i + offset - window < j <= i + offset. A causal mask is
  // the unbounded window with offset 0, so one mechanism serves both.
  std::size_t window = unbounded_window, offset = 0;
  // score_op::mask: the flags, true where the score is replaced, either in
  // memory (`mask`, read in place with the strides below) or from a mask
  // source (`mask_fill`, when `mask` is null): mask_fill(mask_ctx, bi, i0,
  // rows, j0, n, out) writes the flags of batch index bi, query rows
  // [i0, i0 + rows) by keys [j0, j0 + n) row-major into out (row stride n),
  // so the kernels evaluate a boolean expression a block at a time into
  // their own scratch and never hold the whole mask. For a source the
  // strides describe a notional layout: 0 where the flags do not vary (a
  // batch dim the mask lacks, mask_row = 0 for a mask that is the same for
  // every query row), anything else where they may; the kernels only test
  // them for 0 and compare batch offsets (equal offsets, same flags).
  const bool* mask = nullptr;
  std::array<std::ptrdiff_t, max_group_rank> mask_batch{};
  std::ptrdiff_t mask_row = 0, mask_col = 0;  // strides along i and j
  void (*mask_fill)(const void* ctx, std::size_t bi, std::size_t i0, std::size_t rows, std::size_t j0, std::size_t n,
                    bool* out) = nullptr;
  const void* mask_ctx = nullptr;
  // score_op::multiply by a per-batch-index factor (a per-head
  // temperature): when set, the value of batch index bi is
  // factor[batch_offset(factor_batch, bi)] and `value` is unused.
  const T* factor = nullptr;
  std::array<std::ptrdiff_t, max_group_rank> factor_batch{};
  // score_op::map: s = fn(ctx, s), with derivative dfn(ctx, s). The
  // kernels call the row forms when they are set (one indirect call per
  // row of a tile, the user's function inlined and vectorised inside it,
  // `map_row`): fn_row(ctx, in, out, n) writes out[j] = fn(ctx, in[j]),
  // dfn_row(ctx, in, d, n) multiplies d[j] by dfn(ctx, in[j]), for j < n
  // (out may be in). They must compute what fn and dfn compute.
  T (*fn)(const void* ctx, T s) = nullptr;
  T (*dfn)(const void* ctx, T s) = nullptr;
  void (*fn_row)(const void* ctx, const T* in, T* out, std::size_t n) = nullptr;
  void (*dfn_row)(const void* ctx, const T* in, T* d, std::size_t n) = nullptr;
  const void* ctx = nullptr;
};

/// out[j] = f(in[j]) for j < n (out may be in), a block of 16 values at a
/// time through a local array: a loop of known length over values nothing
/// else aliases, which the compiler vectorises (even at -O2) when it can
/// inline f and f has vector arithmetic; the body of a map stage's
/// `fn_row`. op(x, j) gives the value at j from x = in[j].
template <class T, class Op>
inline void map_row(const T* in, T* out, std::size_t n, const Op& op) {
  constexpr std::size_t block = 16;
  std::size_t j = 0;
  for (; j + block <= n; j += block) {
    T x[block];
    for (std::size_t l = 0; l < block; ++l) x[l] = in[j + l];
    for (std::size_t l = 0; l < block; ++l) x[l] = op(x[l], j + l);
    for (std::size_t l = 0; l < block; ++l) out[j + l] = x[l];
  }
  for (; j < n; ++j) out[j] = op(in[j], j);
}

/// An additive term on the scores, computed row by row so that it is never
/// materialised, added after the first `at` stages (before stage `at`).
/// Two forms:
///   - affine (`slope` set): `slope_b * (j - (i + offset))`, ALiBi's slope
///     times the key-minus-query distance, with slope_b read at
///     `slope + batch_offset(slope_batch, bi)`; the kernel computes it a
///     vector of keys at a time from the slope, the row index and an iota;
///   - generic (`add` set): `add(ctx, bi, i, j0, n, out)` writes the bias of
///     batch index bi, query i, keys [j0, j0 + n) into out[0, n) once per
///     row and key tile. A generic bias gathered from a table (`lookup`)
///     also sets `learned` (the table's values, `learned_size` of them)
///     and `scatter(ctx, bi, i, j0, n, db, dlearned)`, which adds db[x],
///     the gradient of the bias at key j0 + x, to the table element it
///     read, in dlearned laid out as the table: the backward's table
///     gradient (attention_grad_args::dbias).
template <class T>
struct score_bias {
  void (*add)(const void* ctx, std::size_t bi, std::size_t i, std::size_t j0, std::size_t n, T* out) = nullptr;
  const void* ctx = nullptr;
  const T* learned = nullptr;
  std::size_t learned_size = 0;
  void (*scatter)(const void* ctx, std::size_t bi, std::size_t i, std::size_t j0, std::size_t n, const T* db,
                  double* dlearned) = nullptr;  // double: a table element sums up to p^2 terms
  std::size_t at = 0;
  const T* slope = nullptr;
  std::array<std::ptrdiff_t, max_group_rank> slope_batch{};
  std::size_t offset = 0;

  bool present() const noexcept { return add != nullptr || slope != nullptr; }
};

/// What the block mask of one fused attention call decided, counted in
/// blocks of `rows` query rows by `cols` keys (the kernels set both): blocks
/// `skipped` (every score of the block is masked to -inf: no Q·Kᵀ, no
/// exp, no P·V), blocks computed `unmasked` (in a tile of blocks that no
/// mask stage masks anywhere: no per-element mask read) and the other
/// computed blocks `masked` (a tile holds several blocks: one partial block
/// makes the whole tile read its masks, and the backward computes the empty
/// blocks between live blocks of a key tile). Blocks
/// outside the key range a causal or window stage keeps are not counted
/// (that range skips them). Also the key tiles (of any size) whose
/// products ran on bf16 pairs (`bf16_tiles`, see
/// `attention_args::bf16_products`). For tests and tuning: set
/// `attention_args::tile_counts`; each pass (forward, backward) adds.
struct attention_tile_counts {
  std::atomic<std::size_t> skipped{0}, unmasked{0}, masked{0};
  std::atomic<std::size_t> bf16_tiles{0};
  std::size_t rows = 0, cols = 0;
};

namespace detail {
/// -1: `bf16_attention_on_pairs()` decides from the build and the CPU; 0 or
/// 1: the bf16 attention's products in float32 or on pairs wherever
/// compiled in (for tests of both paths on one machine).
inline std::atomic<int>& bf16_attention_pairs_choice() noexcept {
  static std::atomic<int> choice{-1};
  return choice;
}
}  // namespace detail

/// Whether the bf16 fused attention (kernels/attention_bf16.hpp, and the
/// tape's bf16 attention) runs its query tiles' products on `vdpbf16ps`
/// pairs (`attention_args::bf16_products`): where the build has
/// AVX512-BF16, on a CPU without AMX-BF16. On the Intel CPUs with AMX
/// (Sapphire Rapids and later) `vdpbf16ps` does half float32 FMA's
/// multiply-adds per cycle, so there the products run in float32 on the
/// bf16 numbers widened (exact), as on builds without AVX512-BF16.
inline bool bf16_attention_on_pairs() noexcept {
  if constexpr (!avx512_bf16_arch::supported()) {
    return false;
  } else {
    const int choice = detail::bf16_attention_pairs_choice().load(std::memory_order_relaxed);
    if (choice >= 0) return choice != 0;
    static const bool pairs = !detail::cpu_has_amx_bf16();
    return pairs;
  }
}

/// A bf16 operand held in place: element [r, c] at p[r * row + c * col].
struct bf16_operand {
  const bf16* p = nullptr;
  std::ptrdiff_t row = 0, col = 0;
};

/// One fused attention: extents, element strides (any, including 0 for a
/// broadcast batch dim of V or of a mask), and the score stages. T is the
/// arithmetic's type (scores, statistics, stage values), S the stored type
/// of Q, K, V and the output: T itself, or `bf16` with T = float
/// (kernels/attention_bf16.hpp: converted to float as each batch index is
/// loaded, every sum in float, the output rounded once).
template <class T, class S = T>
struct attention_args {
  const S* q = nullptr;
  const S* k = nullptr;
  const S* v = nullptr;
  S* out = nullptr;
  std::size_t nq = 0, nk = 0, dk = 0, dv = 0;
  std::ptrdiff_t q_row = 0, q_col = 0;      // Q[i, d]
  std::ptrdiff_t k_row = 0, k_col = 0;      // K[j, d]
  std::ptrdiff_t v_row = 0, v_col = 0;      // V[j, c]
  std::ptrdiff_t out_row = 0, out_col = 0;  // out[i, c]
  std::size_t batch_rank = 0;
  std::array<std::size_t, max_group_rank> batch_extents{};
  std::array<std::ptrdiff_t, max_group_rank> q_batch{}, k_batch{}, v_batch{}, out_batch{};
  std::size_t n_stages = 0;
  std::array<score_stage<T>, max_score_stages> stages{};
  score_bias<T> bias{};  // bias.add == nullptr: none
  /// Sink logits (nullptr: none): one more term exp(sink_b) in each row's
  /// softmax denominator and none in the numerator, the sink of batch index
  /// bi read at `sink + batch_offset(sink_batch, bi)`.
  const T* sink = nullptr;
  std::array<std::ptrdiff_t, max_group_rank> sink_batch{};
  /// When set, the kernel also writes each query row's log-sum-exp of the
  /// staged scores, lse[b * nq + i] (batch-major; -inf for a row of only
  /// -inf scores), the statistic the fused backward reads (not written
  /// when dv is 0).
  T* lse = nullptr;
  /// When set with `lse`, also each row's rounding error of it: the row's
  /// log-sum-exp is lse + lse_low exactly as m + log(l) in T's arithmetic
  /// with one more T of precision (0 for a row of only -inf scores). For a
  /// row whose scores are all a large finite fill (-1e9) lse alone rounds
  /// log(l) away; the backward reads both (`attention_grad_args::lse_low`).
  T* lse_low = nullptr;
  /// When set, the block mask's decisions are added to it (see
  /// `attention_tile_counts`).
  attention_tile_counts* tile_counts = nullptr;
  /// T = float only: Q, K and V hold bf16 numbers (exact in float), as the
  /// bf16 attention (kernels/attention_bf16.hpp) passes them where
  /// `bf16_attention_on_pairs()`. Where the build has AVX512-BF16
  /// (`avx512_bf16_arch::supported()`), the query
  /// tiles' Q·Kᵀ and P·V then run on `vdpbf16ps` with float32 sums, P
  /// rounded to bf16 (to nearest even) for P·V as FlashAttention's bf16
  /// kernels round it; the softmax statistics stay the float P's. Else,
  /// and for the few-rows path, the float arithmetic. The backward
  /// (kernels/attention_backward.hpp) then runs its five products on the
  /// pairs as well: dO must hold bf16 numbers too, and P and dS are
  /// rounded to bf16 for the products that read them.
  bool bf16_products = false;
  /// With `bf16_products` and no batch dims (`batch_rank` 0): Q, K and V
  /// also as the bf16 numbers they hold, where the caller has them so (the
  /// bf16 attention's batch slices). The backward packs its bf16 pairs from
  /// these (the same numbers, no rounding); unset (p null): from q, k, v.
  bf16_operand q16{}, k16{}, v16{};

  std::size_t batch_size() const noexcept {
    std::size_t s = 1;
    for (std::size_t d = 0; d < batch_rank; ++d) s *= batch_extents[d];
    return s;
  }
  /// The offset of flat batch index `bi` for the strides `s`.
  std::ptrdiff_t batch_offset(const std::array<std::ptrdiff_t, max_group_rank>& s, std::size_t bi) const noexcept {
    std::ptrdiff_t off = 0;
    for (std::size_t d = batch_rank; d-- > 0;) {
      off += static_cast<std::ptrdiff_t>(bi % batch_extents[d]) * s[d];
      bi /= batch_extents[d];
    }
    return off;
  }
  /// The value of stage s for batch index bi (its factor's, if it has one).
  T stage_value(std::size_t s, std::size_t bi) const noexcept {
    const score_stage<T>& st = stages[s];
    return st.factor ? st.factor[batch_offset(st.factor_batch, bi)] : st.value;
  }
  /// The running maximum and sum a row of batch index bi starts from:
  /// the sink as one more score whose exp adds to the sum, else -inf and 0.
  void row_start(std::size_t bi, T& m, T& l) const noexcept {
    m = sink ? sink[batch_offset(sink_batch, bi)] : -std::numeric_limits<T>::infinity();
    l = sink ? T(1) : T(0);  // with m = -inf the first key tile's rescale (by 0) drops it
  }
  /// The affine bias's slope of batch index bi.
  T bias_slope(std::size_t bi) const noexcept { return bias.slope[batch_offset(bias.slope_batch, bi)]; }
  /// The affine bias's distance of key j0 from query i, `j0 - (i + offset)`
  /// (a whole number, exact in T).
  T bias_distance(std::size_t i, std::size_t j0) const noexcept {
    return static_cast<T>(static_cast<double>(j0) - static_cast<double>(i + bias.offset));
  }
  /// The bias of batch index bi, query i, keys [j0, j0 + n) into out, in
  /// either form (one value at a time for the affine one: the callers
  /// that vectorise compute it themselves).
  void bias_row(std::size_t bi, std::size_t i, std::size_t j0, std::size_t n, T* out) const {
    if (bias.slope == nullptr) return bias.add(bias.ctx, bi, i, j0, n, out);
    const T slope = bias_slope(bi), sbase = slope * bias_distance(i, j0);
    for (std::size_t x = 0; x < n; ++x) out[x] = std::fma(slope, static_cast<T>(x), sbase);  // as prepare_row
  }
};

namespace detail {

/// A row's log-sum-exp m + log(l) (m its largest score, l the sum of
/// exp(score - m)) as hi + lo: hi rounded to T, lo its rounding error
/// (Knuth's two-sum, exact in T's arithmetic). A row of only -inf scores
/// gives -inf and 0, a NaN maximum NaN and 0.
template <class T>
void split_log_sum_exp(T m, T l, T& hi, T& lo) noexcept {
  if (!std::isfinite(m)) {  // -inf stays -inf; +inf + log(NaN) is NaN, as the unfused softmax
    hi = m == -std::numeric_limits<T>::infinity() ? m : m + std::log(l);
    lo = T(0);
    return;
  }
  const T log_l = std::log(l);
  const T sum = m + log_l;  // only additions: nothing for the compiler to contract
  const T bp = sum - m;
  const T ap = sum - bp;
  hi = sum;
  lo = (m - ap) + (log_l - bp);
}

/// Writes row r's statistics (lse, and lse_low when asked) from its running
/// maximum m and sum l.
template <class T>
void store_row_stats(const attention_args<T>& a, std::size_t r, T m, T l) noexcept {
  T hi, lo;
  split_log_sum_exp(m, l, hi, lo);
  a.lse[r] = hi;
  if (a.lse_low) a.lse_low[r] = lo;
}

/// Whether every score stage s masks ends up -inf whatever the later
/// stages and the bias do (then its masked keys contribute nothing).
template <class T>
bool masked_keys_vanish(const attention_args<T>& a, std::size_t s) {
  if (a.bias.present() && a.bias.at > s) return false;  // a bias of +inf or NaN there would show
  T cand[max_score_stages + 1];
  std::size_t n = 0;
  cand[n++] = a.stages[s].value;
  for (std::size_t t = s + 1; t < a.n_stages; ++t) {
    const score_stage<T>& st = a.stages[t];
    if (st.factor) return false;  // a factor per batch index, of any sign
    for (std::size_t c = 0; c < n; ++c) {
      if (st.op == score_op::multiply) cand[c] = cand[c] * st.value;
      if (st.op == score_op::divide) cand[c] = cand[c] / st.value;
      if (st.op == score_op::tanh) cand[c] = std::tanh(cand[c]);
      if (st.op == score_op::map) cand[c] = st.fn(st.ctx, cand[c]);
    }
    if (st.op == score_op::mask) cand[n++] = st.value;
  }
  for (std::size_t c = 0; c < n; ++c)
    if (!(cand[c] == -std::numeric_limits<T>::infinity())) return false;
  return true;
}

/// Whether every score the last causal stage masks ends up -inf whatever
/// the later stages do: then keys past the causal boundary contribute
/// nothing and are skipped (the backward's rule).
template <class T>
bool causal_keys_vanish(const attention_args<T>& a) {
  std::size_t last = a.n_stages;
  for (std::size_t s = 0; s < a.n_stages; ++s)
    if (a.stages[s].op == score_op::causal) last = s;
  return last != a.n_stages && masked_keys_vanish(a, last);
}

/// The keys [lo, hi) that some row of the query rows [i_first, i_last]
/// keeps under the causal and window stages whose masked keys vanish;
/// every other key has weight 0 for all of them.
struct key_range {
  std::size_t lo, hi;
};
template <class T>
key_range kept_keys(const attention_args<T>& a, const bool* vanish, std::size_t i_first, std::size_t i_last) {
  key_range r{0, a.nk};
  for (std::size_t s = 0; s < a.n_stages; ++s) {
    const score_stage<T>& st = a.stages[s];
    if (st.op != score_op::causal || !vanish[s]) continue;
    r.hi = std::min(r.hi, i_last + st.offset + 1);
    const std::size_t first_pos = i_first + st.offset;
    if (st.window != unbounded_window && first_pos + 1 > st.window) r.lo = std::max(r.lo, first_pos + 1 - st.window);
  }
  r.lo = std::min(r.lo, r.hi);
  return r;
}

/// The columns [lo, hi) of the key tile [j0, j0 + n) that the causal (or
/// window) stage st keeps for query row i: keys (pos - window, pos] with
/// pos = i + offset. The forward's score rows and the backward's dS zeroing
/// share it.
template <class T>
key_range causal_kept_columns(const score_stage<T>& st, std::size_t i, std::size_t j0, std::size_t n) {
  const std::size_t pos = i + st.offset;
  const std::size_t first = st.window == unbounded_window || pos + 1 <= st.window ? 0 : pos + 1 - st.window;
  const std::size_t to = pos + 1 > j0 ? std::min(n, pos + 1 - j0) : 0;
  return {std::min(to, first > j0 ? first - j0 : std::size_t(0)), to};
}

/// How a block of scores (query rows x keys) stands under the boolean mask
/// stages: every score masked to -inf (`empty`: the block is skipped), no
/// score masked by any mask stage (`full`: the masks are not read), or
/// neither (`partial`).
enum class block_kind : std::uint8_t { empty, full, partial };

/// Whether a boolean rectangle (rows x n, strides rs and cs) has any true
/// flag, and whether all are true; stops early once it has both kinds.
struct flag_scan {
  bool any = false, all = true;
};
inline flag_scan scan_flags(const bool* m, std::ptrdiff_t rs, std::ptrdiff_t cs, std::size_t rows, std::size_t n) {
  flag_scan f;
  if (rs == 0) rows = std::min<std::size_t>(rows, 1);  // every row alike (a padding mask)
  for (std::size_t r = 0; r < rows && (f.all || !f.any); ++r) {
    const bool* row = m + static_cast<std::ptrdiff_t>(r) * rs;
    std::size_t j = 0;
    if (cs == 1) {  // eight flags a word: a bool is one byte holding 0 or 1
      constexpr std::uint64_t ones = 0x0101010101010101ull;
      for (; j + 8 <= n; j += 8) {
        std::uint64_t w;
        std::memcpy(&w, row + j, 8);
        f.any = f.any || w != 0;
        f.all = f.all && w == ones;
      }
    }
    for (; j < n; ++j) {
      const bool x = row[static_cast<std::ptrdiff_t>(j) * cs];
      f.any = f.any || x;
      f.all = f.all && x;
    }
  }
  return f;
}

/// The flags of one mask stage over a block of query rows by keys: flag
/// (r, j) of the block at p[r * row + j * col].
struct flag_view {
  const bool* p = nullptr;
  std::ptrdiff_t row = 0, col = 0;
  bool operator()(std::size_t r, std::size_t j) const noexcept {
    return p[static_cast<std::ptrdiff_t>(r) * row + static_cast<std::ptrdiff_t>(j) * col];
  }
};

/// The flags of mask stage st for batch index bi, query rows [i0, i0 +
/// rows) by keys [j0, j0 + n): read in place from a mask in memory, else
/// written by the stage's source into `scratch` (rows * n flags; one row
/// when the flags are the same for every query row).
template <class T>
flag_view mask_block(const attention_args<T>& a, const score_stage<T>& st, std::size_t bi, std::size_t i0,
                     std::size_t rows, std::size_t j0, std::size_t n, bool* scratch) {
  if (st.mask != nullptr)
    return {st.mask + a.batch_offset(st.mask_batch, bi) + static_cast<std::ptrdiff_t>(i0) * st.mask_row +
                static_cast<std::ptrdiff_t>(j0) * st.mask_col,
            st.mask_row, st.mask_col};
  const bool alike = st.mask_row == 0;
  st.mask_fill(st.mask_ctx, bi, i0, alike ? 1 : rows, j0, n, scratch);
  return {scratch, alike ? 0 : static_cast<std::ptrdiff_t>(n), 1};
}

/// Whether mask stage st replaces the score at (bi, i, j), one flag at a
/// time (the plain loops' reader).
template <class T>
bool mask_at(const attention_args<T>& a, const score_stage<T>& st, std::size_t bi, std::size_t i, std::size_t j) {
  bool flag = false;
  return mask_block(a, st, bi, i, 1, j, 1, &flag)(0, 0);
}

/// How many mask stages read a source (each needs `per` flags of scratch).
template <class T>
std::size_t mask_sources(const attention_args<T>& a) {
  std::size_t n = 0;
  for (std::size_t s = 0; s < a.n_stages; ++s) n += a.stages[s].op == score_op::mask && a.stages[s].mask == nullptr;
  return n;
}

/// The flags of every mask stage over query rows [i0, i0 + rows) by keys
/// [j0, j0 + n) into views[s]; the sources write into `flags`, `per`
/// flags each (per >= rows * n).
template <class T>
void mask_views(const attention_args<T>& a, flag_view* views, bool* flags, std::size_t per, std::size_t bi,
                std::size_t i0, std::size_t rows, std::size_t j0, std::size_t n) {
  std::size_t slot = 0;
  for (std::size_t s = 0; s < a.n_stages; ++s) {
    const score_stage<T>& st = a.stages[s];
    if (st.op != score_op::mask) continue;
    views[s] = mask_block(a, st, bi, i0, rows, j0, n, flags + slot * per);
    slot += st.mask == nullptr;
  }
}

/// The block mask of one fused attention call (FlexAttention's BlockMask,
/// built from the boolean mask stages): each block of `rows` query rows by
/// `cols` keys of each batch index is classified once as empty, full or
/// partial. A block is empty when the mask stages whose masked scores end
/// up -inf (`masked_keys_vanish`) together mask all of it, full when no
/// mask stage masks any of it; a block outside the keys the causal or
/// window stages whose masked scores vanish keep for every row of it is
/// empty without reading the masks. Batch indices whose masks are the same (a
/// mask broadcast over heads, stride 0) share one classification. The cost
/// is one read (or, for a mask source, one evaluation) of each flag,
/// against Q·Kᵀ's and P·V's d multiply-adds per score; a source's flags
/// are evaluated one block at a time into a buffer of one block per
/// stage, so the extra memory is that buffer and one byte per block.
/// Without mask stages every block is full and nothing is stored.
template <class T>
struct block_mask {
  std::size_t rows = 0, cols = 0, q_blocks = 0, k_blocks = 0;
  std::vector<std::size_t> slot;  // batch index -> its classification's first block
  std::vector<block_kind> kinds;

  block_mask() = default;
  block_mask(const attention_args<T>& a, std::size_t rows_, std::size_t cols_) : rows(rows_), cols(cols_) {
    bool vanish[max_score_stages] = {}, causal_vanish[max_score_stages] = {}, any_mask = false;
    std::size_t n_vanish = 0;
    for (std::size_t s = 0; s < a.n_stages; ++s) {
      if (a.stages[s].op == score_op::causal) causal_vanish[s] = masked_keys_vanish(a, s);
      if (a.stages[s].op == score_op::mask) {
        any_mask = true;
        vanish[s] = masked_keys_vanish(a, s);
        n_vanish += vanish[s];
      }
    }
    if (!any_mask || a.nq == 0 || a.nk == 0) return;
    std::vector<unsigned char> scratch(std::max<std::size_t>(mask_sources(a), 1) * rows * cols);
    bool* flags = reinterpret_cast<bool*>(scratch.data());  // 0 is false: bool's object representation
    q_blocks = (a.nq + rows - 1) / rows;
    k_blocks = (a.nk + cols - 1) / cols;
    const std::size_t nb = a.batch_size(), per = q_blocks * k_blocks;
    std::vector<std::array<std::ptrdiff_t, max_score_stages>> seen;  // the mask offsets classified so far
    slot.resize(nb);
    for (std::size_t bi = 0; bi < nb; ++bi) {
      std::array<std::ptrdiff_t, max_score_stages> off{};
      for (std::size_t s = 0; s < a.n_stages; ++s)
        if (a.stages[s].op == score_op::mask) off[s] = a.batch_offset(a.stages[s].mask_batch, bi);
      const auto hit = std::find(seen.begin(), seen.end(), off);
      if (hit != seen.end()) {
        slot[bi] = static_cast<std::size_t>(hit - seen.begin()) * per;
        continue;
      }
      slot[bi] = seen.size() * per;
      seen.push_back(off);
      for (std::size_t qb = 0; qb < q_blocks; ++qb) {
        const std::size_t i0 = qb * rows, nr = std::min(rows, a.nq - i0);
        // blocks outside the causal or window range of every row of the
        // block row are -inf there whatever the masks say: not evaluated
        const key_range kept = kept_keys(a, causal_vanish, i0, i0 + nr - 1);
        for (std::size_t kb = 0; kb < k_blocks; ++kb) {
          const std::size_t j0 = kb * cols, n = std::min(cols, a.nk - j0);
          if (j0 >= kept.hi || j0 + n <= kept.lo) {
            kinds.push_back(block_kind::empty);
            continue;
          }
          flag_view view[max_score_stages];
          mask_views(a, view, flags, rows * cols, bi, i0, nr, j0, n);
          bool empty = false, full = true, some = false;  // some: a vanishing stage masks a score here
          for (std::size_t s = 0; s < a.n_stages && !empty; ++s) {
            if (a.stages[s].op != score_op::mask) continue;
            const flag_scan f = scan_flags(view[s].p, view[s].row, view[s].col, nr, n);
            full = full && !f.any;
            empty = vanish[s] && f.all;
            some = some || (vanish[s] && f.any);
          }
          // Two or more stages may empty a block only together (documents
          // and a chunk mask): one more pass over their flags.
          if (!empty && some && n_vanish > 1) empty = covered(a, view, vanish, nr, n);
          kinds.push_back(empty ? block_kind::empty : full ? block_kind::full : block_kind::partial);
        }
      }
    }
  }

  /// Whether every score of the nr x n block is masked by one of the
  /// vanishing mask stages.
  static bool covered(const attention_args<T>& a, const flag_view* view, const bool* vanish, std::size_t nr,
                      std::size_t n) {
    for (std::size_t r = 0; r < nr; ++r)
      for (std::size_t j = 0; j < n; ++j) {
        bool any = false;
        for (std::size_t s = 0; s < a.n_stages && !any; ++s) any = vanish[s] && view[s](r, j);
        if (!any) return false;
      }
    return true;
  }

  bool active() const noexcept { return !kinds.empty(); }
  block_kind at(std::size_t bi, std::size_t qb, std::size_t kb) const noexcept {
    return active() ? kinds[slot[bi] + qb * k_blocks + kb] : block_kind::full;
  }
  /// Whether every block of query block qb, keys [j0, j1) (j0 a multiple of
  /// cols) is full.
  bool all_full(std::size_t bi, std::size_t qb, std::size_t j0, std::size_t j1) const noexcept {
    for (std::size_t kb = j0 / cols; kb * cols < j1; ++kb)
      if (at(bi, qb, kb) != block_kind::full) return false;
    return true;
  }
};

/// Adds to `c` (when set): `n` blocks of kind k, skipped when empty.
inline void count_blocks(attention_tile_counts* c, block_kind k, std::size_t n) {
  if (c == nullptr || n == 0) return;
  (k == block_kind::empty ? c->skipped : k == block_kind::full ? c->unmasked : c->masked).fetch_add(n, std::memory_order_relaxed);
}

template <class T, class Arch>
struct attention_kernel {
  using blk = default_blocking<T, Arch>;
  using kernel = micro_kernel<T, Arch, blk::mr, blk::nr>;
  static constexpr std::size_t MR = blk::mr, NR = blk::nr;
  static constexpr std::size_t BR = round_up(64, MR);   // query rows per tile
  static constexpr std::size_t BC = round_up(128, NR);  // keys per tile
  static constexpr std::size_t few_rows = 4;            // at most this many query rows: run_row
#if defined(__AVX512BF16__) && defined(__AVX512F__) && defined(__AVX512BW__)
  /// Whether this arch can run the products on bf16 pairs (`vdpbf16ps`,
  /// `bf16_products`): the AVX-512 float tiles, 12 rows by 2 vectors.
  static constexpr bool dot_arch = std::is_same_v<T, float> && std::is_base_of_v<xsimd::avx512f, Arch> && NR % 16 == 0;
#else
  static constexpr bool dot_arch = false;
#endif

  const attention_args<T>& a;
  /// The query tiles' products run on bf16 pairs (see `bf16_products`).
  bool dot = false;
  /// This kernel's number among every kernel made (the packed K and V are
  /// kept from one work item of a thread to its next within one call).
  std::uint64_t call_id = next_call_id();
  static std::uint64_t next_call_id() noexcept {
    static std::atomic<std::uint64_t> calls{0};
    return calls.fetch_add(1, std::memory_order_relaxed) + 1;
  }
  bool vanish[max_score_stages] = {};  // masked_keys_vanish of each causal stage
  bool has_map = false;  // a map stage: prepare_row runs the stages a row at a time (`stage_row`)
  // The stages are multiplications and divisions, then at most one causal
  // stage, and there is no bias: prepare_row's vector loop runs them without
  // dispatching on each stage per vector (the same operations in order).
  bool plain_chain = false;
  std::size_t dv_pad, nk_pad;
  std::size_t dk2;  // dk rounded up to pairs (the bf16 products)
  std::ptrdiff_t s_row_off[BR], col_off[BC];
  std::ptrdiff_t o_row_off[BR];

  explicit attention_kernel(const attention_args<T>& args)
      : a(args), dot(dot_arch && args.bf16_products && args.nq > few_rows), dv_pad(round_up(args.dv, NR)),
        nk_pad(round_up(args.nk, NR)), dk2(round_up(args.dk, 2)) {
    for (std::size_t s = 0; s < a.n_stages; ++s)
      vanish[s] = a.stages[s].op == score_op::causal && masked_keys_vanish(a, s);
    for (std::size_t s = 0; s < a.n_stages; ++s) has_map = has_map || a.stages[s].op == score_op::map;
    plain_chain = !a.bias.present();
    for (std::size_t s = 0; s < a.n_stages; ++s) {
      const score_op op = a.stages[s].op;
      const bool arithmetic = op == score_op::multiply || op == score_op::divide;
      const bool last_causal = op == score_op::causal && s + 1 == a.n_stages;
      plain_chain = plain_chain && (arithmetic || last_causal);
    }
    for (std::size_t i = 0; i < BR; ++i) {
      s_row_off[i] = static_cast<std::ptrdiff_t>(i * BC);
      o_row_off[i] = static_cast<std::ptrdiff_t>(i * dv_pad);
    }
    for (std::size_t j = 0; j < BC; ++j) col_off[j] = static_cast<std::ptrdiff_t>(j);
  }

  /// The per-thread buffers, carved from one scratch block.
  struct buffers {
    T *kp, *vp, *qp, *s, *o, *m, *l, *z, *bias, *row_masks;
    // The bf16 products (`dot`): K in NR-key panels of d pairs
    // (kp2[panel][d / 2][NR][2]), V in NR-column panels of key pairs
    // (vp2[panel][j / 2][NR][2]), the query tile's Q rows (q2[r][dk2]) and
    // P rows (p2[r][BC]) row-major, all zero-padded.
    bf16 *kp2 = nullptr, *vp2 = nullptr, *q2 = nullptr, *p2 = nullptr;
    bool* flags;  // the mask sources' flags of one tile, BR * BC per source
    std::size_t batch = static_cast<std::size_t>(-1), packed_from = 0, packed_keys = 0;
    // When set: per batch index, the V rows holding every value that is not
    // finite (found once per call by `run`).
    const key_range* nonfinite_table = nullptr;
    // V rows [nonfinite_lo, nonfinite_hi) of batch index nonfinite_batch
    // hold every row with a value that is not finite (empty: none).
    std::size_t nonfinite_batch = static_cast<std::size_t>(-1), nonfinite_lo = 0, nonfinite_hi = 0;
  };
  std::size_t scratch_bytes() const {
    const bool packs = a.nq > few_rows && !dot;  // run_row reads K and V in place
    const std::size_t kp = packs ? nk_pad * a.dk : 0, vp = packs ? dv_pad * a.nk : 0, qp = BR * a.dk, s = BR * BC,
                      o = BR * dv_pad;
    std::size_t total = round_up(mask_sources(a) * BR * BC, scratch_alignment);
    for (std::size_t n : {kp, vp, qp, s, o, BR, BR, dv_pad, BC, max_score_stages * BC}) total += round_up(n * sizeof(T), scratch_alignment);
    if (dot)
      for (std::size_t n : {nk_pad * dk2, dv_pad * nk_pad, BR * dk2, BR * BC}) total += round_up(n * sizeof(bf16), scratch_alignment);
    return total;
  }
  buffers carve(void* base) const {
    auto* p = static_cast<unsigned char*>(base);
    auto take = [&](std::size_t n) {
      T* r = reinterpret_cast<T*>(p);
      p += round_up(n * sizeof(T), scratch_alignment);
      return r;
    };
    buffers b;
    const bool packs = a.nq > few_rows && !dot;
    b.kp = take(packs ? nk_pad * a.dk : 0);
    b.vp = take(packs ? dv_pad * a.nk : 0);
    b.qp = take(BR * a.dk);
    b.s = take(BR * BC);
    b.o = take(BR * dv_pad);
    b.m = take(BR);
    b.l = take(BR);
    b.z = take(dv_pad);
    b.bias = take(BC);
    b.row_masks = take(max_score_stages * BC);
    if (dot) {
      auto take2 = [&](std::size_t n) {
        bf16* r = reinterpret_cast<bf16*>(p);
        p += round_up(n * sizeof(bf16), scratch_alignment);
        return r;
      };
      b.kp2 = take2(nk_pad * dk2);
      b.vp2 = take2(dv_pad * nk_pad);
      b.q2 = take2(BR * dk2);
      b.p2 = take2(BR * BC);
    }
    b.flags = reinterpret_cast<bool*>(p);
    return b;
  }

  /// What a thread's scratch last held of packed K and V: the call, the
  /// scratch's reservation count when they were packed, where, and the keys
  /// of which batch index. Valid for the thread's next item of the same
  /// call when that item's own reservation is the only one since (nothing
  /// else wrote the scratch in between).
  struct kept_packing {
    std::uint64_t call = 0, reservations = 0;
    const void* panels = nullptr;
    std::size_t batch = 0, from = 0, keys = 0;
  };
  /// Restores buf's packing state (batch, packed_from, packed_keys) from this
  /// thread's previous item of this call when it is valid; the returned
  /// guard records the state when the packing function returns.
  struct packing_guard {
    kept_packing& last;
    const buffers& buf;
    const void* panels;
    std::uint64_t call, reservations;
    ~packing_guard() { last = {call, reservations, panels, buf.batch, buf.packed_from, buf.packed_keys}; }
  };
  packing_guard resume_packing(buffers& buf, const void* panels) const {
    thread_local kept_packing last;
    const std::uint64_t reservations = thread_scratch().reservations();
    if (buf.batch == static_cast<std::size_t>(-1) && last.call == call_id && last.panels == panels &&
        last.reservations + 1 == reservations) {
      buf.batch = last.batch;
      buf.packed_from = last.from;
      buf.packed_keys = last.keys;
    }
    return {last, buf, panels, call_id, reservations};
  }

  /// x, a bf16 number held in a float, as that bf16 (exact: its low half is
  /// zero), or 0 for T other than float (never called then).
  static bf16 bf16_word(T x) noexcept {
    if constexpr (std::is_same_v<T, float>)
      return bf16::from_bits(static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(x) >> 16));
    else
      return bf16();
  }
  static bf16 bf16_word(bf16 x) noexcept { return x; }

  /// The keys [lo, hi) that packing keys [from, upto) of batch index bi
  /// adds to what buf holds (none: lo >= hi; from a multiple of NR, hi
  /// whole panels or nk); buf's state then says they are packed.
  key_range keys_to_pack(buffers& buf, std::size_t bi, std::size_t from, std::size_t upto) const {
    if (buf.batch != bi || from < buf.packed_from) {
      buf.batch = bi;
      buf.packed_from = buf.packed_keys = from;
    }
    if (upto <= buf.packed_keys) return {0, 0};
    const key_range r{buf.packed_keys, std::min(a.nk, round_up(upto, NR))};
    buf.packed_keys = r.hi;
    return r;
  }

  /// Whether the bf16 pairs are packed from Q, K and V in place
  /// (`attention_args::q16`; no batch dims) rather than from q, k, v.
  bool in_place_pairs() const noexcept { return a.batch_rank == 0 && a.q16.p && a.k16.p && a.v16.p; }

  /// `pack_kv` for the bf16 products: keys [from, upto) of batch index bi
  /// (from a multiple of NR) into kp2 and vp2, zero past nk and dk.
  void pack_kv_pairs(buffers& buf, std::size_t bi, std::size_t from, std::size_t upto) const {
    const packing_guard kept = resume_packing(buf, buf.kp2);
    const key_range add = keys_to_pack(buf, bi, from, upto);
    if (add.lo >= add.hi) return;
    if (in_place_pairs()) {
      pack_pairs_along_cols(a.k16.p, a.k16.row, a.k16.col, a.nk, a.dk, dk2, add.lo, add.hi, buf.kp2);
      pack_pairs_along_rows(a.v16.p, a.v16.row, a.v16.col, a.nk, a.dv, nk_pad, add.lo, add.hi, buf.vp2);
      return;
    }
    pack_pairs_along_cols(a.k + a.batch_offset(a.k_batch, bi), a.k_row, a.k_col, a.nk, a.dk, dk2, add.lo, add.hi,
                          buf.kp2);
    pack_pairs_along_rows(a.v + a.batch_offset(a.v_batch, bi), a.v_row, a.v_col, a.nk, a.dv, nk_pad, add.lo, add.hi,
                          buf.vp2);
  }

  /// Rows [j0, j1) of src (rows x d, strides rs and cs, bf16 numbers held
  /// in T; j0 a multiple of NR) as bf16 in NR-row panels of d pairs,
  /// dst[panel][d2 / 2][NR][2] (panels counted from row 0; d2 = d rounded
  /// up to pairs), zero past rows and d: the B operand of a product over d
  /// (K for Q·Kᵀ, V for dO·Vᵀ).
  /// src: T holding bf16 numbers, or bf16 itself.
  template <class S>
  static void pack_pairs_along_cols(const S* src, std::ptrdiff_t rs, std::ptrdiff_t cs, std::size_t rows,
                                    std::size_t d, std::size_t d2, std::size_t j0, std::size_t j1, bf16* out) {
    for (std::size_t p = j0 / NR; p * NR < j1; ++p) {
      bf16* dst = out + p * NR * d2;
      const std::size_t keys = std::min(NR, rows - p * NR);
      if (keys < NR || d2 != d) std::fill(dst, dst + NR * d2, bf16());
#if defined(__AVX512BF16__) && defined(__AVX512F__) && defined(__AVX512BW__)
      if constexpr (dot_arch) {
        if (keys == NR && cs == 1 && rs <= std::numeric_limits<std::int32_t>::max() / std::ptrdiff_t(NR)) {
          // per pair of d and 16 rows: the two d gathered, rounded (exact),
          // interleaved into the 16 rows' pairs
          const S* base = src + static_cast<std::ptrdiff_t>(p * NR) * rs;
          const __m512i idx = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                                 _mm512_set1_epi32(static_cast<std::int32_t>(rs)));
          if constexpr (std::is_same_v<S, bf16>) {
            // bf16 in place: a pair of d is one 32-bit word of its row; 16
            // rows' 16 words at a time transposed in registers, the words
            // left gathered for 16 rows at once (scale 2: idx counts bf16)
            for (std::size_t h = 0; h < NR; h += 16) {
              const S* b16 = base + static_cast<std::ptrdiff_t>(h) * rs;
              std::size_t c = 0;
              for (; c + 32 <= d; c += 32) {
                __m512 r[16];
                for (std::size_t x = 0; x < 16; ++x)
                  r[x] = _mm512_loadu_ps(reinterpret_cast<const float*>(b16 + static_cast<std::ptrdiff_t>(x) * rs + c));
                transpose16_words(r);
                for (std::size_t w = 0; w < 16; ++w)
                  _mm512_store_ps(reinterpret_cast<float*>(dst + (c / 2 + w) * 2 * NR + 2 * h), r[w]);
              }
              for (; c + 2 <= d; c += 2)
                _mm512_store_si512(dst + (c / 2) * 2 * NR + 2 * h, _mm512_i32gather_epi32(idx, b16 + c, 2));
              if (d % 2 != 0)
                for (std::size_t x = 0; x < 16; ++x)
                  dst[(d / 2) * 2 * NR + 2 * (h + x)] = b16[static_cast<std::ptrdiff_t>(x) * rs + static_cast<std::ptrdiff_t>(d - 1)];
            }
            continue;
          }
          const __m512i pairs = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7,
                                                 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
          for (std::size_t h = 0; h < NR; h += 16) {
            const S* b16 = base + static_cast<std::ptrdiff_t>(h) * rs;
            for (std::size_t c = 0; c + 2 <= d; c += 2) {
              const __m512 even = _mm512_i32gather_ps(idx, b16 + c, 4), odd = _mm512_i32gather_ps(idx, b16 + c + 1, 4);
              const __m512i w = (__m512i)_mm512_cvtne2ps_pbh(odd, even);  // even in the low half
              _mm512_store_si512(dst + (c / 2) * 2 * NR + 2 * h, _mm512_permutexvar_epi16(pairs, w));
            }
            if (d % 2 != 0)
              for (std::size_t x = 0; x < 16; ++x)
                dst[(d / 2) * 2 * NR + 2 * (h + x)] =
                    bf16_word(b16[static_cast<std::ptrdiff_t>(x) * rs + static_cast<std::ptrdiff_t>(d - 1)]);
          }
          continue;
        }
      }
#endif
      for (std::size_t x = 0; x < keys; ++x) {
        const S* row = src + static_cast<std::ptrdiff_t>(p * NR + x) * rs;
        for (std::size_t c = 0; c < d; ++c)
          dst[(c / 2) * 2 * NR + 2 * x + (c & 1)] = bf16_word(row[static_cast<std::ptrdiff_t>(c) * cs]);
      }
    }
  }

  /// Rows [j0, j1) of src (rows x cols, strides rs and cs, bf16 numbers
  /// held in T; j0 even) as bf16 in NR-column panels of row pairs,
  /// dst[panel][rows_pad / 2][NR][2] (rows_pad: the rows the panels hold,
  /// even), zero past rows and cols: the B operand of a product over the
  /// rows (V for P·V, K for dS·K).
  template <class S>
  static void pack_pairs_along_rows(const S* src, std::ptrdiff_t rs, std::ptrdiff_t cs, std::size_t rows,
                                    std::size_t cols_all, std::size_t rows_pad, std::size_t j0, std::size_t j1,
                                    bf16* out) {
    for (std::size_t cp = 0; cp * NR < cols_all; ++cp) {
      const std::size_t cols = std::min(NR, cols_all - cp * NR);
      for (std::size_t jq = j0 / 2; 2 * jq < j1; ++jq) {
        bf16* dst = out + (cp * (rows_pad / 2) + jq) * 2 * NR;
        const S* r0 = src + static_cast<std::ptrdiff_t>(2 * jq) * rs + static_cast<std::ptrdiff_t>(cp * NR) * cs;
        if (cols == NR && cs == 1 && 2 * jq + 1 < rows && interleave_rows(r0, r0 + rs, dst)) continue;
        for (std::size_t s = 0; s < 2; ++s) {
          const std::size_t j = 2 * jq + s;
          std::size_t c = 0;
          if (j < rows) {
            const S* row = r0 + static_cast<std::ptrdiff_t>(s) * rs;
            for (; c < cols; ++c) dst[2 * c + s] = bf16_word(row[static_cast<std::ptrdiff_t>(c) * cs]);
          }
          for (; c < NR; ++c) dst[2 * c + s] = bf16();
        }
      }
    }
  }

#if defined(__AVX512BF16__) && defined(__AVX512F__) && defined(__AVX512BW__)
  /// The 32 words of w0 and of w1 interleaved into dst (64 words, aligned):
  /// dst[2 c] = w0[c], dst[2 c + 1] = w1[c].
  static void interleave_words(__m512i w0, __m512i w1, bf16* dst) noexcept {
    const __m512i lo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6, 37,
                                        5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
    const __m512i hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
    _mm512_store_si512(dst, _mm512_permutex2var_epi16(w0, lo, w1));
    _mm512_store_si512(dst + 32, _mm512_permutex2var_epi16(w0, hi, w1));
  }
#endif

  /// Two rows of NR values (contiguous) rounded to bf16 (to nearest even)
  /// and interleaved by column into dst (2 NR values, 64-byte aligned):
  /// dst[2 c + s] = row s's column c. False (nothing written) where the
  /// build has no AVX512-BF16 or NR is not 32.
  static bool interleave_rows(const T* r0, const T* r1, bf16* dst) noexcept {
#if defined(__AVX512BF16__) && defined(__AVX512F__) && defined(__AVX512BW__)
    if constexpr (dot_arch && NR == 32) {
      const __m512i w0 = (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(r0 + 16), _mm512_loadu_ps(r0));
      const __m512i w1 = (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(r1 + 16), _mm512_loadu_ps(r1));
      interleave_words(w0, w1, dst);
      return true;
    }
#endif
    (void)r0, (void)r1, (void)dst;
    return false;
  }
  /// The same for two rows of NR bf16 (no rounding).
  static bool interleave_rows(const bf16* r0, const bf16* r1, bf16* dst) noexcept {
#if defined(__AVX512BF16__) && defined(__AVX512F__) && defined(__AVX512BW__)
    if constexpr (dot_arch && NR == 32) {
      interleave_words(_mm512_loadu_si512(r0), _mm512_loadu_si512(r1), dst);
      return true;
    }
#endif
    (void)r0, (void)r1, (void)dst;
    return false;
  }

  /// Q rows [i0, i0 + rows) as bf16 into q2 (row stride dk2), and the rows
  /// up to whole MR panels zero in q2 and in p2 (the products read them;
  /// their results are never used).
  /// qb: T holding bf16 numbers (row and column strides q_row, q_col), or bf16 (`q16`).
  template <class S>
  void pack_q_pairs(buffers& buf, const S* qb, std::ptrdiff_t q_row, std::ptrdiff_t q_col, std::size_t i0,
                    std::size_t rows) const {
    const std::size_t padded = round_up(rows, MR);
    for (std::size_t r = 0; r < padded; ++r) {
      bf16* dst = buf.q2 + r * dk2;
      std::size_t d = 0;
      if (r < rows) {
        const S* src = qb + static_cast<std::ptrdiff_t>(i0 + r) * q_row;
        if (q_col == 1) {
          d = std::is_same_v<S, bf16> ? a.dk : a.dk / 16 * 16;
          if constexpr (std::is_same_v<S, bf16>)
            std::copy_n(src, d, dst);
          else
            round_p_row(src, d, dst);  // exact: bf16 numbers
        }
        for (; d < a.dk; ++d) dst[d] = bf16_word(src[static_cast<std::ptrdiff_t>(d) * q_col]);
      } else {
        std::fill(buf.p2 + r * BC, buf.p2 + (r + 1) * BC, bf16());
      }
      for (; d < dk2; ++d) dst[d] = bf16();
    }
  }

  /// Row r of P (n_vec floats, 0 past the tile's keys) rounded to bf16 into p2.
  static void round_p_row(const T* row, std::size_t n_vec, bf16* dst) noexcept {
    if constexpr (std::is_same_v<T, float>)
      round_contiguous(row, n_vec, dst);
    else
      for (std::size_t j = 0; j < n_vec; ++j) dst[j] = bf16(static_cast<float>(row[j]));
  }

  /// Packs keys [from, upto) of batch index bi (from a multiple of NR; the
  /// keys already packed are kept): K into NR-key
  /// panels (kp[panel][d][NR]), V into NR-column panels (vp[panel][j][NR]).
  void pack_kv(buffers& buf, std::size_t bi, std::size_t from, std::size_t upto) const {
    using ops = simd_ops<T, Arch>;
    constexpr std::size_t W = ops::width;
    const packing_guard kept = resume_packing(buf, buf.kp);
    const key_range add = keys_to_pack(buf, bi, from, upto);
    if (add.lo >= add.hi) return;
    const T* kb = a.k + a.batch_offset(a.k_batch, bi);
    const T* vb = a.v + a.batch_offset(a.v_batch, bi);
    const std::size_t j0 = add.lo, j1 = add.hi;
    for (std::size_t p = j0 / NR; p * NR < j1; ++p) {
      T* dst = buf.kp + p * NR * a.dk;
      const std::size_t keys = std::min(NR, a.nk - p * NR);
      if (keys < NR) std::fill(dst, dst + NR * a.dk, T(0));
      if (a.k_col == 1) {
        // Each key's row is contiguous: read it whole (one sequential
        // stream; K usually comes from L3, written by the projection before),
        // prefetching the row four keys on, and store it NR-strided into the
        // L1-resident panel. Gathers of W keys per d were slower (Zen 5).
        for (std::size_t x = 0; x < keys; ++x) {
          const T* row = kb + static_cast<std::ptrdiff_t>(p * NR + x) * a.k_row;
          if (x + 4 < keys)
            for (std::size_t d = 0; d < a.dk; d += 64 / sizeof(T)) __builtin_prefetch(row + 4 * a.k_row + d, 0, 3);
          for (std::size_t d = 0; d < a.dk; ++d) dst[d * NR + x] = row[d];
        }
        continue;
      }
      // d outer: each d writes NR consecutive values (the keys' rows are NR
      // read streams), rather than NR-strided scalar stores per key.
      const T* src[NR];
      for (std::size_t x = 0; x < keys; ++x) src[x] = kb + static_cast<std::ptrdiff_t>(p * NR + x) * a.k_row;
      for (std::size_t d = 0; d < a.dk; ++d) {
        const std::ptrdiff_t off = static_cast<std::ptrdiff_t>(d) * a.k_col;
        T* out = dst + d * NR;
        for (std::size_t x = 0; x < keys; ++x) out[x] = src[x][off];
      }
    }
    for (std::size_t cp = 0; cp < dv_pad / NR; ++cp) {
      const std::size_t cols = std::min(NR, a.dv - cp * NR);
      for (std::size_t j = j0; j < j1; ++j) {
        T* dst = buf.vp + (cp * a.nk + j) * NR;
        const T* src = vb + static_cast<std::ptrdiff_t>(j) * a.v_row + static_cast<std::ptrdiff_t>(cp * NR) * a.v_col;
        if (cols == NR && a.v_col == 1) {  // a whole panel row: vector copies
          for (std::size_t x = 0; x < NR; x += W) ops::store(dst + x, ops::loadu(src + x));
          continue;
        }
        // Zero the panel row with whole vectors, then a plain loop: a head
        // is a few dozen values, shorter than a memmove (or rep stos) start.
        for (std::size_t x = 0; x < NR; x += W) ops::store(dst + x, ops::zero());
        for (std::size_t x = 0; x < cols; ++x) dst[x] = src[static_cast<std::ptrdiff_t>(x) * a.v_col];
      }
    }
  }

  /// Q rows [i0, i0 + rows) into MR-row panels (qp[panel][d][MR]).
  void pack_q(buffers& buf, const T* qb, std::size_t i0, std::size_t rows) const {
    for (std::size_t p = 0; p * MR < rows; ++p) {
      T* dst = buf.qp + p * MR * a.dk;
      for (std::size_t x = 0; x < MR; ++x) {
        const std::size_t r = p * MR + x;
        if (r < rows) {
          const T* src = qb + static_cast<std::ptrdiff_t>(i0 + r) * a.q_row;
          for (std::size_t d = 0; d < a.dk; ++d) dst[d * MR + x] = src[static_cast<std::ptrdiff_t>(d) * a.q_col];
        } else {
          for (std::size_t d = 0; d < a.dk; ++d) dst[d * MR + x] = T(0);
        }
      }
    }
  }

  /// Rows [p * MR, p * MR + MR) of a row-major block with row stride `ld`
  /// for the micro-kernel; rows past `rows` repeat row 0 (their results are
  /// never used).
  static rows_a<T, MR> rows_of(const T* base, std::ptrdiff_t ld, std::size_t p, std::size_t rows) {
    rows_a<T, MR> r;
    for (std::size_t i = 0; i < MR; ++i) {
      const std::size_t row = p * MR + i;
      r.row[i] = base + static_cast<std::ptrdiff_t>(row < rows ? row : 0) * ld;
    }
    return r;
  }

  /// tanh of a vector (of one value on the scalar arch), as prepare_row.
  static auto tanh_of(const typename simd_ops<T, Arch>::vec& x) {
    if constexpr (simd_ops<T, Arch>::width > 1)
      return vector_math<math_fn::tanh>(x);
    else
      return scalar_math<math_fn::tanh>(x);
  }

  /// The score stages over row r (query i) of a tile, keys [j0, j0 + n),
  /// as `prepare_row` computes them (the same operations on each score, so
  /// the results agree to the bit) but a stage at a time over the whole
  /// row: row becomes f(row), -inf on [n, n_vec); returns its maximum. A
  /// map calls the user's function over the row (`fn_row`: one call for
  /// the row, the function inlined in it). With `kept` (not nullptr; `ld` >=
  /// n_vec values a stage, which the backward's `replay_backward` reads),
  /// kept + s * ld holds a factor stage's input (when `learn`), a map's
  /// input, a tanh's output. `bias` receives a generic bias's row.
  T stage_row(T* row, T* bias, T* kept, std::size_t ld, const flag_view* views, std::size_t r, std::size_t bi,
              std::size_t i, std::size_t j0, std::size_t n, std::size_t n_vec, bool unmasked, bool learn = false) const {
    using ops = simd_ops<T, Arch>;
    constexpr std::size_t W = ops::width;
    constexpr T ninf = -std::numeric_limits<T>::infinity();
    const bool biased = a.bias.present(), affine = a.bias.slope != nullptr;
    const std::size_t bias_at = biased ? a.bias.at : a.n_stages + 1;
    if (biased && !affine) {
      a.bias.add(a.bias.ctx, bi, i, j0, n, bias);
      for (std::size_t j = n; j < n_vec; ++j) bias[j] = T(0);
    }
    const T slope = affine ? a.bias_slope(bi) : T(0), sbase = affine ? slope * a.bias_distance(i, j0) : T(0);
    alignas(64) T lane[W];
    for (std::size_t l = 0; l < W; ++l) lane[l] = T(l);
    const auto iota = ops::load(lane), vslope = ops::broadcast(slope), vsbase = ops::broadcast(sbase);
    auto add_bias = [&] {
      for (std::size_t j = 0; j < n_vec; j += W) {
        const auto b = affine ? ops::fma(vslope, iota + ops::broadcast(T(j)), vsbase) : ops::loadu(bias + j);
        ops::storeu(row + j, ops::loadu(row + j) + b);
      }
    };
    for (std::size_t s = 0; s < a.n_stages; ++s) {
      if (s == bias_at) add_bias();
      const score_stage<T>& st = a.stages[s];
      const T value = a.stage_value(s, bi);
      const auto v = ops::broadcast(value);
      T* in = kept ? kept + s * ld : nullptr;
      switch (st.op) {
        case score_op::multiply:
          if (in && learn && st.factor) std::copy_n(row, n_vec, in);
          for (std::size_t j = 0; j < n_vec; j += W) ops::storeu(row + j, ops::loadu(row + j) * v);
          break;
        case score_op::divide:
          for (std::size_t j = 0; j < n_vec; j += W) ops::storeu(row + j, ops::loadu(row + j) / v);
          break;
        case score_op::tanh:
          for (std::size_t j = 0; j < n_vec; j += W) {
            const auto t = tanh_of(ops::loadu(row + j));
            ops::storeu(row + j, t);
            if (in) ops::storeu(in + j, t);
          }
          break;
        case score_op::map:
          if (in) std::copy_n(row, n, in);
          if (st.fn_row)
            st.fn_row(st.ctx, row, row, n);
          else
            for (std::size_t j = 0; j < n; ++j) row[j] = st.fn(st.ctx, row[j]);
          break;
        case score_op::causal: {
          const key_range kept_cols = causal_kept_columns(st, i, j0, n);
          std::fill(row, row + kept_cols.lo, value);
          std::fill(row + kept_cols.hi, row + n, value);
          break;
        }
        case score_op::mask:
          if (unmasked) break;
          for (std::size_t j = 0; j < n; ++j) row[j] = views[s](r, j) ? value : row[j];
          break;
      }
    }
    if (bias_at == a.n_stages) add_bias();
    for (std::size_t j = n; j < n_vec; ++j) row[j] = ninf;
    if constexpr (W > 1) {  // the maximum as prepare_row finds it
      auto vm = ops::broadcast(ninf);
      for (std::size_t j = 0; j < n_vec; j += W) vm = xsimd::max(vm, ops::loadu(row + j));
      return lane_max<T, Arch>(vm);
    } else {
      T mx = ninf;
      for (std::size_t j = 0; j < n; ++j) mx = std::max(mx, row[j]);
      return mx;
    }
  }

  /// Applies the score stages to row r (query i) of the tile, keys [j0, j0 +
  /// n), sets the lanes [n, n_vec) (n_vec a whole number of vectors) to
  /// -inf so the softmax steps need no scalar tails, and returns the row's
  /// maximum: one pass, each vector loaded and stored once (separate passes
  /// per stage cost more than the arithmetic on short rows). With a map
  /// stage, `stage_row` (a stage at a time: the user's function in a tight
  /// loop rather than a vector round trip per score).
  /// `views`: each mask stage's flags of the tile (`mask_views`), of which
  /// this is row r. `shared` (or nullptr): for a mask stage s that is the
  /// same for every query row (a padding mask, stride 0 along i), its flags
  /// of this key tile as 1/0 from shared + s * BC, gathered once per tile.
  /// `unmasked`: the block mask found that no mask stage masks any of these
  /// scores, so the mask stages are not read (views may be unset).
  T prepare_row(T* row, T* bias, const flag_view* views, std::size_t r, const T* shared, std::size_t bi,
                std::size_t i, std::size_t j0, std::size_t n, std::size_t n_vec, bool unmasked = false) const {
    if (has_map) return stage_row(row, bias, nullptr, 0, views, r, bi, i, j0, n, n_vec, unmasked);
    using ops = simd_ops<T, Arch>;
    constexpr std::size_t W = ops::width;
    constexpr T ninf = -std::numeric_limits<T>::infinity();
    // causal: tile columns [keep_from, keep_to) are kept, the others masked
    std::size_t keep_from[max_score_stages] = {}, keep_to[max_score_stages] = {};
    const bool* mrow[max_score_stages] = {};  // mask: this row's flags from key j0
    const bool biased = a.bias.present(), affine = a.bias.slope != nullptr;
    const std::size_t bias_at = biased ? a.bias.at : a.n_stages + 1;
    if (biased && !affine) {
      a.bias.add(a.bias.ctx, bi, i, j0, n, bias);
      for (std::size_t j = n; j < n_vec; ++j) bias[j] = T(0);
    }
    // affine: the bias at tile column j is slope * j + slope * base, one
    // fma (equal to slope * (j + base) when the slope is a power of two, as
    // ALiBi's are for a power-of-two head count; within an ulp otherwise)
    const T slope = affine ? a.bias_slope(bi) : T(0), sbase = affine ? slope * a.bias_distance(i, j0) : T(0);
    T value[max_score_stages];  // each stage's value for this batch index
    for (std::size_t s = 0; s < a.n_stages; ++s) {
      const score_stage<T>& st = a.stages[s];
      value[s] = a.stage_value(s, bi);
      if (st.op == score_op::causal) {
        const key_range kept = causal_kept_columns(st, i, j0, n);
        keep_from[s] = kept.lo;
        keep_to[s] = kept.hi;
      }
      if (st.op == score_op::mask && !unmasked) mrow[s] = views[s].p + static_cast<std::ptrdiff_t>(r) * views[s].row;
    }
    auto masked = [&](std::size_t s, std::size_t j) {
      return j < n && mrow[s][static_cast<std::ptrdiff_t>(j) * views[s].col];
    };
    if constexpr (W > 1) {
      alignas(64) T lane[W];
      for (std::size_t x = 0; x < W; ++x) lane[x] = T(x);
      const auto iota = ops::load(lane), vn = ops::broadcast(T(n)), vninf = ops::broadcast(ninf);
      const auto vslope = ops::broadcast(slope), vsbase = ops::broadcast(sbase);
      auto vm = vninf;
      if (plain_chain) {
        const std::size_t n_arith = a.n_stages > 0 && a.stages[a.n_stages - 1].op == score_op::causal ? a.n_stages - 1 : a.n_stages;
        const bool causal = n_arith < a.n_stages;
        // columns outside [lo, hi) take the causal stage's value, from n on -inf
        const auto lo = ops::broadcast(T(causal ? keep_from[n_arith] : 0)),
                   hi = ops::broadcast(T(causal ? keep_to[n_arith] : n_vec));
        const auto fill = ops::broadcast(causal ? value[n_arith] : ninf);
        for (std::size_t j = 0; j < n_vec; j += W) {
          auto x = ops::loadu(row + j);
          const auto col = iota + ops::broadcast(T(j));
          for (std::size_t s = 0; s < n_arith; ++s) {
            const auto v = ops::broadcast(value[s]);
            x = a.stages[s].op == score_op::multiply ? x * v : x / v;
          }
          x = xsimd::select(col < lo || col >= hi, fill, x);
          x = xsimd::select(col >= vn, vninf, x);
          ops::storeu(row + j, x);
          vm = xsimd::max(vm, x);
        }
        return lane_max<T, Arch>(vm);
      }
      for (std::size_t j = 0; j < n_vec; j += W) {
        auto x = ops::loadu(row + j);
        const auto col = iota + ops::broadcast(T(j));
        auto bias_at_j = [&] { return affine ? ops::fma(vslope, col, vsbase) : ops::loadu(bias + j); };
        for (std::size_t s = 0; s < a.n_stages; ++s) {
          if (s == bias_at) x = x + bias_at_j();
          const auto v = ops::broadcast(value[s]);
          switch (a.stages[s].op) {
            case score_op::multiply: x = x * v; break;
            case score_op::divide: x = x / v; break;
            case score_op::tanh: x = vector_math<math_fn::tanh>(x); break;
            case score_op::map: {  // the user's scalar function, lane by lane
              alignas(64) T lanes[W];
              ops::store(lanes, x);
              for (std::size_t l = 0; l < W; ++l) lanes[l] = a.stages[s].fn(a.stages[s].ctx, lanes[l]);
              x = ops::load(lanes);
              break;
            }
            case score_op::causal:
              x = xsimd::select(col < ops::broadcast(T(keep_from[s])) || col >= ops::broadcast(T(keep_to[s])), v, x);
              break;
            case score_op::mask: {
              if (unmasked) break;
              if (shared != nullptr && views[s].row == 0) {
                x = xsimd::select(ops::loadu(shared + s * BC + j) != ops::zero(), v, x);
                break;
              }
              alignas(64) T m[W];
              for (std::size_t l = 0; l < W; ++l) m[l] = masked(s, j + l) ? T(1) : T(0);
              x = xsimd::select(ops::load(m) != ops::zero(), v, x);
              break;
            }
          }
        }
        if (bias_at == a.n_stages) x = x + bias_at_j();
        x = xsimd::select(col >= vn, vninf, x);
        ops::storeu(row + j, x);
        vm = xsimd::max(vm, x);
      }
      return lane_max<T, Arch>(vm);
    } else {
      (void)shared;  // one lane: the masks are read per element anyway
      T mx = ninf;
      auto bias_at_j = [&](std::size_t j) { return affine ? simd_ops<T, scalar_arch>::fma(slope, T(j), sbase) : bias[j]; };
      for (std::size_t j = 0; j < n; ++j) {
        T x = row[j];
        for (std::size_t s = 0; s < a.n_stages; ++s) {
          if (s == bias_at) x = x + bias_at_j(j);
          const T v = value[s];
          switch (a.stages[s].op) {
            case score_op::multiply: x = x * v; break;
            case score_op::divide: x = x / v; break;
            case score_op::tanh: x = scalar_math<math_fn::tanh>(x); break;
            case score_op::map: x = a.stages[s].fn(a.stages[s].ctx, x); break;
            case score_op::causal: x = j < keep_from[s] || j >= keep_to[s] ? v : x; break;
            case score_op::mask: x = !unmasked && masked(s, j) ? v : x; break;
          }
        }
        if (bias_at == a.n_stages) x = x + bias_at_j(j);
        row[j] = x;
        mx = std::max(mx, x);
      }
      for (std::size_t j = n; j < n_vec; ++j) row[j] = ninf;
      return mx;
    }
  }

  /// Online softmax step of one row whose maximum is row_max: p = exp(s -
  /// ref) in place; returns the factor that rescales the row's earlier sum
  /// and accumulator.
  static T online_row(T* row, std::size_t n, T row_max, T& m, T& l) {
    constexpr T ninf = -std::numeric_limits<T>::infinity();
    const T m_new = std::max(m, row_max);
    const T ref = m_new == ninf ? T(0) : m_new;  // no -inf - -inf: masked entries give 0
    const T alpha = m == ninf ? T(0) : std::exp(m - ref);  // the first key tile: nothing to rescale
    l = simd_ops<T, scalar_arch>::fma(l, alpha, exp_shifted_sum<T, Arch>(row, n, ref));  // explicit: see `opaque`
    m = m_new;
    return alpha;
  }

  /// Whether every value of one V row (dv values, stride v_col) is finite:
  /// x * 0 is 0 for a finite x and NaN otherwise, summed a vector at a time
  /// when the row is contiguous.
  bool row_is_finite(const T* row) const {
    using ops = simd_ops<T, Arch>;
    constexpr std::size_t W = ops::width;
    std::size_t c = 0;
    T poison = T(0);
    if (a.v_col == 1 && a.dv >= W) {
      auto acc = ops::zero();
      const auto zero = ops::zero();
      for (; c + W <= a.dv; c += W) acc = ops::fma(ops::loadu(row + c), zero, acc);
      alignas(64) T lanes[W];
      ops::store(lanes, acc);
      for (std::size_t x = 0; x < W; ++x) poison += lanes[x];
    }
    for (; c < a.dv; ++c) poison += row[static_cast<std::ptrdiff_t>(c) * a.v_col] * T(0);
    return poison == T(0);
  }

  /// The term the keys outside [lo, hi) add to every row of a query tile
  /// whose causal or window stages give them weight 0 (the tiles skipped):
  /// sum_j 0 * V[j, c], into z[c]. It is 0 unless V holds NaN or ±inf there, and then NaN, as
  /// the unfused contraction (and PyTorch's `P @ V`) computes it; reading V
  /// once costs far less than the skipped tiles' Q·Kᵀ and P·V. Returns
  /// whether any z[c] is not 0.
  bool skipped_keys_term(buffers& buf, std::size_t bi, key_range kept) const {
    const T* vb = a.v + a.batch_offset(a.v_batch, bi);
    find_nonfinite_rows(buf, bi);
    const bool below = buf.nonfinite_lo < buf.nonfinite_hi && buf.nonfinite_lo < kept.lo;
    const bool above = buf.nonfinite_lo < buf.nonfinite_hi && buf.nonfinite_hi > kept.hi;
    if (!below && !above) return false;
    std::fill(buf.z, buf.z + a.dv, T(0));
    bool any = false;
    auto scan = [&](std::size_t from, std::size_t to) {
      for (std::size_t j = from; j < to; ++j) {
        const T* row = vb + static_cast<std::ptrdiff_t>(j) * a.v_row;
        for (std::size_t c = 0; c < a.dv; ++c)
          if (!std::isfinite(row[static_cast<std::ptrdiff_t>(c) * a.v_col])) {
            buf.z[c] = std::numeric_limits<T>::quiet_NaN();  // 0 * x
            any = true;
          }
      }
    };
    scan(0, kept.lo);
    scan(kept.hi, a.nk);
    return any;
  }

  /// Which V rows of batch index bi hold a value that is not finite, as
  /// the row range [buf.nonfinite_lo, buf.nonfinite_hi): read from the
  /// call's table (`run` finds them once per batch index), else found here.
  /// Only keys there make a skipped key tile count (0 * NaN), so only they
  /// are scanned column by column, and the block mask never skips them.
  void find_nonfinite_rows(buffers& buf, std::size_t bi) const {
    if (buf.nonfinite_batch != bi && buf.nonfinite_table != nullptr) {
      buf.nonfinite_batch = bi;
      buf.nonfinite_lo = buf.nonfinite_table[bi].lo;
      buf.nonfinite_hi = buf.nonfinite_table[bi].hi;
    }
    if (buf.nonfinite_batch != bi) {
      const T* vb = a.v + a.batch_offset(a.v_batch, bi);
      buf.nonfinite_batch = bi;
      buf.nonfinite_lo = buf.nonfinite_hi = 0;
      for (std::size_t j = 0; j < a.nk; ++j)
        if (!row_is_finite(vb + static_cast<std::ptrdiff_t>(j) * a.v_row)) {
          if (buf.nonfinite_lo == buf.nonfinite_hi) buf.nonfinite_lo = j;
          buf.nonfinite_hi = j + 1;
        }
    }
  }

  /// Whether V rows [j0, j1) of the batch index last passed to
  /// find_nonfinite_rows are all finite (as far as its row range says).
  static bool rows_finite(const buffers& buf, std::size_t j0, std::size_t j1) {
    return buf.nonfinite_lo == buf.nonfinite_hi || j1 <= buf.nonfinite_lo || j0 >= buf.nonfinite_hi;
  }

  /// The flags of the mask stages that every query row shares (stride 0
  /// along i: padding masks) of the tile's views as 1/0 into
  /// buf.row_masks (lanes to n_vec), so the rows of a tile read them as
  /// vectors; nullptr when there is none.
  const T* share_row_masks(buffers& buf, const flag_view* views, std::size_t n, std::size_t n_vec) const {
    bool any = false;
    for (std::size_t s = 0; s < a.n_stages; ++s) {
      if (a.stages[s].op != score_op::mask || views[s].row != 0) continue;
      any = true;
      T* dst = buf.row_masks + s * BC;
      for (std::size_t j = 0; j < n_vec; ++j) dst[j] = j < n && views[s](0, j) ? T(1) : T(0);
    }
    return any ? buf.row_masks : nullptr;
  }

  /// Keys [j0, j0 + n) of one query tile; `unmasked` when the block mask
  /// finds all of them full.
  struct key_tile {
    std::size_t j0, n;
    bool unmasked;
  };
  /// Whether the block of key j is empty and its V rows finite.
  bool block_skippable(buffers& buf, const block_mask<T>& blocks, std::size_t bi, std::size_t qb, std::size_t j) const {
    if (blocks.at(bi, qb, j / NR) != block_kind::empty) return false;
    find_nonfinite_rows(buf, bi);
    const std::size_t b0 = j / NR * NR;
    return rows_finite(buf, b0, std::min(b0 + NR, a.nk));
  }
  /// The next key tile of query tile qb of batch index bi at or after key
  /// j0 (a multiple of NR) before `end`: blocks the block mask finds empty
  /// are stepped over at either end (unless a V row there is not finite:
  /// 0 * NaN must reach the output). n is 0 when none is left.
  key_tile next_key_tile(buffers& buf, const block_mask<T>& blocks, std::size_t bi, std::size_t qb, std::size_t j0,
                         std::size_t end) const {
    if (!blocks.active()) return {j0, std::min(BC, end - j0), false};
    auto skippable = [&](std::size_t j) { return block_skippable(buf, blocks, bi, qb, j); };
    const std::size_t from = j0;
    while (j0 < end && skippable(j0)) j0 += NR;
    std::size_t to = std::min(j0 + BC, end);
    while (to > j0 && skippable(to - 1)) to = (to - 1) / NR * NR;
    // the blocks cut off the end are stepped over by the next call
    count_blocks(a.tile_counts, block_kind::empty, (j0 - from + NR - 1) / NR);
    if (to <= j0) return {end, 0, false};
    const bool full = blocks.all_full(bi, qb, j0, to);
    count_blocks(a.tile_counts, full ? block_kind::full : block_kind::partial, (to - j0 + NR - 1) / NR);
    return {j0, to - j0, full};
  }

  /// The bf16 products of one key tile [j0, j0 + n) (`dot`): S = Q Kᵀ
  /// into the score rows (`scores`, whole NR panels: the columns past n_vec
  /// are never read), else O += P V from p2.
  void products_on_pairs(buffers& buf, std::size_t panels, std::size_t j0, std::size_t n, std::size_t n_vec,
                         bool scores) const {
#if defined(__AVX512BF16__) && defined(__AVX512F__) && defined(__AVX512BW__)
    if constexpr (dot_arch) {
      using dot_kernel = bf16_dot_kernel<MR, NR / 16>;
      if (scores) {
        for (std::size_t jp = 0; jp < n_vec; jp += NR)
          for (std::size_t p = 0; p < panels; ++p) {
            const tile_target<T> t{buf.s, s_row_off + p * MR, col_off + jp, MR, NR, true, T(1), T(0)};
            dot_kernel::run_strided(dk2 / 2, buf.q2 + p * MR * dk2, dk2, buf.kp2 + (j0 + jp) * dk2, false, t);
          }
        return;
      }
      // an odd n: the last pair's second key is the next tile's (or none);
      // P is 0 there and the kernel clears V's half
      for (std::size_t cp = 0; cp < dv_pad; cp += NR)
        for (std::size_t p = 0; p < panels; ++p) {
          const tile_target<T> t{buf.o, o_row_off + p * MR, col_off + cp, MR, NR, true, T(1), T(1)};
          dot_kernel::run_strided((n + 1) / 2, buf.p2 + p * MR * BC, BC, buf.vp2 + ((cp / NR) * nk_pad + j0) * NR,
                                  n % 2 != 0, t);
        }
      return;
    }
#endif
    (void)buf, (void)panels, (void)j0, (void)n, (void)n_vec, (void)scores;
  }

  /// One query tile [i0, i0 + rows) of batch index bi.
  void run_tile(buffers& buf, const block_mask<T>& blocks, std::size_t bi, std::size_t i0, std::size_t rows) const {
    using ops = simd_ops<T, Arch>;
    constexpr std::size_t W = ops::width;
    key_range kept = kept_keys(a, vanish, i0, i0 + rows - 1);
    kept.lo = kept.lo / NR * NR;  // key tiles start on a packed panel
    const std::size_t key_end = kept.hi;
    // the keys before the first live block are neither packed nor visited
    const std::size_t causal_lo = kept.lo;
    while (blocks.active() && kept.lo < key_end && block_skippable(buf, blocks, bi, i0 / BR, kept.lo)) kept.lo += NR;
    kept.lo = std::min(kept.lo, key_end);
    count_blocks(a.tile_counts, block_kind::empty, (kept.lo - causal_lo + NR - 1) / NR);
    const T* qb = a.q + a.batch_offset(a.q_batch, bi);
    const bool q_rows = a.q_col == 1;  // Q read in place, else packed
    if (dot) {
      pack_kv_pairs(buf, bi, kept.lo, key_end);
      if (in_place_pairs())
        pack_q_pairs(buf, a.q16.p, a.q16.row, a.q16.col, i0, rows);
      else
        pack_q_pairs(buf, qb, a.q_row, a.q_col, i0, rows);
    } else {
      pack_kv(buf, bi, kept.lo, key_end);
      if (!q_rows) pack_q(buf, qb, i0, rows);
    }
    const std::size_t panels = (rows + MR - 1) / MR;
    std::fill(buf.o, buf.o + panels * MR * dv_pad, T(0));
    T m0, l0;
    a.row_start(bi, m0, l0);
    std::fill(buf.m, buf.m + rows, m0);
    std::fill(buf.l, buf.l + rows, l0);

    bool first = true;
    for (std::size_t next = kept.lo; next < key_end;) {
      const key_tile tile = next_key_tile(buf, blocks, bi, i0 / BR, next, key_end);
      const std::size_t j0 = tile.j0, n = tile.n;
      if (n == 0) break;
      next = j0 + n;
      const std::size_t n_vec = round_up(n, W);  // <= BC: NR is a multiple of W
      // S = Q Kᵀ for the tile, the columns [0, n_vec) (a last panel of one
      // vector runs on one vector column).
      if (dot) {
        products_on_pairs(buf, panels, j0, n, n_vec, true);
        if (a.tile_counts) a.tile_counts->bf16_tiles.fetch_add(1, std::memory_order_relaxed);
      } else {
        for (std::size_t jp = 0; jp < n; jp += NR)
          for (std::size_t p = 0; p < panels; ++p) {
            const tile_target<T> t{buf.s, s_row_off + p * MR, col_off + jp, MR, std::min(NR, n_vec - jp), true, T(1), T(0)};
            if (q_rows)
              kernel::run_with(a.dk, rows_of(qb + static_cast<std::ptrdiff_t>(i0) * a.q_row, a.q_row, p, rows),
                               buf.kp + (j0 + jp) * a.dk, t);
            else
              kernel::run(a.dk, buf.qp + p * MR * a.dk, buf.kp + (j0 + jp) * a.dk, t);
          }
      }
      // Stages, online softmax, rescale of the accumulator (still zero
      // before the first key tile). Rows are whole vectors (n_vec): the lanes
      // past n hold -inf after the stages, so the softmax steps need no
      // scalar tails.
      flag_view views[max_score_stages];
      if (!tile.unmasked) mask_views(a, views, buf.flags, BR * BC, bi, i0, rows, j0, n);
      const T* shared = tile.unmasked ? nullptr : share_row_masks(buf, views, n, n_vec);
      for (std::size_t r = 0; r < rows; ++r) {
        T* row = buf.s + r * BC;
        const T mx = prepare_row(row, buf.bias, views, r, shared, bi, i0 + r, j0, n, n_vec, tile.unmasked);
        const T alpha = online_row(row, n_vec, mx, buf.m[r], buf.l[r]);
        if (!first && alpha != T(1)) scale_row<T, Arch>(buf.o + r * dv_pad, dv_pad, alpha);
      }
      first = false;
      // O += P V for the tile, P read from the score rows in place.
      if (dot) {
        for (std::size_t r = 0; r < rows; ++r) round_p_row(buf.s + r * BC, n_vec, buf.p2 + r * BC);
        products_on_pairs(buf, panels, j0, n, n_vec, false);
      } else {
        for (std::size_t cp = 0; cp < dv_pad; cp += NR)
          for (std::size_t p = 0; p < panels; ++p) {
            const tile_target<T> t{buf.o, o_row_off + p * MR, col_off + cp, MR, NR, true, T(1), T(1)};
            kernel::run_with(n, rows_of(buf.s, static_cast<std::ptrdiff_t>(BC), p, rows),
                             buf.vp + ((cp / NR) * a.nk + j0) * NR, t);
          }
      }
    }
    if ((kept.lo > 0 || key_end < a.nk) && skipped_keys_term(buf, bi, kept))
      for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t c = 0; c < a.dv; ++c) buf.o[r * dv_pad + c] += buf.z[c];
    if (a.lse)
      for (std::size_t r = 0; r < rows; ++r) store_row_stats(a, bi * a.nq + i0 + r, buf.m[r], buf.l[r]);
    T* ob = a.out + a.batch_offset(a.out_batch, bi);
    for (std::size_t r = 0; r < rows; ++r) {
      T* dst = ob + static_cast<std::ptrdiff_t>(i0 + r) * a.out_row;
      T* o = buf.o + r * dv_pad;
      const auto l = ops::broadcast(buf.l[r]);
      std::size_t c = 0;
      if (a.out_col == 1)
        for (; c + W <= a.dv; c += W) ops::storeu(dst + c, ops::load(o + c) / l);
      scale_row<T, Arch, true>(o + c, dv_pad - c, buf.l[r]);  // whole vectors: dv_pad is a multiple of NR
      for (; c < a.dv; ++c) dst[static_cast<std::ptrdiff_t>(c) * a.out_col] = o[c];
    }
  }

  /// Query row i of batch index bi alone, without packing (the few-rows
  /// path of incremental decoding: one or a few new queries against a key
  /// cache, where packing K and V would cost as much as the product):
  /// scores by dot products over d, the same stages and online softmax as
  /// the tiles, then O += p_j V[j] row by row. The block mask (one query
  /// row by NR keys) steps over the key blocks a boolean mask empties.
  void run_row(buffers& buf, const block_mask<T>& blocks, std::size_t bi, std::size_t i) const {
    using ops = simd_ops<T, Arch>;
    constexpr std::size_t W = ops::width;
    key_range kept = kept_keys(a, vanish, i, i);
    kept.lo = kept.lo / NR * NR;  // the block grid's (the causal stage masks the keys before)
    const T* qr = a.q + a.batch_offset(a.q_batch, bi) + static_cast<std::ptrdiff_t>(i) * a.q_row;
    const T* kb = a.k + a.batch_offset(a.k_batch, bi);
    const T* vb = a.v + a.batch_offset(a.v_batch, bi);
    const bool unit = a.q_col == 1 && a.k_col == 1 && a.v_col == 1;
    T* o = buf.o;
    std::fill(o, o + dv_pad, T(0));
    T m, l;
    a.row_start(bi, m, l);
    bool first = true;
    for (std::size_t next = kept.lo; next < kept.hi;) {
      const key_tile tile = next_key_tile(buf, blocks, bi, i, next, kept.hi);
      if (tile.n == 0) break;
      const std::size_t j0 = tile.j0, n = tile.n, n_vec = round_up(n, W);
      next = j0 + n;
      T* row = buf.s;
      for (std::size_t x = 0; x < n; ++x) {
        const T* kr = kb + static_cast<std::ptrdiff_t>(j0 + x) * a.k_row;
        T dot = T(0);
        std::size_t d = 0;
        if constexpr (W > 1) {
          if (unit) {
            auto acc = ops::zero();
            for (; d + W <= a.dk; d += W) acc = ops::fma(ops::loadu(qr + d), ops::loadu(kr + d), acc);
            dot = xsimd::hadd(acc);
          }
        }
        for (; d < a.dk; ++d)
          dot += qr[static_cast<std::ptrdiff_t>(d) * a.q_col] * kr[static_cast<std::ptrdiff_t>(d) * a.k_col];
        row[x] = dot;
      }
      flag_view views[max_score_stages];
      if (!tile.unmasked) mask_views(a, views, buf.flags, BR * BC, bi, i, 1, j0, n);
      const T mx = prepare_row(row, buf.bias, views, 0, nullptr, bi, i, j0, n, n_vec, tile.unmasked);
      const T alpha = online_row(row, n_vec, mx, m, l);
      if (!first && alpha != T(1)) scale_row<T, Arch>(o, dv_pad, alpha);
      first = false;
      for (std::size_t x = 0; x < n; ++x) {
        const T p = row[x];
        const T* vr = vb + static_cast<std::ptrdiff_t>(j0 + x) * a.v_row;
        std::size_t c = 0;
        if constexpr (W > 1) {
          if (unit)
            for (; c + W <= a.dv; c += W) ops::storeu(o + c, ops::fma(ops::broadcast(p), ops::loadu(vr + c), ops::loadu(o + c)));
        }
        for (; c < a.dv; ++c) o[c] += p * vr[static_cast<std::ptrdiff_t>(c) * a.v_col];
      }
    }
    if ((kept.lo > 0 || kept.hi < a.nk) && skipped_keys_term(buf, bi, kept))
      for (std::size_t c = 0; c < a.dv; ++c) o[c] += buf.z[c];
    if (a.lse) store_row_stats(a, bi * a.nq + i, m, l);
    T* dst = a.out + a.batch_offset(a.out_batch, bi) + static_cast<std::ptrdiff_t>(i) * a.out_row;
    for (std::size_t c = 0; c < a.dv; ++c) dst[static_cast<std::ptrdiff_t>(c) * a.out_col] = o[c] / l;
  }

  void run() const {
    const std::size_t nb = a.batch_size();
    if (nb == 0 || a.nq == 0 || a.dv == 0) return;
    if (a.nk == 0) {  // an empty sum: zeros, as the unfused contraction gives
      for (std::size_t bi = 0; bi < nb && a.lse; ++bi) {  // the sink alone, or -inf
        T m, l;
        a.row_start(bi, m, l);
        for (std::size_t i = 0; i < a.nq; ++i) store_row_stats(a, bi * a.nq + i, m, l);
      }
      for (std::size_t bi = 0; bi < nb; ++bi) {
        T* ob = a.out + a.batch_offset(a.out_batch, bi);
        for (std::size_t i = 0; i < a.nq; ++i)
          for (std::size_t c = 0; c < a.dv; ++c)
            ob[static_cast<std::ptrdiff_t>(i) * a.out_row + static_cast<std::ptrdiff_t>(c) * a.out_col] = T(0);
      }
      return;
    }
    // A few query rows (decoding) run row by row; more run in tiles.
    const bool rows = a.nq <= few_rows;  // scratch_bytes and carve agree
    const std::size_t tiles = rows ? a.nq : (a.nq + BR - 1) / BR;
    const auto items = static_cast<std::int64_t>(nb * tiles);
    const std::size_t bytes = scratch_bytes();
    // The block mask, once per call, on the grid of query tiles (single
    // rows when decoding) and key panels.
    const std::size_t block_rows = rows ? 1 : BR;
    const block_mask<T> blocks(a, block_rows, NR);
    // The V rows that are not finite, once per call when keys may be skipped.
    std::vector<key_range> nonfinite;
    bool skips = blocks.active();
    for (std::size_t s = 0; s < a.n_stages; ++s) skips = skips || vanish[s];
    if (skips) {
      buffers probe{};
      nonfinite.resize(nb);
      for (std::size_t bi = 0; bi < nb; ++bi) {
        find_nonfinite_rows(probe, bi);
        nonfinite[bi] = {probe.nonfinite_lo, probe.nonfinite_hi};
      }
    }
    if (a.tile_counts && blocks.active()) {
      a.tile_counts->rows = block_rows;
      a.tile_counts->cols = NR;
    }
    // Later tiles see more keys under a causal mask: hand them out first.
    auto work = [&](buffers& buf, std::int64_t item) {
      const std::size_t bi = static_cast<std::size_t>(item) / tiles;
      const std::size_t t = tiles - 1 - static_cast<std::size_t>(item) % tiles;
      if (rows)
        run_row(buf, blocks, bi, t);
      else
        run_tile(buf, blocks, bi, t * BR, std::min(BR, a.nq - t * BR));
    };
    const double flops = 2.0 * double(nb) * double(a.nq) * double(a.nk) * double(a.dk + a.dv);
    // Each item takes its thread's scratch (reserve allocates only to grow).
    parallel_for(
        static_cast<std::size_t>(items),
        [&](std::size_t item) {
          buffers buf = carve(thread_scratch().reserve(bytes));
          buf.nonfinite_table = nonfinite.empty() ? nullptr : nonfinite.data();
          work(buf, static_cast<std::int64_t>(item));
        },
        threads_for_flops(flops));
  }
};

}  // namespace detail

/// The fused attention on an explicitly chosen arch (see `contract_on`).
template <class Arch, class T>
void attention_on(const attention_args<T>& args) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "dimsum: fused attention supports float and double");
  detail::attention_kernel<T, Arch>(args).run();
}

/// The fused attention on `best_gemm_arch`, on up to `num_threads()` threads.
template <class T>
void attention(const attention_args<T>& args) {
  attention_on<best_gemm_arch>(args);
}

}  // namespace dimsum::kernels
