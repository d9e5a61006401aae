#pragma once
/// \file
/// Vectorised softmax rows (xsimd `exp`), shared by softmax and the fused
/// attention kernel. Same semantics as the reference `softmax_row`: a row of
/// only -inf gives NaN (exp(-inf - -inf)), a NaN anywhere makes the row NaN.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <type_traits>
#include <vector>

#include "dimsum/core/bf16.hpp"
#include "dimsum/kernels/reference.hpp"
#include "dimsum/kernels/simd.hpp"

namespace dimsum::kernels {

namespace detail {

/// Calls f(p) for each whole vector of W values at p in row[0..n): the last, partial
/// vector is staged through an aligned buffer whose lanes past the row hold
/// `fill` and is copied back after f when `write_back`, so tails run the same
/// vector code (a tail of scalar `exp` calls cost more than the rest of a
/// short attention row).
template <std::size_t W, class T, class F>
void for_each_vector(T* row, std::size_t n, T fill, bool write_back, F&& f) {
  std::size_t j = 0;
  for (; j + W <= n; j += W) f(row + j);
  if (j < n) {
    alignas(64) T tail[W];
    for (std::size_t x = 0; x < W; ++x) tail[x] = j + x < n ? row[j + x] : fill;
    f(static_cast<T*>(tail));
    if (write_back)
      for (std::size_t x = 0; j + x < n; ++x) row[j + x] = tail[x];
  }
}

/// The largest lane of v (lanes compared with std::max, in order).
template <class T, class Arch>
T lane_max(const typename simd_ops<T, Arch>::vec& v) noexcept {
  using ops = simd_ops<T, Arch>;
  alignas(64) T tmp[ops::width];
  ops::store(tmp, v);
  T mx = -std::numeric_limits<T>::infinity();
  for (std::size_t x = 0; x < ops::width; ++x) mx = std::max(mx, tmp[x]);
  return mx;
}

/// The largest of row[0..n) (-inf for n == 0).
template <class T, class Arch>
T row_max(const T* row, std::size_t n) noexcept {
  using ops = simd_ops<T, Arch>;
  constexpr std::size_t W = ops::width;
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  if constexpr (W > 1) {
    auto vm = ops::broadcast(ninf);
    for_each_vector<W>(const_cast<T*>(row), n, ninf, false, [&](T* p) { vm = xsimd::max(vm, ops::loadu(p)); });
    return lane_max<T, Arch>(vm);
  } else {
    T mx = ninf;
    for (std::size_t j = 0; j < n; ++j) mx = std::max(mx, row[j]);
    return mx;
  }
}

/// row[j] = exp(row[j] - ref) for j < n; returns their sum.
template <class T, class Arch>
T exp_shifted_sum(T* row, std::size_t n, T ref) noexcept {
  using ops = simd_ops<T, Arch>;
  constexpr std::size_t W = ops::width;
  if constexpr (W > 1) {
    // xsimd's exp converts its argument to integers; for double on AVX2 that
    // is a scalar cast, undefined for -inf and NaN. So a double argument is
    // kept finite (below -1000 exp is 0) and NaN is put back afterwards,
    // giving exp's own results: 0 for -inf, NaN for NaN. For float the
    // conversion is a vector instruction, defined for every input, and exp
    // already gives 0 and NaN. Tail lanes past the row hold -inf and add 0.
    const auto vr = ops::broadcast(ref);
    const auto floor = ops::broadcast(T(-1000));
    auto vs = ops::zero();
    for_each_vector<W>(row, n, -std::numeric_limits<T>::infinity(), true, [&](T* q) {
      const auto x = ops::loadu(q) - vr;
      auto p = x;
      if constexpr (std::is_same_v<T, float>) {
        p = xsimd::exp(x);
      } else {
        const auto nan = xsimd::isnan(x);
        p = xsimd::select(nan, x, xsimd::exp(xsimd::select(nan, floor, xsimd::max(x, floor))));
      }
      ops::storeu(q, p);
      vs = vs + p;
    });
    return xsimd::hadd(vs);
  } else {
    T sum = 0;
    for (std::size_t j = 0; j < n; ++j) sum += (row[j] = std::exp(row[j] - ref));
    return sum;
  }
}

/// row[j] = row[j] * s (Divide: row[j] / s) for j < n.
template <class T, class Arch, bool Divide = false>
void scale_row(T* row, std::size_t n, T s) noexcept {
  using ops = simd_ops<T, Arch>;
  constexpr std::size_t W = ops::width;
  auto apply = [](auto x, auto f) { return Divide ? x / f : x * f; };
  if constexpr (W > 1) {
    const auto vs = ops::broadcast(s);
    for_each_vector<W>(row, n, T(1), true, [&](T* q) { ops::storeu(q, apply(ops::loadu(q), vs)); });
  } else {
    for (std::size_t j = 0; j < n; ++j) row[j] = apply(row[j], s);
  }
}

}  // namespace detail

/// Softmax of n contiguous values in place, on `Arch`: exp(x - max) / sum.
template <class Arch, class T>
void softmax_contiguous_on(T* row, std::size_t n) noexcept {
  if (n == 0) return;
  const T m = detail::row_max<T, Arch>(row, n);
  const T s = detail::exp_shifted_sum<T, Arch>(row, n, m);
  detail::scale_row<T, Arch, true>(row, n, s);
}

/// Softmax of n contiguous values in place: vectorised for float and double
/// (`best_gemm_arch`) and for bf16 (converted to float, exactly, in a
/// per-thread buffer; the softmax in float32; each value rounded once),
/// the reference loop otherwise.
template <class T>
void softmax_contiguous(T* row, std::size_t n) noexcept {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    softmax_contiguous_on<best_gemm_arch>(row, n);
  } else if constexpr (is_bf16_v<T>) {
    thread_local std::vector<float> f;
    f.resize(n);
    for (std::size_t i = 0; i < n; ++i) f[i] = row[i].to_float();
    softmax_contiguous_on<best_gemm_arch>(f.data(), n);
    for (std::size_t i = 0; i < n; ++i) row[i] = bf16(f[i]);
  } else
    softmax_row(row, n, 1);
}

/// out[j] = log_softmax(x)[j] = (x[j] - m) - log(sum_k exp(x[k] - m)) for
/// n contiguous values, m the row's maximum (0 when that is infinite, as
/// ops/log_softmax.hpp's general path: a row of -inf gives NaN, a +inf
/// element NaN and the others -inf, as PyTorch); NaN anywhere makes the row
/// NaN. Vectorised for float and double, the loops otherwise.
template <class T>
void log_softmax_contiguous(const T* x, T* out, std::size_t n) noexcept {
  if (n == 0) return;
  T m = T(0), s = T(0);
  bool vectorised = false;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    m = detail::row_max<T, best_gemm_arch>(x, n);
    // An infinite maximum (a +inf element, or a row of -inf) takes the
    // loop below: the vector exp must not see +inf.
    if (!std::isinf(m)) {
      std::copy_n(x, n, out);
      s = detail::exp_shifted_sum<T, best_gemm_arch>(out, n, m);
      vectorised = true;
    }
  }
  if (!vectorised) {
    m = x[0];
    for (std::size_t j = 1; j < n; ++j) m = std::max(m, x[j]);
    if (std::isinf(m)) m = T(0);
    for (std::size_t j = 0; j < n; ++j) s += std::exp(x[j] - m);
  }
  const T lse = std::log(s);
  for (std::size_t j = 0; j < n; ++j) out[j] = (x[j] - m) - lse;
}

}  // namespace dimsum::kernels
