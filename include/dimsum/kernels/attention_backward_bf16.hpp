#pragma once
/// \file
/// The backward of the fused attention on bf16 Q, K and V
/// (`attention_grad_args<float, bf16>`), as kernels/attention_bf16.hpp runs
/// the forward: each batch index is run as its own float backward
/// (kernels/attention_backward.hpp) on its Q, K, V, saved output and dO
/// converted to float in the running thread's scratch; P, dP, dS and the
/// sums dQ, dK, dV are float, and each gradient element is rounded to bf16
/// once, after its last term. Where the build has AVX512-BF16 and the CPU
/// no AMX (`bf16_attention_on_pairs()`) the products run on bf16 pairs (`attention_args::bf16_products`: P and dS rounded to
/// bf16 for the products that read them), packed from Q, K, V and dO in
/// place (`attention_args::q16`): only O and dO are converted (D). Where a broadcast batch dim (stride 0) makes
/// batch indices share an element of Q, K or V, that operand's gradient is
/// summed over them in a float buffer of its size first (and the batch
/// indices run one after another, as the float backward runs them).

#include <algorithm>
#include <cstddef>
#include <vector>

#include "dimsum/kernels/attention_backward.hpp"
#include "dimsum/kernels/attention_bf16.hpp"

namespace dimsum::kernels {

namespace detail {

/// Whether a broadcast batch dim (stride 0, extent > 1) of `strides` makes
/// batch indices share elements.
inline bool shared_over_batch(const attention_args<float, bf16>& a,
                              const std::array<std::ptrdiff_t, max_group_rank>& strides) noexcept {
  for (std::size_t d = 0; d < a.batch_rank; ++d)
    if (a.batch_extents[d] > 1 && strides[d] == 0) return true;
  return false;
}

/// The float gradient of one bf16 operand (rows x cols per batch index,
/// strides row, col and batch): rounded into dst per batch index when no
/// two batch indices share an element, else summed over batch indices in
/// a float buffer laid out as dst (`sum`, zeroed) and rounded at the end.
struct bf16_gradient {
  const attention_args<float, bf16>& a;
  bf16* dst;
  std::size_t rows, cols;
  std::ptrdiff_t row, col;
  const std::array<std::ptrdiff_t, max_group_rank>& batch;
  bool shared;
  std::vector<float> sum;

  bf16_gradient(const attention_args<float, bf16>& args, bf16* d, std::size_t r, std::size_t c, std::ptrdiff_t rs,
                std::ptrdiff_t cs, const std::array<std::ptrdiff_t, max_group_rank>& bs)
      : a(args), dst(d), rows(r), cols(c), row(rs), col(cs), batch(bs), shared(shared_over_batch(args, bs)) {
    if (!shared) return;
    // the element offsets dst's strides reach (non-negative: gradients are dense)
    std::ptrdiff_t span = 1 + std::ptrdiff_t(rows ? rows - 1 : 0) * row + std::ptrdiff_t(cols ? cols - 1 : 0) * col;
    for (std::size_t d = 0; d < a.batch_rank; ++d) span += std::ptrdiff_t(a.batch_extents[d] ? a.batch_extents[d] - 1 : 0) * batch[d];
    sum.assign(static_cast<std::size_t>(span), 0.0f);
  }

  /// Batch index bi's gradient g (rows x cols, row-major).
  void take(std::size_t bi, const float* g) {
    const std::ptrdiff_t b = a.batch_offset(batch, bi);
    if (!shared) return round_rows(g, rows, cols, dst + b, row, col);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < cols; ++c)
        sum[std::size_t(b + std::ptrdiff_t(r) * row + std::ptrdiff_t(c) * col)] += g[r * cols + c];
  }

  /// The sums rounded once into dst (when shared).
  void finish(std::size_t nb) {
    if (!shared) return;
    for (std::size_t bi = 0; bi < nb; ++bi) {
      const std::ptrdiff_t b = a.batch_offset(batch, bi);
      for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t c = 0; c < cols; ++c) {
          const std::ptrdiff_t o = b + std::ptrdiff_t(r) * row + std::ptrdiff_t(c) * col;
          dst[o] = bf16(sum[std::size_t(o)]);
        }
    }
  }
};

/// The `dbias` callback of a bf16 backward bound to one batch index.
struct dbias_at {
  void (*dbias)(void*, std::size_t, std::size_t, std::size_t, std::size_t, const float*);
  void* ctx;
  std::size_t bi;
  static void call(void* c, std::size_t, std::size_t i, std::size_t j0, std::size_t n, const float* db) {
    auto& s = *static_cast<dbias_at*>(c);
    s.dbias(s.ctx, s.bi, i, j0, n, db);
  }
};

}  // namespace detail

