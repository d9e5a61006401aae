#pragma once
/// \file
/// `arange<T>(D{n})`: the indices 0, 1, ..., n - 1 along dim D, as
/// torch.arange(n) (seed 001's positions for the position embedding).

#include <cstdint>

#include <dimsum/tensor/tensor.hpp>

namespace dimsum {

/// A rank-1 tensor along D holding 0 .. n - 1 (T defaults to int64, like
/// torch.arange).
template <class T = std::int64_t, dimension D>
tensor<T, D> arange(const D& extent) {
  tensor<T, D> t(extent);
  for (std::size_t i = 0; i < t.size(); ++i) t.data()[i] = static_cast<T>(i);
  return t;
}

}  // namespace dimsum
