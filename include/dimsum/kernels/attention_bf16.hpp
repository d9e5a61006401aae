#pragma once
/// \file
/// The fused attention on bf16 Q, K and V (`attention_args<float, bf16>`),
/// every sum in float32. Each batch index is run as its own float attention
/// (kernels/attention.hpp): its Q, K and V are converted to float (exactly)
/// into the running thread's scratch as they are loaded, the float kernel
/// computes the scores, the softmax statistics (lse) and P·V, and the
/// output is rounded to bf16 once. Where the build has AVX512-BF16 and
/// the CPU no AMX (`bf16_attention_on_pairs()`) the float kernel runs Q·Kᵀ and P·V of its query tiles on `vdpbf16ps` (two
/// bf16 products added to a float32 sum per lane and instruction), with P
/// rounded to bf16 for P·V (`attention_args::bf16_products`), its pairs
/// packed from Q, K and V in place (only V is converted); elsewhere,
/// and for a few query rows (decoding), in float on the converted values.
/// The extra memory is one batch index's Q, K, V and output in float
/// per thread; the scores are never materialised, as for float. The score
/// stages, the bias, the sinks and the statistics are float
/// (`attention_args<float, bf16>` keeps them in T = float), so every stage
/// the float kernel applies applies here, read at the batch index's offset.
///
/// Threads: batch indices are spread over the threads when there are at
/// least as many as threads (each batch index then runs on one thread),
/// else they run one after another, each on all threads (query tiles).

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "dimsum/core/bf16.hpp"
#include "dimsum/kernels/attention.hpp"
#include "dimsum/kernels/detail/bf16_convert.hpp"
#include "dimsum/kernels/threads.hpp"

