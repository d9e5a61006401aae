#pragma once
/// \file
/// `log_softmax<D>` and `cross_entropy<Class>(logits, targets)` on vars,
/// named by dimension. cross_entropy takes integer class ids whose dims are
/// the logits' dims without the class dim (in any order), and reduces by
/// mean (torch's default) or sum.
///
///     auto loss = dimsum::cross_entropy<vocab>(logits, next_ids);   // logits (batch, posn, vocab)

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include <dimsum/grad/rules/elementwise.hpp>
#include <dimsum/kernels/vector_math.hpp>
#include <dimsum/ops/cross_entropy.hpp>
#include <dimsum/ops/log_softmax.hpp>
#include <dimsum/ops/reduce.hpp>

namespace dimsum {

/// log_softmax of a var along D; the gradient is g - softmax * sum<D>(g).
template <dimension D, grad::detail::var_like V>
auto log_softmax(V&& v) {
  using X = std::remove_cvref_t<V>;
  using T = typename X::value_type;
  using L = typename X::dims;
  if constexpr (!contains_v<L, D>) {
    detail::report<log_softmax_dim_is_not_a_dim_of_the_tensor<diagnostic_name_t<D>, diagnostic_dims_t<L>>>();
    return invalid_expression{};
  } else if constexpr (is_bf16_v<T>) {  // in float32, rounded once (rules/cast.hpp)
    return grad::detail::in_float32([](auto x) { return dimsum::log_softmax<D>(std::move(x)); }, std::forward<V>(v));
  } else {
    return grad::detail::record_op(detail::log_softmax_values<D, T, L>(v.value()), [v](const auto& g, const auto& out) {
      using R = without_t<L, dim_list<D>>;
      const tensor_for_t<T, R> gs = dimsum::sum<D>(g);
      const tensor_for_t<T, L> p = grad::detail::map(out, [](T y) { return std::exp(y); });
      tensor_for_t<T, L> d = p * gs;
      // g - p * gs, in place (g and d share the dims order L); an
      // expression here trips a false -Warray-bounds in g++ 12 at -O3.
      for (std::size_t i = 0; i < d.size(); ++i) d.data()[i] = g.data()[i] - d.data()[i];
      v.node()->accumulate_raw(d.data());
    }, v);
  }
}

/// The cross-entropy of logits (a var with the class dim Class) against
/// integer class ids `targets` (the logits' other dims, any order):
/// -log_softmax<Class>(logits)[target], reduced by mean or sum to rank 0.
/// An id outside [0, extent of Class) throws shape_error.
template <dimension Class, grad::detail::var_like V, named_expression Targets>
auto cross_entropy(V&& logits, Targets&& targets, reduction how = reduction::mean) {
  using X = std::remove_cvref_t<V>;
  using T = typename X::value_type;
  using L = typename X::dims;
  using R = without_t<L, dim_list<Class>>;
  using I = value_type_of_t<Targets>;
  if constexpr (!detail::cross_entropy_dims_fit_v<Class, L, dims_of_t<Targets>, I>) {
    detail::report_cross_entropy_dims<Class, L, dims_of_t<Targets>, I>();
    return invalid_expression{};
  } else if constexpr (is_bf16_v<T>) {  // in float32 (log-probabilities and loss), the loss rounded once
    return grad::detail::in_float32(
        [&targets, how](auto x) { return dimsum::cross_entropy<Class>(std::move(x), std::forward<Targets>(targets), how); },
        std::forward<V>(logits));
  } else {
    using RC = typename detail::cross_entropy_parts<Class, T, R, I>::rows_of_classes;
    const std::size_t classes = logits.value().template extent<Class>();
    auto p = detail::cross_entropy_forward<Class, T, R, I>(logits.value(), std::forward<Targets>(targets), how);
    tensor<T> loss;
    loss.data()[0] = p.loss;
    auto x = grad::detail::lift(std::forward<V>(logits));
    return grad::detail::record(grad::detail::tape_of(x), std::move(loss), x.requires_grad(),
                                [x, ls = std::move(p.log_probs), ids = std::move(p.ids), scale = p.scale,
                                 classes](const tensor<T>& g, const tensor<T>&) {
      // (softmax - one_hot(target)) * g * scale, in (R..., Class) order.
      auto d = grad::detail::uninitialized_tensor<tensor_for_t<T, RC>>(ls.extents());
      kernels::math_contiguous<kernels::math_fn::exp>(ls.data(), d.data(), d.size());
      for (std::size_t n = 0; n < ids.size(); ++n) d.data()[n * classes + static_cast<std::size_t>(ids.data()[n])] -= T(1);
      const T f = g.item() * scale;
      for (auto& e : d.storage()) e *= f;
      x.node()->accumulate(std::move(d));
    });
  }
}

}  // namespace dimsum
