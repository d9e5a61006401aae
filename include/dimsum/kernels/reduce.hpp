#pragma once
/// \file
/// The reduction kernel: sum, max, min or mean over some axes of a strided
/// block, in plain loops over extents and strides (never names). NaN
/// propagates through max and min as in PyTorch; an empty reduction gives
/// the operation's identity (0, -inf, +inf) and mean NaN (0 / 0).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "dimsum/kernels/detail/odometer.hpp"

namespace dimsum::kernels {

enum class reduce_op { sum, max, min, mean };

/// out[o] = reduce over the reduced axes of in[...]; the first n_out axes of
/// `extents` are the output's, the rest are reduced. `in_strides` has one
/// stride per axis.
template <class T>
void reduce_loops(reduce_op op, T* out, const std::ptrdiff_t* out_strides, std::size_t n_out,
                  const std::size_t* extents, std::size_t n_axes, const T* in, const std::ptrdiff_t* in_strides) {
  for (std::size_t l = 0; l < n_out; ++l)
    if (extents[l] == 0) return;
  std::size_t count = 1;
  for (std::size_t l = n_out; l < n_axes; ++l) count *= extents[l];
  std::vector<std::size_t> idx(n_axes, 0);
  while (true) {
    std::ptrdiff_t o = 0;
    for (std::size_t l = 0; l < n_out; ++l) o += static_cast<std::ptrdiff_t>(idx[l]) * out_strides[l];
    T acc = op == reduce_op::max   ? -std::numeric_limits<T>::infinity()
            : op == reduce_op::min ? std::numeric_limits<T>::infinity()
                                   : T(0);
    if (count > 0) {  // otherwise the input is empty and `in` may be null
      const T* base = in;
      for (std::size_t l = 0; l < n_out; ++l) base += static_cast<std::ptrdiff_t>(idx[l]) * in_strides[l];
      std::fill(idx.begin() + static_cast<std::ptrdiff_t>(n_out), idx.end(), 0);
      while (true) {
        const T* p = base;
        for (std::size_t l = n_out; l < n_axes; ++l) p += static_cast<std::ptrdiff_t>(idx[l]) * in_strides[l];
        const T v = *p;
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
    if (op == reduce_op::mean) acc /= static_cast<T>(count);
    out[o] = acc;
    if (!detail::next_index(idx.data(), extents, 0, n_out)) return;
  }
}

}  // namespace dimsum::kernels
