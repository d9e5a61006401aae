#pragma once
/// \file
/// softmax with sink logits (ops/sink_softmax.hpp) on vars: with
/// y = softmax<D>(x, sinks) and s = sum<D>(g * y), the gradient of x is
/// y * (g - s) and that of the sinks is -p * s summed onto their dims,
/// where p is each slice's sink weight exp(sink) / (exp(sink) + sum_j
/// exp(x_j)).
///
///     auto pattern = dimsum::softmax<k_posn>(scores, sinks);   // sinks: a var over heads

#include <type_traits>
#include <utility>

#include <dimsum/grad/rules/elementwise.hpp>
#include <dimsum/ops/reduce.hpp>
#include <dimsum/ops/sink_softmax.hpp>

namespace dimsum::grad::detail {

/// A var x and sink logits that are a var or a tensor or expression.
template <class X, class S>
concept sink_softmax_operands = var_like<X> && (var_like<S> || named_expression<S>);

/// The sinks as a node keeps them: a var, or an owned tensor.
template <class S>
auto kept_sinks(S&& sinks) {
  if constexpr (var_like<S>)
    return std::remove_cvref_t<S>(std::forward<S>(sinks));
  else
    return dimsum::eval(std::forward<S>(sinks));
}

}  // namespace dimsum::grad::detail

namespace dimsum {

/// softmax of a var along dim D with sink logits (a var, which gets its
/// gradient, or a constant tensor): records y * (g - s) for x and -p * s
/// for the sinks (see the file comment).
template <dimension D, class X, class S>
  requires grad::detail::sink_softmax_operands<X, S>
auto softmax(X&& x, S&& sinks) {
  namespace gd = grad::detail;
  auto kept = gd::kept_sinks(std::forward<S>(sinks));
  const auto& xv = gd::value_of(x);
  return gd::record_op(
      dimsum::softmax<D>(xv, gd::value_of(kept)),
      [x = std::remove_cvref_t<X>(x), kept](const auto& g, const auto& y) {
        using T = value_type_of_t<decltype(y)>;
        const tensor_for_t<T, without_t<dims_of_t<decltype(y)>, dim_list<D>>> s = dimsum::sum<D>(g * y);
        if (gd::needs_grad(x)) {
          const tensor_for_t<T, dims_of_t<decltype(y)>> centred = g - s;
          x.node()->accumulate(y * centred);
        }
        if (gd::needs_grad(kept)) {
          const auto p = dimsum::detail::sink_weights<D>(gd::value_of(x), gd::value_of(kept));
          gd::send(kept, p * s * T(-1));
        }
      },
      x, kept);
}

}  // namespace dimsum
