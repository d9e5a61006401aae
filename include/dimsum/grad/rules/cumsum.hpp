#pragma once
/// \file
/// cumsum along a named dim, on vars: y_i = x_0 + ... + x_i, so the
/// gradient of x_k is g_k + ... + g_{n-1}, the cumulative sum of g from the
/// end (torch.cumsum's backward: g.flip(d).cumsum(d).flip(d)).
///
///     auto running = dimsum::cumsum<posn>(x);

#include <dimsum/grad/rules/elementwise.hpp>
#include <dimsum/ops/cumsum.hpp>

namespace dimsum {

/// cumsum of a var along dim D; records the reversed cumulative sum of g.
template <dimension D, grad::detail::var_like V>
auto cumsum(V&& v) {
  return grad::detail::record_op(dimsum::cumsum<D>(v.value()), [v](const auto& g, const auto&) {
    v.node()->accumulate(cumsum_expr<D, decltype(g), true>(g));
  }, v);
}

}  // namespace dimsum
