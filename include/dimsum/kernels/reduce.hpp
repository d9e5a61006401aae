#pragma once
/// \file
/// The reduction kernel: sum, max, min or mean over some axes of a strided
/// block, over extents and strides (never names). NaN propagates through
/// max and min as in PyTorch; an empty reduction gives the operation's
/// identity (0, -inf, +inf; an integer type's lowest and largest value)
/// and mean NaN (0 / 0). Sums and means of float
/// and double run vectorised where the memory allows: over contiguous rows
/// (layer norm's statistics, softmax's backward) and down contiguous
/// columns (a bias gradient summed over batch and positions); everything
/// else in plain loops.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include <type_traits>

#include "dimsum/core/bf16.hpp"
#include "dimsum/kernels/detail/odometer.hpp"
#include "dimsum/kernels/simd.hpp"

namespace dimsum::kernels {

enum class reduce_op { sum, max, min, mean };

namespace detail {

/// Whether axes [first, last) of `extents` with `strides` are one dense
/// row-major block (the last axis of stride 1).
inline bool dense_axes(const std::size_t* extents, const std::ptrdiff_t* strides, std::size_t first, std::size_t last) {
  std::ptrdiff_t want = 1;
  for (std::size_t l = last; l > first;) {
    --l;
    if (extents[l] != 1 && strides[l] != want) return false;
    want *= static_cast<std::ptrdiff_t>(extents[l]);
  }
  return true;
}

/// The arch of the vectorised sums: the kernels' best for float and
/// double, plain scalar code for other element types.
template <class T>
using sum_arch = std::conditional_t<std::is_same_v<T, float> || std::is_same_v<T, double>, best_gemm_arch, scalar_arch>;

/// The sum of p[0..n), in vectors of four accumulators, then the tail.
template <class T, class Arch = sum_arch<T>>
T sum_contiguous(const T* p, std::size_t n) noexcept {
  using ops = simd_ops<T, Arch>;
  constexpr std::size_t W = ops::width;
  std::size_t i = 0;
  T acc = T(0);
  if constexpr (W > 1) {
    auto a0 = ops::zero(), a1 = ops::zero(), a2 = ops::zero(), a3 = ops::zero();
    for (; i + 4 * W <= n; i += 4 * W) {
      a0 += ops::loadu(p + i);
      a1 += ops::loadu(p + i + W);
      a2 += ops::loadu(p + i + 2 * W);
      a3 += ops::loadu(p + i + 3 * W);
    }
    for (; i + W <= n; i += W) a0 += ops::loadu(p + i);
    acc = xsimd::hadd((a0 + a1) + (a2 + a3));
  }
  for (; i < n; ++i) acc += p[i];
  return acc;
}

/// out[0..n) += p[0..n).
template <class T, class Arch = sum_arch<T>>
void add_contiguous(T* out, const T* p, std::size_t n) noexcept {
  using ops = simd_ops<T, Arch>;
  constexpr std::size_t W = ops::width;
  std::size_t i = 0;
  if constexpr (W > 1)
    for (; i + W <= n; i += W) ops::storeu(out + i, ops::loadu(out + i) + ops::loadu(p + i));
  for (; i < n; ++i) out[i] += p[i];
}

/// Sum or mean over the reduced axes when they are one dense block of each
/// output element's input (rows) or when the output axes are dense in the
/// input and in out (columns); false, doing nothing, otherwise.
template <class T>
bool reduce_sum_dense(reduce_op op, T* out, const std::ptrdiff_t* out_strides, std::size_t n_out,
                      const std::size_t* extents, std::size_t n_axes, const T* in, const std::ptrdiff_t* in_strides) {
  if constexpr (!std::is_same_v<T, float> && !std::is_same_v<T, double>) {
    return false;
  } else {
    if (op != reduce_op::sum && op != reduce_op::mean) return false;
    std::size_t count = 1, n = 1;
    for (std::size_t l = n_out; l < n_axes; ++l) count *= extents[l];
    for (std::size_t l = 0; l < n_out; ++l) n *= extents[l];
    if (count == 0 || n == 0) return false;  // the loops' empty cases
    std::vector<std::size_t> idx(n_axes, 0);
    if (dense_axes(extents, in_strides, n_out, n_axes)) {  // each output element sums one contiguous row
      while (true) {
        std::ptrdiff_t o = 0, i = 0;
        for (std::size_t l = 0; l < n_out; ++l) {
          o += static_cast<std::ptrdiff_t>(idx[l]) * out_strides[l];
          i += static_cast<std::ptrdiff_t>(idx[l]) * in_strides[l];
        }
        const T acc = sum_contiguous(in + i, count);
        out[o] = op == reduce_op::mean ? acc / static_cast<T>(count) : acc;  // as the loops divide
        if (!next_index(idx.data(), extents, 0, n_out)) return true;
      }
    }
    if (dense_axes(extents, in_strides, 0, n_out) && dense_axes(extents, out_strides, 0, n_out)) {
      // columns: out[0..n) accumulates one contiguous input row per reduced
      // index, in blocks of about sqrt(count) rows summed apart and then
      // added to out with compensation, so that the rounding error grows
      // with about sqrt(count) additions rather than count (a float bias
      // gradient over a million positions: 2e-5 relative error, now 1e-7).
      std::size_t block = 256;
      while (block * block < count) block *= 2;
      std::fill(out, out + n, T(0));
      const bool blocked = count > block;
      std::vector<T> partial(blocked ? n : 0), lost(blocked ? n : 0);
      T* acc = blocked ? partial.data() : out;
      for (bool more = true; more;) {
        for (std::size_t r = 0; r < block && more; ++r) {
          std::ptrdiff_t i = 0;
          for (std::size_t l = n_out; l < n_axes; ++l) i += static_cast<std::ptrdiff_t>(idx[l]) * in_strides[l];
          add_contiguous(acc, in + i, n);
          more = next_index(idx.data(), extents, n_out, n_axes);
        }
        if (blocked) {
          // Block sums join out with Kahan's compensation (`lost` holds
          // what rounding dropped), once per block: cheap next to the rows.
          for (std::size_t j = 0; j < n; ++j) {
            const T y = partial[j] - lost[j];
            const T t = out[j] + y;
            lost[j] = (t - out[j]) - y;
            out[j] = t;
          }
          if (more) std::fill(partial.begin(), partial.end(), T(0));
        }
      }
      if (op == reduce_op::mean)
        for (std::size_t j = 0; j < n; ++j) out[j] /= static_cast<T>(count);
      return true;
    }
    return false;
  }
}

}  // namespace detail

/// out[o] = reduce over the reduced axes of in[...]; the first n_out axes of
/// `extents` are the output's, the rest are reduced. `in_strides` has one
/// stride per axis. bf16 values are summed (and compared) in float32, and
/// each result rounded once.
template <class T>
void reduce_loops(reduce_op op, T* out, const std::ptrdiff_t* out_strides, std::size_t n_out,
                  const std::size_t* extents, std::size_t n_axes, const T* in, const std::ptrdiff_t* in_strides) {
  for (std::size_t l = 0; l < n_out; ++l)
    if (extents[l] == 0) return;
  if (detail::reduce_sum_dense(op, out, out_strides, n_out, extents, n_axes, in, in_strides)) return;
  std::size_t count = 1;
  for (std::size_t l = n_out; l < n_axes; ++l) count *= extents[l];
  std::vector<std::size_t> idx(n_axes, 0);
  while (true) {
    std::ptrdiff_t o = 0;
    for (std::size_t l = 0; l < n_out; ++l) o += static_cast<std::ptrdiff_t>(idx[l]) * out_strides[l];
    // The identity of max and min: +-inf, or the type's extremes for
    // integers (whose infinity() is 0).
    using A = accumulator_t<T>;
    using limits = std::numeric_limits<A>;
    A acc = op == reduce_op::max   ? (limits::has_infinity ? -limits::infinity() : limits::lowest())
            : op == reduce_op::min ? (limits::has_infinity ? limits::infinity() : limits::max())
                                   : A(0);
    if (count > 0) {  // otherwise the input is empty and `in` may be null
      const T* base = in;
      for (std::size_t l = 0; l < n_out; ++l) base += static_cast<std::ptrdiff_t>(idx[l]) * in_strides[l];
      std::fill(idx.begin() + static_cast<std::ptrdiff_t>(n_out), idx.end(), 0);
      while (true) {
        const T* p = base;
        for (std::size_t l = n_out; l < n_axes; ++l) p += static_cast<std::ptrdiff_t>(idx[l]) * in_strides[l];
        const A v = static_cast<A>(*p);
        switch (op) {
          case reduce_op::sum:
          case reduce_op::mean: acc += v; break;
          // NaN propagates, as in PyTorch's max/min.
          case reduce_op::max: acc = (v > acc || std::isnan(v)) && !std::isnan(acc) ? v : acc; break;
          case reduce_op::min: acc = (v < acc || std::isnan(v)) && !std::isnan(acc) ? v : acc; break;
        }
        if (!detail::next_index(idx.data(), extents, n_out, n_axes)) break;
      }
    }
    if (op == reduce_op::mean) acc /= static_cast<A>(count);
    out[o] = static_cast<T>(acc);
    if (!detail::next_index(idx.data(), extents, 0, n_out)) return;
  }
}

}  // namespace dimsum::kernels
