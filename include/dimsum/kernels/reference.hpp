#pragma once
/// \file
/// Plain-loop kernels over strided memory: the general contraction of any
/// number of operands, reductions along axes, and row-wise softmax. They
/// know extents and strides only, never names. The fast kernels
/// (kernels/gemm.hpp) take over the shapes they cover; these remain the
/// general path and the reference the fast ones are tested against.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace dimsum::kernels {

namespace detail {
/// Advances the odometer idx over axes [first, last) (the last fastest);
/// false once it wraps around.
inline bool next_index(std::size_t* idx, const std::size_t* extents, std::size_t first, std::size_t last) {
  for (std::size_t l = last; l > first;) {
    --l;
    if (++idx[l] < extents[l]) return true;
    idx[l] = 0;
  }
  return false;
}
}  // namespace detail

/// out[o] = sum over the summed labels of prod_j op_j[...], where the labels
/// are numbered 0..n_labels-1, the first n_out of them are the output's.
/// `op_strides[j][l]` is operand j's stride along label l (0 if it lacks it).
template <class T>
void contract_loops(T* out, const std::ptrdiff_t* out_strides, std::size_t n_out, const std::size_t* extents,
                    std::size_t n_labels, const std::vector<const T*>& ops,
                    const std::vector<std::vector<std::ptrdiff_t>>& op_strides) {
  const std::size_t n_ops = ops.size();
  for (std::size_t l = 0; l < n_labels; ++l)
    if (extents[l] == 0 && l < n_out) return;  // empty output
  // An empty sum gives zeros; the operands are then empty and their
  // pointers (possibly null) must not be offset.
  bool empty_sum = false;
  for (std::size_t l = n_out; l < n_labels; ++l)
    if (extents[l] == 0) empty_sum = true;
  std::vector<std::size_t> idx(n_labels, 0);
  std::vector<const T*> base(n_ops);
  while (true) {
    std::ptrdiff_t o = 0;
    for (std::size_t l = 0; l < n_out; ++l) o += static_cast<std::ptrdiff_t>(idx[l]) * out_strides[l];
    T acc = T(0);
    if (!empty_sum) {
      for (std::size_t j = 0; j < n_ops; ++j) {
        const T* p = ops[j];
        for (std::size_t l = 0; l < n_out; ++l) p += static_cast<std::ptrdiff_t>(idx[l]) * op_strides[j][l];
        base[j] = p;
      }
      std::fill(idx.begin() + static_cast<std::ptrdiff_t>(n_out), idx.end(), 0);
      while (true) {
        T prod = T(1);
        for (std::size_t j = 0; j < n_ops; ++j) {
          const T* p = base[j];
          for (std::size_t l = n_out; l < n_labels; ++l) p += static_cast<std::ptrdiff_t>(idx[l]) * op_strides[j][l];
          prod *= *p;
        }
        acc += prod;
        if (!detail::next_index(idx.data(), extents, n_out, n_labels)) break;
      }
    }
    out[o] = acc;
    if (!detail::next_index(idx.data(), extents, 0, n_out)) return;
  }
}

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

/// Numerically stable softmax of one strided row in place:
/// exp(x - max) / sum. A row of only -inf gives NaN, as in PyTorch.
template <class T>
void softmax_row(T* row, std::size_t n, std::ptrdiff_t stride) {
  if (n == 0) return;
  T m = -std::numeric_limits<T>::infinity();
  for (std::size_t i = 0; i < n; ++i) {
    const T v = row[static_cast<std::ptrdiff_t>(i) * stride];
    if (v > m || std::isnan(v)) m = v;
    if (std::isnan(m)) break;
  }
  T s = T(0);
  for (std::size_t i = 0; i < n; ++i) {
    T& v = row[static_cast<std::ptrdiff_t>(i) * stride];
    v = std::exp(v - m);
    s += v;
  }
  for (std::size_t i = 0; i < n; ++i) row[static_cast<std::ptrdiff_t>(i) * stride] /= s;
}

/// Softmax along `axis` of a strided block, in place.
template <class T, std::size_t R>
void softmax_axis(T* data, const std::array<std::size_t, R>& ext, const std::array<std::ptrdiff_t, R>& strides,
                  std::size_t axis) {
  for (std::size_t i = 0; i < R; ++i)
    if (ext[i] == 0) return;
  std::array<std::size_t, R> idx{};
  while (true) {
    T* row = data;
    for (std::size_t i = 0; i < R; ++i) row += static_cast<std::ptrdiff_t>(idx[i]) * strides[i];
    softmax_row(row, ext[axis], strides[axis]);
    std::size_t d = R;
    bool done = true;
    while (d > 0) {
      --d;
      if (d == axis) continue;
      if (++idx[d] < ext[d]) {
        done = false;
        break;
      }
      idx[d] = 0;
    }
    if (done) return;
  }
}

}  // namespace dimsum::kernels
