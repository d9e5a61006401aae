#pragma once
/// \file
/// causal_mask and masked_fill on vars: the masked elements are constants,
/// so their gradient is 0 and the others pass the gradient through (the
/// same mask applied to the gradient with the value 0).
///
///     auto masked = dimsum::causal_mask<q_posn, k_posn>(scores, -inf);

#include <dimsum/grad/rules/elementwise.hpp>
#include <dimsum/ops/mask.hpp>

namespace dimsum {

/// causal_mask<Q, K> of a var; the gradient is causal_mask<Q, K>(g, 0).
template <dimension Q, dimension K, grad::detail::var_like V, scalar S>
auto causal_mask(V&& v, S masked_value) {
  using T = typename std::remove_cvref_t<V>::value_type;
  return grad::detail::record_op(dimsum::causal_mask<Q, K>(v.value(), masked_value), [v](const auto& g, const auto&) {
    v.node()->accumulate(dimsum::causal_mask<Q, K>(g, accumulator_t<T>(0)));  // float 0 for bf16
  }, v);
}

/// masked_fill of a var with a boolean mask (a constant, broadcast by
/// name); the gradient is masked_fill(g, mask, 0).
template <grad::detail::var_like V, named_expression M, scalar S>
auto masked_fill(V&& v, M&& mask, S value) {
  using T = typename std::remove_cvref_t<V>::value_type;
  auto m = dimsum::eval(std::forward<M>(mask));
  return grad::detail::record_op(dimsum::masked_fill(v.value(), m, value), [v, m](const auto& g, const auto&) {
    v.node()->accumulate(dimsum::masked_fill(g, m, accumulator_t<T>(0)));
  }, v);
}

}  // namespace dimsum
