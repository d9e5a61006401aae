#pragma once
/// \file
/// The backward of the fused attention kernel (FlashAttention-2 backward),
/// name-free like `kernels/attention.hpp`, whose `attention_args` it reads.
///
/// The forward saves only its output O and one statistic per query row,
/// lse[i] = log sum_j exp(f(S[i, j])) (`attention_row_stats` computes it
/// tile by tile). The backward never materialises the scores: with
/// D[i] = sum_c dO[i, c] * O[i, c], for each key tile it recomputes
/// P = exp(f(Q Kᵀ) - lse), then dV += Pᵀ dO, dP = dO Vᵀ, dS = P * (dP - D),
/// and with g = df/ds (the product of the live scale stages, 0 where a
/// causal or boolean mask replaced the score) dQ += (g dS) K,
/// dK += (g dS)ᵀ Q. Key tiles that a causal mask sends wholly to -inf are
/// skipped. Extra memory: one BR x BC tile and two values per query row.
///
/// Semantics are those of PyTorch's autograd on the unfused chain: a
/// masked score's gradient is exactly 0 (masked_fill's backward), a row
/// whose scores are all -inf has NaN probabilities, so dV is NaN for its
/// batch index while dQ of that row is 0.
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
#include <type_traits>
#include <vector>

#include "dimsum/kernels/attention.hpp"
#include "dimsum/kernels/threads.hpp"

namespace dimsum::kernels {

/// Buffers of one fused attention backward: `fwd` is the forward's
/// arguments (its `out` the saved output), `lse` its per-row statistics
/// (batch-major, `batch_size() * nq` values), `dout` read with `out`'s
/// strides; `dq`, `dk`, `dv` are written with q's, k's and v's strides.
template <class T>
struct attention_grad_args {
  const attention_args<T>* fwd = nullptr;
  const T* lse = nullptr;
  const T* dout = nullptr;
  T* dq = nullptr;
  T* dk = nullptr;
  T* dv = nullptr;
};

namespace detail {

template <class T>
struct attention_backward_kernel {
  static constexpr std::size_t BR = 32, BC = 64;
  const attention_args<T>& a;
  bool skip_causal;

  explicit attention_backward_kernel(const attention_args<T>& args)
      : a(args), skip_causal(causal_keys_vanish(args)) {}

  T q_at(std::size_t bi, std::size_t i, std::size_t d) const {
    return a.q[a.batch_offset(a.q_batch, bi) + std::ptrdiff_t(i) * a.q_row + std::ptrdiff_t(d) * a.q_col];
  }
  T k_at(std::size_t bi, std::size_t j, std::size_t d) const {
    return a.k[a.batch_offset(a.k_batch, bi) + std::ptrdiff_t(j) * a.k_row + std::ptrdiff_t(d) * a.k_col];
  }
  T v_at(std::size_t bi, std::size_t j, std::size_t c) const {
    return a.v[a.batch_offset(a.v_batch, bi) + std::ptrdiff_t(j) * a.v_row + std::ptrdiff_t(c) * a.v_col];
  }
  std::ptrdiff_t out_off(std::size_t bi, std::size_t i, std::size_t c) const {
    return a.batch_offset(a.out_batch, bi) + std::ptrdiff_t(i) * a.out_row + std::ptrdiff_t(c) * a.out_col;
  }

  /// The score after the stages, f(raw), and its derivative g = df/draw
  /// (0 where a mask replaced it).
  void score(T raw, std::size_t bi, std::size_t i, std::size_t j, T& x, T& g) const {
    x = raw;
    g = T(1);
    for (std::size_t s = 0; s < a.n_stages; ++s) {
      const score_stage<T>& st = a.stages[s];
      switch (st.op) {
        case score_op::multiply: x *= st.value; g *= st.value; break;
        case score_op::divide: x /= st.value; g /= st.value; break;
        case score_op::causal:
          if (j > i) { x = st.value; g = T(0); }
          break;
        case score_op::mask:
          if (st.mask[a.batch_offset(st.mask_batch, bi) + std::ptrdiff_t(i) * st.mask_row +
                      std::ptrdiff_t(j) * st.mask_col]) {
            x = st.value;
            g = T(0);
          }
          break;
      }
    }
  }

