#pragma once
/// \file
/// Layer normalisation over contiguous rows, forward and backward, in one
/// pass per row each (xsimd vectors, scalar tails): what the tape runs when
/// the normalised dim is a tensor's last and the weight and bias have that
/// dim alone (nn.LayerNorm's case). The forward keeps each row's mean and
/// reciprocal standard deviation for the backward, as PyTorch's does, so no
/// normalised copy of the input is stored. Name-free, like every kernel.
///
/// Forward, per row x of n values: mean = sum(x) / n, var = sum((x -
/// mean)^2) / n (biased), rstd = 1 / sqrt(var + eps), y = (x - mean) rstd w + b.
/// Backward, with xhat = (x - mean) rstd and gh = g w: dx = rstd (gh -
/// mean(gh) - xhat mean(gh xhat)), dw += sum over rows of g xhat, db += sum
/// over rows of g.

#include <cmath>
#include <cstddef>
#include <type_traits>

#include "dimsum/kernels/reduce.hpp"
#include "dimsum/kernels/simd.hpp"

namespace dimsum::kernels {

namespace detail {

/// The sum over i < n of (p[i] - c)^2 (a row's variance times n),
/// vectorised with a scalar tail.
template <class T, class Arch = sum_arch<T>>
T sum_squared_deviation(const T* p, T c, std::size_t n) noexcept {
  using ops = simd_ops<T, Arch>;
  constexpr std::size_t W = ops::width;
  std::size_t i = 0;
  T acc = T(0);
  if constexpr (W > 1) {
    auto a0 = ops::zero(), a1 = ops::zero();
    const auto vc = ops::broadcast(c);
    for (; i + 2 * W <= n; i += 2 * W) {
      const auto d0 = ops::loadu(p + i) - vc;
      const auto d1 = ops::loadu(p + i + W) - vc;
      a0 += d0 * d0;
      a1 += d1 * d1;
    }
    for (; i + W <= n; i += W) {
      const auto d = ops::loadu(p + i) - vc;
      a0 += d * d;
    }
    acc = xsimd::hadd(a0 + a1);
  }
  for (; i < n; ++i) acc += (p[i] - c) * (p[i] - c);
  return acc;
}

}  // namespace detail

/// y[r, :] = layer norm of x[r, :] (rows of n contiguous values) with
/// weight w and bias b (n values each); mean[r] and rstd[r] receive each
/// row's statistics.
template <class T, class Arch = detail::sum_arch<T>>
void layer_norm_rows(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, std::size_t rows, std::size_t n,
                     T eps) noexcept {
  using ops = detail::simd_ops<T, Arch>;
  constexpr std::size_t W = ops::width;
  for (std::size_t r = 0; r < rows; ++r) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    const T mu = detail::sum_contiguous<T, Arch>(xr, n) / static_cast<T>(n);
    const T var = detail::sum_squared_deviation<T, Arch>(xr, mu, n) / static_cast<T>(n);
    const T rs = T(1) / std::sqrt(var + eps);
    mean[r] = mu;
    rstd[r] = rs;
    std::size_t j = 0;
    if constexpr (W > 1) {
      const auto vmu = ops::broadcast(mu), vrs = ops::broadcast(rs);
      for (; j + W <= n; j += W)
        ops::storeu(yr + j, (ops::loadu(xr + j) - vmu) * vrs * ops::loadu(w + j) + ops::loadu(b + j));
    }
    for (; j < n; ++j) yr[j] = (xr[j] - mu) * rs * w[j] + b[j];
  }
}

/// The backward of layer_norm_rows from the output's gradient g: dx (rows
/// x n, written; null if not wanted; may be g itself, computed in place),
/// dw and db (n values, added to; null if not wanted), from x, w and the
/// saved mean and rstd.
template <class T, class Arch = detail::sum_arch<T>>
void layer_norm_backward_rows(const T* g, const T* x, const T* w, const T* mean, const T* rstd, T* dx, T* dw, T* db,
                              std::size_t rows, std::size_t n) noexcept {
  using ops = detail::simd_ops<T, Arch>;
  constexpr std::size_t W = ops::width;
  for (std::size_t r = 0; r < rows; ++r) {
    const T* gr = g + r * n;
    const T* xr = x + r * n;
    const T mu = mean[r], rs = rstd[r];
    // s1 = sum(g w), s2 = sum(g w xhat); dw += g xhat; db += g.
    T s1 = T(0), s2 = T(0);
    std::size_t j = 0;
    if constexpr (W > 1) {
      const auto vmu = ops::broadcast(mu), vrs = ops::broadcast(rs);
      auto a1 = ops::zero(), a2 = ops::zero();
      for (; j + W <= n; j += W) {
        const auto gv = ops::loadu(gr + j);
        const auto xh = (ops::loadu(xr + j) - vmu) * vrs;
        const auto gh = gv * ops::loadu(w + j);
        a1 += gh;
        a2 += gh * xh;
        if (dw) ops::storeu(dw + j, ops::loadu(dw + j) + gv * xh);
        if (db) ops::storeu(db + j, ops::loadu(db + j) + gv);
      }
      s1 = xsimd::hadd(a1);
      s2 = xsimd::hadd(a2);
    }
    for (; j < n; ++j) {
      const T xh = (xr[j] - mu) * rs;
      const T gh = gr[j] * w[j];
      s1 += gh;
      s2 += gh * xh;
      if (dw) dw[j] += gr[j] * xh;
      if (db) db[j] += gr[j];
    }
    if (!dx) continue;
    const T m1 = s1 / static_cast<T>(n), m2 = s2 / static_cast<T>(n);
    T* dr = dx + r * n;
    j = 0;
    if constexpr (W > 1) {
      const auto vmu = ops::broadcast(mu), vrs = ops::broadcast(rs), vm1 = ops::broadcast(m1), vm2 = ops::broadcast(m2);
      for (; j + W <= n; j += W) {
        const auto xh = (ops::loadu(xr + j) - vmu) * vrs;
        ops::storeu(dr + j, vrs * (ops::loadu(gr + j) * ops::loadu(w + j) - vm1 - xh * vm2));
      }
    }
    for (; j < n; ++j) dr[j] = rs * (gr[j] * w[j] - m1 - (xr[j] - mu) * rs * m2);
  }
}

}  // namespace dimsum::kernels
