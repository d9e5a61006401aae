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
#include <dimsum/ops/reduce.hpp>

namespace dimsum {

template <class Class, class Logits>
struct cross_entropy_class_dim_is_not_a_dim_of_the_logits {
  static_assert(detail::always_false<Class, Logits>,
                "dimsum: cross_entropy<Class> over a class dim that the logits do not have");
};
template <class Targets, class Expected>
struct cross_entropy_targets_need_the_logits_dims_without_the_class_dim {
  static_assert(detail::always_false<Targets, Expected>,
                "dimsum: cross_entropy targets must have exactly the logits' dims without the class dim");
};
template <class Log_softmax_dim, class Dims>
struct log_softmax_dim_is_not_a_dim_of_the_tensor {
  static_assert(detail::always_false<Log_softmax_dim, Dims>,
                "dimsum: log_softmax over a dim that the tensor does not have");
};

/// How cross_entropy reduces the per-element losses: their mean (torch's
/// default) or their sum.
enum class reduction { mean, sum };

namespace grad::detail {
/// log_softmax of t along D, computed stably: x - max - log(sum(exp(x - max))).
template <dimension D, class T, class L>
tensor_for_t<T, L> log_softmax_values(const tensor_for_t<T, L>& x) {
  using R = without_t<L, dim_list<D>>;
  const tensor_for_t<T, R> m0 = dimsum::max<D>(x);
  // A row of -inf keeps max -inf; subtract 0 there so the row stays -inf.
  const tensor_for_t<T, R> m = map(m0, [](T v) { return std::isinf(v) ? T(0) : v; });
  const tensor_for_t<T, L> shifted = x - m;
  const tensor_for_t<T, R> s = dimsum::sum<D>(map(shifted, [](T v) { return std::exp(v); }));
  const tensor_for_t<T, R> lse = map(s, [](T v) { return std::log(v); });
  return shifted - lse;
}
}  // namespace grad::detail

/// log_softmax of a var along D; the gradient is g - softmax * sum<D>(g).
template <dimension D, grad::detail::var_like V>
auto log_softmax(V&& v) {
  using X = std::remove_cvref_t<V>;
  using T = typename X::value_type;
  using L = typename X::dims;
  if constexpr (!contains_v<L, D>) {
    detail::report<log_softmax_dim_is_not_a_dim_of_the_tensor<diagnostic_name_t<D>, diagnostic_dims_t<L>>>();
    return invalid_expression{};
  } else {
    return grad::detail::record_op(grad::detail::log_softmax_values<D, T, L>(v.value()), [v](const auto& g, const auto& out) {
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
  using LT = dims_of_t<Targets>;
  using I = value_type_of_t<Targets>;
  if constexpr (!contains_v<L, Class>) {
    detail::report<cross_entropy_class_dim_is_not_a_dim_of_the_logits<diagnostic_name_t<Class>, diagnostic_dims_t<L>>>();
    return invalid_expression{};
  } else if constexpr (!same_name_set_v<LT, R> || !std::is_integral_v<I>) {
    detail::report<cross_entropy_targets_need_the_logits_dims_without_the_class_dim<diagnostic_dims_t<LT>,
                                                                                   diagnostic_dims_t<R>>>();
    return invalid_expression{};
  } else {
    // Rows of classes: the logits as (R..., Class), the ids in R's order.
    using RC = typename dimsum::detail::concat<R, dim_list<Class>>::type;
    const tensor_for_t<T, RC> ls = grad::detail::log_softmax_values<Class, T, RC>(tensor_for_t<T, RC>(logits.value()));
    const tensor_for_t<I, R> ids = std::forward<Targets>(targets);
    const std::size_t classes = ls.template extent<Class>(), rows = ids.size();
    for (std::size_t n = 0; n < rows; ++n) {
      const I id = ids.data()[n];
      if (id < 0 || static_cast<std::uint64_t>(id) >= classes)
        throw shape_error("cross_entropy: target " + std::to_string(id) + " (element " + std::to_string(n) +
                          " of the targets) is out of range for dim '" + std::string(Class::name.view()) +
                          "' of extent " + std::to_string(classes));
    }
    T total = 0;
    for (std::size_t n = 0; n < rows; ++n) total -= ls.data()[n * classes + static_cast<std::size_t>(ids.data()[n])];
    const T scale = how == reduction::mean ? (rows == 0 ? std::numeric_limits<T>::quiet_NaN() : T(1) / T(rows)) : T(1);
    tensor<T> loss;
    loss.data()[0] = total * scale;
    auto x = grad::detail::lift(std::forward<V>(logits));
    return grad::detail::record(grad::detail::tape_of(x), std::move(loss), x.requires_grad(),
                                [x, ls, ids, scale, classes](const tensor<T>& g, const tensor<T>&) {
      // (softmax - one_hot(target)) * g * scale, in (R..., Class) order.
      tensor_for_t<T, RC> d = grad::detail::map(ls, [](T y) { return std::exp(y); });
      for (std::size_t n = 0; n < ids.size(); ++n) d.data()[n * classes + static_cast<std::size_t>(ids.data()[n])] -= T(1);
      const T f = g.item() * scale;
      for (auto& e : d.storage()) e *= f;
      x.node()->accumulate(d);
    });
  }
}

}  // namespace dimsum
