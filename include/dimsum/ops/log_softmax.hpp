#pragma once
/// \file
/// `log_softmax<D>(x)` on tensors and expressions: x - max - log(sum(exp(x -
/// max))) along the named dim D, computed stably (torch's
/// `F.log_softmax(x, dim)`). It evaluates into a tensor with x's dims in x's
/// order. The var form, with its gradient, is in grad/rules/log_softmax.hpp.
///
///     tensor<float, batch, posn, vocab> lp = dimsum::log_softmax<vocab>(logits);

#include <cmath>
#include <type_traits>
#include <utility>

#include <dimsum/core/diagnostics.hpp>
#include <dimsum/kernels/softmax.hpp>
#include <dimsum/ops/map.hpp>
#include <dimsum/ops/reduce.hpp>

namespace dimsum {

/// Compile-time error: log_softmax<D> of a tensor without the dim D.
template <class Log_softmax_dim, class Dims>
struct log_softmax_dim_is_not_a_dim_of_the_tensor {
  static_assert(detail::always_false<Log_softmax_dim, Dims>,
                "dimsum: log_softmax over a dim that the tensor does not have");
};

namespace detail {
/// log_softmax of x along D, computed stably: x - max - log(sum(exp(x - max))).
/// A row that is -inf everywhere gives NaN, as torch does (its exps sum to 0).
/// When D is x's last dim, on kernels::log_softmax_contiguous's rows.
template <dimension D, class T, class L>
tensor_for_t<T, L> log_softmax_values(const tensor_for_t<T, L>& x) {
  if constexpr (L::names[L::size - 1] == D::name.view()) {  // contiguous rows: kernels/softmax.hpp
    auto out = tensor_for_t<T, L>::from_extents(x.extents());
    const std::size_t n = x.template extent<D>();
    for (std::size_t r = 0; n > 0 && r < x.size() / n; ++r)
      kernels::log_softmax_contiguous(x.data() + r * n, out.data() + r * n, n);
    return out;
  } else {
    using R = without_t<L, dim_list<D>>;
    const tensor_for_t<T, R> m0 = dimsum::max<D>(x);
    // A row of -inf keeps max -inf; subtract 0 there (-inf - -inf would be NaN
    // before the sum): its entries stay -inf, then log(0) makes them NaN.
    const tensor_for_t<T, R> m = dimsum::map([](T v) { return std::isinf(v) ? T(0) : v; }, m0);
    const tensor_for_t<T, L> shifted = x - m;
    const tensor_for_t<T, R> s = dimsum::sum<D>(dimsum::map([](T v) { return std::exp(v); }, shifted));
    const tensor_for_t<T, R> lse = dimsum::map([](T v) { return std::log(v); }, s);
    return shifted - lse;
  }
}
}  // namespace detail

/// log_softmax of x along the dim D: a tensor with x's dims (in x's order)
/// whose exp sums to 1 along D. Compile error
/// `log_softmax_dim_is_not_a_dim_of_the_tensor` if x has no dim D.
template <dimension D, named_expression X>
auto log_softmax(X&& x) {
  using T = value_type_of_t<X>;
  using L = dims_of_t<X>;
  if constexpr (is_invalid_v<X>) {
    return invalid_expression{};  // an error already reported
  } else if constexpr (!contains_v<L, D>) {
    detail::report<log_softmax_dim_is_not_a_dim_of_the_tensor<diagnostic_name_t<D>, diagnostic_dims_t<L>>>();
    return invalid_expression{};
  } else {
    static_assert(std::is_floating_point_v<T>, "dimsum: log_softmax needs floating-point values");
    if constexpr (std::is_same_v<std::remove_cvref_t<X>, tensor_for_t<T, L>>)
      return detail::log_softmax_values<D, T, L>(x);
    else
      return detail::log_softmax_values<D, T, L>(tensor_for_t<T, L>(std::forward<X>(x)));
  }
}

}  // namespace dimsum