/// The backward of `attention(attention_args<float, bf16>)`: dQ, dK, dV
/// (bf16, with q's, k's and v's strides) from dO (bf16, read with out's
/// strides), the saved bf16 output and the float statistics; every sum in
/// float32, each gradient element rounded once (see the file comment).
/// The learned parts' sums (dfactor, dslope, dsink, dbias) are float, per
/// batch index, as for float.
inline void attention_backward(const attention_grad_args<float, bf16>& g) {
  const attention_args<float, bf16>& a = *g.fwd;
  const std::size_t nb = a.batch_size();
  const std::size_t nq = a.nq, nk = a.nk, dk = a.dk, dv = a.dv;
  detail::bf16_gradient gq(a, g.dq, nq, dk, a.q_row, a.q_col, a.q_batch);
  detail::bf16_gradient gk(a, g.dk, nk, dk, a.k_row, a.k_col, a.k_batch);
  detail::bf16_gradient gv(a, g.dv, nk, dv, a.v_row, a.v_col, a.v_batch);
  const bool shared = gq.shared || gk.shared || gv.shared;
  // Q, K, V, O, dO, then dQ, dK, dV of one batch index
  const std::size_t per = 2 * (nq * dk + nk * dk + nk * dv) + 2 * nq * dv;
  const bool in_place = detail::attention_backward_kernel<float, best_gemm_arch>::dot_arch && bf16_attention_on_pairs();
  const double flops = 2.0 * double(nb) * double(nq) * double(nk) * double(3 * dk + 2 * dv);
  detail::for_each_batch_index(nb, flops, !shared, [&](std::size_t bi) {
    float* q = detail::bf16_attention_scratch(per);
    float* k = q + nq * dk;
    float* v = k + nk * dk;
    float* o = v + nk * dv;
    float* dout = o + nq * dv;
    float* dq = dout + nq * dv;
    float* dkb = dq + nq * dk;
    float* dvb = dkb + nk * dk;
    const bf16_operand dout16{g.dout + a.batch_offset(a.out_batch, bi), a.out_row, a.out_col};
    // The products on bf16 pairs pack Q, K, V and dO from the bf16 numbers
    // in place; O and dO are read as float as well (D).
    if (!in_place) {
      detail::widen_rows(a.q + a.batch_offset(a.q_batch, bi), a.q_row, a.q_col, nq, dk, q);
      detail::widen_rows(a.k + a.batch_offset(a.k_batch, bi), a.k_row, a.k_col, nk, dk, k);
      detail::widen_rows(a.v + a.batch_offset(a.v_batch, bi), a.v_row, a.v_col, nk, dv, v);
    }
    detail::widen_rows(a.out + a.batch_offset(a.out_batch, bi), a.out_row, a.out_col, nq, dv, o);
    detail::widen_rows(dout16.p, dout16.row, dout16.col, nq, dv, dout);
    detail::batch_bound_callbacks cb;
    const attention_args<float> s = in_place ? detail::batch_slice(a, bi, nullptr, nullptr, nullptr, o, cb, true)
                                             : detail::batch_slice(a, bi, q, k, v, o, cb);
    attention_grad_args<float> sg;
    sg.fwd = &s;
    sg.lse = g.lse + bi * nq;
    sg.lse_low = g.lse_low ? g.lse_low + bi * nq : nullptr;
    sg.dout = dout;
    if (in_place) sg.dout16 = dout16;
    sg.dq = dq;
    sg.dk = dkb;
    sg.dv = dvb;
    for (std::size_t x = 0; x < max_score_stages; ++x) sg.dfactor[x] = g.dfactor[x] ? g.dfactor[x] + bi : nullptr;
    sg.dslope = g.dslope ? g.dslope + bi : nullptr;
    sg.dsink = g.dsink ? g.dsink + bi : nullptr;
    detail::dbias_at db{g.dbias, g.dbias_ctx, bi};
    if (g.dbias) {
      sg.dbias = &detail::dbias_at::call;
      sg.dbias_ctx = &db;
    }
    attention_backward(sg);
    gq.take(bi, dq);
    gk.take(bi, dkb);
    gv.take(bi, dvb);
  });
  gq.finish(nb);
  gk.finish(nb);
  gv.finish(nb);
}

}  // namespace dimsum::kernels