  T raw_score(std::size_t bi, std::size_t i, std::size_t j) const {
    T s = T(0);
    for (std::size_t d = 0; d < a.dk; ++d) s += q_at(bi, i, d) * k_at(bi, j, d);
    return s;
  }

  /// Keys a query row reaches: past the causal boundary they vanish.
  std::size_t key_end(std::size_t i_last) const { return skip_causal ? std::min(a.nk, i_last + 1) : a.nk; }

  void row_stats(T* lse) const {
    constexpr T ninf = -std::numeric_limits<T>::infinity();
    const std::size_t nb = a.batch_size();
    for (std::size_t bi = 0; bi < nb; ++bi)
      for (std::size_t i = 0; i < a.nq; ++i) {
        T m = ninf, l = T(0);  // online: running maximum and sum
        for (std::size_t j = 0, e = key_end(i); j < e; ++j) {
          T x, g;
          score(raw_score(bi, i, j), bi, i, j, x, g);
          if (x > m) {
            l = (m == ninf ? T(0) : l * std::exp(m - x)) + T(1);
            m = x;
          } else if (x == x && m != ninf) {
            l += std::exp(x - m);
          } else if (x != x) {
            m = x;  // NaN score: the row is NaN
          }
        }
        lse[bi * a.nq + i] = m == ninf ? ninf : (m != m ? m : m + std::log(l));
      }
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
    // Zero dQ, dK and dV (a broadcast batch dim zeroes the same place again).
    for (std::size_t bi = 0; bi < nb; ++bi) {
      for (std::size_t i = 0; i < a.nq; ++i)
        for (std::size_t d = 0; d < a.dk; ++d)
          g.dq[a.batch_offset(a.q_batch, bi) + std::ptrdiff_t(i) * a.q_row + std::ptrdiff_t(d) * a.q_col] = T(0);
      for (std::size_t j = 0; j < a.nk; ++j) {
        for (std::size_t d = 0; d < a.dk; ++d)
          g.dk[a.batch_offset(a.k_batch, bi) + std::ptrdiff_t(j) * a.k_row + std::ptrdiff_t(d) * a.k_col] = T(0);
        for (std::size_t c = 0; c < a.dv; ++c)
          g.dv[a.batch_offset(a.v_batch, bi) + std::ptrdiff_t(j) * a.v_row + std::ptrdiff_t(c) * a.v_col] = T(0);
      }
    }
    const double flops = 4.0 * double(nb) * double(a.nq) * double(a.nk) * double(a.dk + a.dv);
    parallel_for(nb, [&](std::size_t bi) { run_batch(g, bi); }, shares_operands() ? 1 : threads_for_flops(flops));
  }

