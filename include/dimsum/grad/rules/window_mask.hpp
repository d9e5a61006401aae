#pragma once
/// \file
/// window_mask on vars: the masked elements are constants, so the gradient
/// is the same window mask applied to the incoming gradient with value 0.

#include <cstddef>

#include <dimsum/core/bf16.hpp>
#include <dimsum/grad/rules/elementwise.hpp>
#include <dimsum/ops/window_mask.hpp>

namespace dimsum {

/// window_mask<Q, K> of a var; the gradient is window_mask<Q, K>(g, window, 0, offset) (bf16 vars too).
template <dimension Q, dimension K, grad::detail::var_like V, scalar S>
auto window_mask(V&& v, std::size_t window, S masked_value, std::size_t offset = 0) {
  using T = typename std::remove_cvref_t<V>::value_type;
  return grad::detail::record_op(dimsum::window_mask<Q, K>(v.value(), window, masked_value, offset),
                                 [v, window, offset](const auto& g, const auto&) {
                                   v.node()->accumulate(dimsum::window_mask<Q, K>(g, window, accumulator_t<T>(0), offset));
                                 }, v);
}

}  // namespace dimsum
