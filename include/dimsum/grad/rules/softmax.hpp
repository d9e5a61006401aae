#pragma once
/// \file
/// softmax over a named dim, on vars: with y = softmax<D>(x), the gradient
/// is y * (g - sum<D>(g * y)).
///
///     auto pattern = dimsum::softmax<k_posn>(masked);

#include <dimsum/grad/rules/elementwise.hpp>
#include <dimsum/ops/reduce.hpp>
#include <dimsum/ops/softmax.hpp>

namespace dimsum {

/// softmax of a var along dim D; records y * (g - sum<D>(g * y)).
template <dimension D, grad::detail::var_like V>
auto softmax(V&& v) {
  if constexpr (grad::detail::bf16_operands_v<V>)  // in float32, rounded once (rules/cast.hpp)
    return grad::detail::in_float32([](auto x) { return dimsum::softmax<D>(std::move(x)); }, std::forward<V>(v));
  else
  return grad::detail::record_op(dimsum::softmax<D>(v.value()), [v](const auto& g, const auto& y) {
    using T = value_type_of_t<decltype(y)>;
    const tensor_for_t<T, without_t<dims_of_t<decltype(y)>, dim_list<D>>> s = dimsum::sum<D>(g * y);
    // Two steps: one nested expression y * (g - s) trips a false
    // -Warray-bounds in g++ 12 at -O3.
    const tensor_for_t<T, dims_of_t<decltype(y)>> centred = g - s;
    v.node()->accumulate(y * centred);
  }, v);
}

}  // namespace dimsum
