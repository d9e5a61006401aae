#pragma once
/// \file
/// Plain-loop kernels over strided memory: the general contraction of any
/// number of operands and row-wise softmax (reductions: kernels/reduce.hpp).
/// They know extents and strides only, never names. The fast kernels
/// (kernels/gemm.hpp, kernels/softmax.hpp) take over the shapes they cover;
/// these remain the general path and the reference the fast ones are tested
/// against.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "dimsum/core/bf16.hpp"
#include "dimsum/kernels/detail/odometer.hpp"

namespace dimsum::kernels {

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

/// softmax_row of bf16 values: the row converted to float (exactly), its
/// softmax in float32, each result rounded once to bf16.
inline void softmax_row(bf16* row, std::size_t n, std::ptrdiff_t stride) {
  std::vector<float> f(n);
  for (std::size_t i = 0; i < n; ++i) f[i] = row[static_cast<std::ptrdiff_t>(i) * stride].to_float();
  softmax_row(f.data(), n, 1);
  for (std::size_t i = 0; i < n; ++i) row[static_cast<std::ptrdiff_t>(i) * stride] = bf16(f[i]);
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