  /// The gradients' contributions of batch index bi (added to dQ, dK, dV).
  void run_batch(const attention_grad_args<T>& g, std::size_t bi) const {
    const T* qb = a.q + a.batch_offset(a.q_batch, bi);
    const T* kb = a.k + a.batch_offset(a.k_batch, bi);
    const T* vb = a.v + a.batch_offset(a.v_batch, bi);
    const std::ptrdiff_t ob = a.batch_offset(a.out_batch, bi);
    T* dqb = g.dq + a.batch_offset(a.q_batch, bi);
    T* dkb = g.dk + a.batch_offset(a.k_batch, bi);
    T* dvb = g.dv + a.batch_offset(a.v_batch, bi);
    auto q_el = [&](std::size_t i, std::size_t d) { return std::ptrdiff_t(i) * a.q_row + std::ptrdiff_t(d) * a.q_col; };
    auto k_el = [&](std::size_t j, std::size_t d) { return std::ptrdiff_t(j) * a.k_row + std::ptrdiff_t(d) * a.k_col; };
    auto v_el = [&](std::size_t j, std::size_t c) { return std::ptrdiff_t(j) * a.v_row + std::ptrdiff_t(c) * a.v_col; };
    auto o_el = [&](std::size_t i, std::size_t c) { return ob + std::ptrdiff_t(i) * a.out_row + std::ptrdiff_t(c) * a.out_col; };
    std::vector<T> dsum(BR), p(BR * BC), ds(BR * BC), dqt(BR * a.dk);
    for (std::size_t i0 = 0; i0 < a.nq; i0 += BR) {
      const std::size_t rows = std::min(BR, a.nq - i0);
      for (std::size_t r = 0; r < rows; ++r) {  // D = rowsum(dO * O)
        T s = T(0);
        for (std::size_t c = 0; c < a.dv; ++c) s += g.dout[o_el(i0 + r, c)] * a.out[o_el(i0 + r, c)];
        dsum[r] = s;
      }
      std::fill(dqt.begin(), dqt.end(), T(0));
      const std::size_t end = key_end(i0 + rows - 1);
      for (std::size_t j0 = 0; j0 < end; j0 += BC) {
        const std::size_t n = std::min(BC, end - j0);
        for (std::size_t r = 0; r < rows; ++r) {
          const std::size_t i = i0 + r;
          const T lse = g.lse[bi * a.nq + i];
          for (std::size_t jj = 0; jj < n; ++jj) {
            const std::size_t j = j0 + jj;
            T raw = T(0);
            for (std::size_t d = 0; d < a.dk; ++d) raw += qb[q_el(i, d)] * kb[k_el(j, d)];
            T x, gd;
            score(raw, bi, i, j, x, gd);
            const T pr = std::exp(x - lse);  // all -inf row: NaN
            T dp = T(0);  // dP = dO Vᵀ
            for (std::size_t c = 0; c < a.dv; ++c) dp += g.dout[o_el(i, c)] * vb[v_el(j, c)];
            p[r * BC + jj] = pr;
            // masked_fill's backward: exactly 0 where the mask replaced the score
            ds[r * BC + jj] = gd == T(0) ? T(0) : gd * (pr * (dp - dsum[r]));
          }
        }
        for (std::size_t jj = 0; jj < n; ++jj) {
          const std::size_t j = j0 + jj;
          for (std::size_t c = 0; c < a.dv; ++c) {  // dV += Pᵀ dO
            T s = T(0);
            for (std::size_t r = 0; r < rows; ++r) s += p[r * BC + jj] * g.dout[o_el(i0 + r, c)];
            dvb[v_el(j, c)] += s;
          }
          for (std::size_t d = 0; d < a.dk; ++d) {  // dK += dSᵀ Q
            T s = T(0);
            for (std::size_t r = 0; r < rows; ++r) s += ds[r * BC + jj] * qb[q_el(i0 + r, d)];
            dkb[k_el(j, d)] += s;
          }
        }
        for (std::size_t r = 0; r < rows; ++r)  // dQ += dS K
          for (std::size_t jj = 0; jj < n; ++jj) {
            const T d_s = ds[r * BC + jj];
            for (std::size_t d = 0; d < a.dk; ++d) dqt[r * a.dk + d] += d_s * kb[k_el(j0 + jj, d)];
          }
      }
      for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t d = 0; d < a.dk; ++d) dqb[q_el(i0 + r, d)] += dqt[r * a.dk + d];
    }
  }
};

}  // namespace detail

/// The per-query-row statistic the fused backward needs,
/// lse[b * nq + i] = log sum_j exp(f(S[b, i, j])) (-inf for a row of only
/// -inf scores), computed key by key without materialising the scores.
/// Example: `std::vector<float> lse(args.batch_size() * args.nq); attention_row_stats(args, lse.data());`
template <class T>
void attention_row_stats(const attention_args<T>& args, T* lse) {
  detail::attention_backward_kernel<T>(args).row_stats(lse);
}

/// The backward of `attention(args)`: dQ, dK, dV from dO, the saved output
/// `args.out` and `attention_row_stats`. Shapes are the forward's (dq like
/// q, dk like k, dv like v). Example:
/// `attention_backward(attention_grad_args<float>{&args, lse.data(), dout, dq, dk, dv});`
template <class T>
void attention_backward(const attention_grad_args<T>& g) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "dimsum: fused attention supports float and double");
  detail::attention_backward_kernel<T>(*g.fwd).run(g);
}

}  // namespace dimsum::kernels
