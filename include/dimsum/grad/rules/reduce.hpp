#pragma once
/// \file
/// sum, mean, max and min over named dims, on vars. The gradient of a
/// reduction is broadcast back over the reduced dims: as is for sum,
/// divided by the count for mean, and for max/min shared equally among
/// the elements equal to the extremum (PyTorch's `amax`/`amin` rule).
///
///     auto loss = dimsum::mean<batch, posn>(err * err);

#include <utility>

#include <dimsum/grad/rules/elementwise.hpp>
#include <dimsum/ops/reduce.hpp>

namespace dimsum {

/// Sum of a var over the named dims; its gradient is broadcast back.
template <dimension... Ds, grad::detail::var_like V>
auto sum(V&& v) {
  return grad::detail::record_op(dimsum::sum<Ds...>(v.value()),
                                 [v](const auto& g, const auto&) { v.node()->accumulate(g); }, v);
}

/// Mean of a var over the named dims; its gradient is broadcast back and
/// divided by the number of elements averaged.
template <dimension... Ds, grad::detail::var_like V>
auto mean(V&& v) {
  using T = typename std::remove_cvref_t<V>::value_type;
  return grad::detail::record_op(dimsum::mean<Ds...>(v.value()), [v](const auto& g, const auto& out) {
    const std::size_t n = out.size() == 0 ? 0 : v.value().size() / out.size();
    v.node()->accumulate(g / T(n));
  }, v);
}

namespace grad::detail {
template <class Fwd, class V>
auto record_extremum(Fwd&& fwd, const V& v) {
  using T = typename V::value_type;
  return record_op(std::forward<Fwd>(fwd), [v](const auto& g, const auto& out) {
    using R = dims_of_t<decltype(out)>;
    const tensor_for_t<T, typename V::dims> hit = dimsum::cast<T>(v.value() == out);
    const tensor_for_t<T, R> ties = dimsum::detail::make_einsum<R>(hit);
    v.node()->accumulate(hit * (g / ties));
  }, v);
}
}  // namespace grad::detail

/// Maximum of a var over the named dims; the gradient goes to the maximal
/// elements (shared equally among ties).
template <dimension... Ds, grad::detail::var_like V>
auto max(V&& v) {
  return grad::detail::record_extremum(dimsum::max<Ds...>(v.value()), v);
}

/// Minimum of a var over the named dims; the gradient goes to the minimal
/// elements (shared equally among ties).
template <dimension... Ds, grad::detail::var_like V>
auto min(V&& v) {
  return grad::detail::record_extremum(dimsum::min<Ds...>(v.value()), v);
}

}  // namespace dimsum