namespace dimsum::kernels {

namespace detail {

/// rows x cols elements of src (strides rs, cs) into dst, row-major, as float (exact).
inline void widen_rows(const bf16* src, std::ptrdiff_t rs, std::ptrdiff_t cs, std::size_t rows, std::size_t cols,
                       float* __restrict dst) noexcept {
  for (std::size_t r = 0; r < rows; ++r, dst += cols) {
    const bf16* s = src + static_cast<std::ptrdiff_t>(r) * rs;
    if (cs == 1)
      widen_contiguous(s, cols, dst);
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

/// The float scratch of the running thread for one batch index of a bf16
/// attention (kept between calls, grown when needed; separate from
/// `thread_scratch`, which the float kernel it calls uses).
inline float* bf16_attention_scratch(std::size_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

/// The callbacks of a bf16 attention's stages and bias, bound to one batch
/// index: the float attention of that batch index alone calls them with
/// batch index 0, they call the originals with bi.
struct batch_bound_callbacks {
  using fill_fn = void (*)(const void*, std::size_t, std::size_t, std::size_t, std::size_t, std::size_t, bool*);
  using add_fn = void (*)(const void*, std::size_t, std::size_t, std::size_t, std::size_t, float*);
  using scatter_fn = void (*)(const void*, std::size_t, std::size_t, std::size_t, std::size_t, const float*, double*);
  struct fill_at {
    fill_fn fill;
    const void* ctx;
    std::size_t bi;
    static void call(const void* c, std::size_t, std::size_t i0, std::size_t rows, std::size_t j0, std::size_t n,
                     bool* out) {
      const auto& s = *static_cast<const fill_at*>(c);
      s.fill(s.ctx, s.bi, i0, rows, j0, n, out);
    }
  };
  struct bias_at {
    add_fn add;
    scatter_fn scatter;
    const void* ctx;
    std::size_t bi;
    static void call_add(const void* c, std::size_t, std::size_t i, std::size_t j0, std::size_t n, float* out) {
      const auto& s = *static_cast<const bias_at*>(c);
      s.add(s.ctx, s.bi, i, j0, n, out);
    }
    static void call_scatter(const void* c, std::size_t, std::size_t i, std::size_t j0, std::size_t n,
                             const float* db, double* dlearned) {
      const auto& s = *static_cast<const bias_at*>(c);
      s.scatter(s.ctx, s.bi, i, j0, n, db, dlearned);
    }
  };
  std::array<fill_at, max_score_stages> fills{};
  bias_at bias{};
};

/// The float attention of batch index bi of the bf16 attention a, reading
/// Q, K, V from q, k, v (float, row-major: nq x dk, nk x dk, nk x dv) and
/// writing its output to out (nq x dv); its callbacks bound in cb (which
/// must outlive the call). With `in_place`, the slice also reads Q, K and
/// V as bf16 where a holds them (`attention_args::q16`, `k16`, `v16`).
inline attention_args<float> batch_slice(const attention_args<float, bf16>& a, std::size_t bi, const float* q,
                                         const float* k, const float* v, float* out, batch_bound_callbacks& cb,
                                         bool in_place = false) {
  attention_args<float> s;
  if (in_place) {
    s.q16 = {a.q + a.batch_offset(a.q_batch, bi), a.q_row, a.q_col};
    s.k16 = {a.k + a.batch_offset(a.k_batch, bi), a.k_row, a.k_col};
    s.v16 = {a.v + a.batch_offset(a.v_batch, bi), a.v_row, a.v_col};
  }
  s.q = q;
  s.k = k;
  s.v = v;
  s.out = out;
  s.nq = a.nq;
  s.nk = a.nk;
  s.dk = a.dk;
  s.dv = a.dv;
  s.q_row = s.k_row = static_cast<std::ptrdiff_t>(a.dk);
  s.v_row = s.out_row = static_cast<std::ptrdiff_t>(a.dv);
  s.q_col = s.k_col = s.v_col = s.out_col = 1;
  s.batch_rank = 0;  // batch_offset is 0: every pointer below is moved to bi's offset
  s.n_stages = a.n_stages;
  for (std::size_t x = 0; x < a.n_stages; ++x) {
    score_stage<float> st = a.stages[x];
    if (st.mask) st.mask += a.batch_offset(st.mask_batch, bi);
    if (st.mask_fill) {
      cb.fills[x] = {st.mask_fill, st.mask_ctx, bi};
      st.mask_fill = &batch_bound_callbacks::fill_at::call;
      st.mask_ctx = &cb.fills[x];
    }
    if (st.factor) st.factor += a.batch_offset(st.factor_batch, bi);
    s.stages[x] = st;
  }
  s.bias = a.bias;
  if (a.bias.slope) s.bias.slope += a.batch_offset(a.bias.slope_batch, bi);
  if (a.bias.add) {
    cb.bias = {a.bias.add, a.bias.scatter, a.bias.ctx, bi};
    s.bias.add = &batch_bound_callbacks::bias_at::call_add;
    s.bias.scatter = a.bias.scatter ? &batch_bound_callbacks::bias_at::call_scatter : nullptr;
    s.bias.ctx = &cb.bias;
  }
  if (a.sink) s.sink = a.sink + a.batch_offset(a.sink_batch, bi);
  if (a.lse) s.lse = a.lse + bi * a.nq;
  if (a.lse_low) s.lse_low = a.lse_low + bi * a.nq;
  s.tile_counts = a.tile_counts;
  s.bf16_products = bf16_attention_on_pairs();  // q, k, v hold bf16 numbers
  return s;
}

/// Runs f(bi) for every batch index of a bf16 attention of `flops`: over
/// the threads when there are enough batch indices (each f then runs on
/// one thread: a parallel_for inside another is serial) and `spread`, else
/// one after another.
template <class F>
void for_each_batch_index(std::size_t nb, double flops, bool spread, F&& f) {
  const std::size_t threads = spread ? threads_for_flops(flops) : 1;
  if (threads > 1 && nb >= threads)
    parallel_for(nb, f, threads);
  else
    for (std::size_t bi = 0; bi < nb; ++bi) f(bi);
}

}  // namespace detail

/// The fused attention on bf16 Q, K and V into a bf16 output, every sum in
/// float32 (see the file comment); the statistics `lse`, `lse_low` are
/// float. Same semantics as the float kernel on the operands converted to
/// float, except that the output is rounded to bf16.
inline void attention(const attention_args<float, bf16>& a) {
  const std::size_t nb = a.batch_size();
  if (nb == 0 || a.nq == 0 || a.dv == 0) return;
  const std::size_t nq = a.nq, nk = a.nk, dk = a.dk, dv = a.dv;
  const std::size_t per = nq * dk + nk * dk + nk * dv + nq * dv;
  const double flops = 2.0 * double(nb) * double(nq) * double(nk) * double(dk + dv);
  using kernel = detail::attention_kernel<float, best_gemm_arch>;
  const bool in_place = kernel::dot_arch && bf16_attention_on_pairs() && nq > kernel::few_rows;
  detail::for_each_batch_index(nb, flops, true, [&](std::size_t bi) {
    float* q = detail::bf16_attention_scratch(per);
    float* k = q + nq * dk;
    float* v = k + nk * dk;
    float* o = v + nk * dv;
    // The products on bf16 pairs pack Q, K and V from the bf16 numbers in
    // place; V is read as float as well (its rows that hold NaN or inf).
    if (!in_place) {
      detail::widen_rows(a.q + a.batch_offset(a.q_batch, bi), a.q_row, a.q_col, nq, dk, q);
      detail::widen_rows(a.k + a.batch_offset(a.k_batch, bi), a.k_row, a.k_col, nk, dk, k);
    }
    detail::widen_rows(a.v + a.batch_offset(a.v_batch, bi), a.v_row, a.v_col, nk, dv, v);
    detail::batch_bound_callbacks cb;
    attention(detail::batch_slice(a, bi, in_place ? nullptr : q, in_place ? nullptr : k, v, o, cb, in_place));
    detail::round_rows(o, nq, dv, a.out + a.batch_offset(a.out_batch, bi), a.out_row, a.out_col);
  });
}

}  // namespace dimsum::kernels
