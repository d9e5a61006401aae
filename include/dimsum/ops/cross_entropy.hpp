#pragma once
/// \file
/// `cross_entropy<Class>(logits, targets, reduction)` on tensors and
/// expressions: -log_softmax<Class>(logits) at each integer target, reduced
/// by mean (torch's default) or sum to a rank-0 tensor (torch's
/// `F.cross_entropy` with class indices). The targets have the logits' dims
/// without the class dim, in any order. The var form, with its gradient, is
/// in grad/rules/log_softmax.hpp.
///
///     tensor<float> loss = dimsum::cross_entropy<vocab>(logits, next_ids);   // logits (batch, posn, vocab)

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include <dimsum/core/errors.hpp>
#include <dimsum/ops/log_softmax.hpp>

namespace dimsum {

/// Compile-time error: cross_entropy<Class> of logits without the dim Class.
template <class Class, class Logits>
struct cross_entropy_class_dim_is_not_a_dim_of_the_logits {
  static_assert(detail::always_false<Class, Logits>,
                "dimsum: cross_entropy<Class> over a class dim that the logits do not have");
};
/// Compile-time error: the targets' dims are not the logits' dims without
/// the class dim.
template <class Targets, class Expected>
struct cross_entropy_targets_need_the_logits_dims_without_the_class_dim {
  static_assert(detail::always_false<Targets, Expected>,
                "dimsum: cross_entropy targets must have exactly the logits' dims without the class dim");
};
/// Compile-time error: the targets' value type is not an integer type
/// (class indices, as torch's Long targets; probabilities are not taken).
template <class ValueType, class Targets>
struct cross_entropy_targets_need_integer_class_indices {
  static_assert(detail::always_false<ValueType, Targets>,
                "dimsum: cross_entropy targets are integer class indices (torch's int64 targets), not floats; "
                "convert with dimsum::cast<std::int64_t>(targets)");
};

/// How cross_entropy reduces the per-element losses: their mean (torch's
/// default) or their sum.
enum class reduction { mean, sum };

namespace detail {
/// What the forward of cross_entropy computes, kept for the gradient: the
/// log-probabilities as rows of classes (dims R..., Class), the ids in R's
/// order, the reduced loss and the factor of the reduction (1 / rows or 1).
template <dimension Class, class T, class R, class I>
struct cross_entropy_parts {
  using rows_of_classes = typename concat<R, dim_list<Class>>::type;
  tensor_for_t<T, rows_of_classes> log_probs;
  tensor_for_t<I, R> ids;
  T loss;
  T scale;
};

template <dimension Class, class T, class R, class I, class Logits, class Targets>
cross_entropy_parts<Class, T, R, I> cross_entropy_forward(Logits&& logits, Targets&& targets, reduction how) {
  using RC = typename cross_entropy_parts<Class, T, R, I>::rows_of_classes;
  cross_entropy_parts<Class, T, R, I> p{
      log_softmax_values<Class, T, RC>(tensor_for_t<T, RC>(std::forward<Logits>(logits))),
      tensor_for_t<I, R>(std::forward<Targets>(targets)), T(0), T(1)};
  for (std::size_t k = 0; k < R::size; ++k)
    if (p.log_probs.extents()[k] != p.ids.extents()[k])
      throw shape_error("cross_entropy: dim '" + std::string(R::names[k]) + "' has extent " +
                        std::to_string(p.log_probs.extents()[k]) + " in the logits but " +
                        std::to_string(p.ids.extents()[k]) + " in the targets");
  const std::size_t classes = p.log_probs.template extent<Class>(), rows = p.ids.size();
  for (std::size_t n = 0; n < rows; ++n) {
    const I id = p.ids.data()[n];
    if (id < 0 || static_cast<std::uint64_t>(id) >= classes)
      throw shape_error("cross_entropy: target " + std::to_string(id) + " (element " + std::to_string(n) +
                        " of the targets) is out of range for dim '" + std::string(Class::name.view()) +
                        "' of extent " + std::to_string(classes));
  }
  // Summed in double: a float sum of a million losses drifts by about 0.5%.
  double total = 0;
  for (std::size_t n = 0; n < rows; ++n)
    total -= double(p.log_probs.data()[n * classes + static_cast<std::size_t>(p.ids.data()[n])]);
  if (how == reduction::mean) p.scale = rows == 0 ? std::numeric_limits<T>::quiet_NaN() : T(1) / T(rows);
  p.loss = T(how == reduction::mean ? total / double(rows) : total);
  return p;
}

/// Whether the logits' dims L, the class dim and the targets (dims LT,
/// values I) fit: a pure condition, so that `if constexpr` can test it; the
/// failing branch reports with report_cross_entropy_dims.
template <dimension Class, class L, class LT, class I>
inline constexpr bool cross_entropy_dims_fit_v =
    contains_v<L, Class> && same_name_set_v<LT, without_t<L, dim_list<Class>>> && std::is_integral_v<I>;

/// Reports the first of cross_entropy's dim checks that fails (shared by
/// the tensor and var forms).
template <dimension Class, class L, class LT, class I>
constexpr void report_cross_entropy_dims() {
  if constexpr (!contains_v<L, Class>)
    report<cross_entropy_class_dim_is_not_a_dim_of_the_logits<diagnostic_name_t<Class>, diagnostic_dims_t<L>>>();
  else if constexpr (!same_name_set_v<LT, without_t<L, dim_list<Class>>>)
    report<cross_entropy_targets_need_the_logits_dims_without_the_class_dim<
        diagnostic_dims_t<LT>, diagnostic_dims_t<without_t<L, dim_list<Class>>>>>();
  else
    report<cross_entropy_targets_need_integer_class_indices<I, diagnostic_dims_t<LT>>>();
}
}  // namespace detail

/// The cross-entropy of `logits` (with the class dim Class) against integer
/// class ids `targets` (the logits' other dims, any order), reduced by mean
/// or sum: a rank-0 tensor. An id outside [0, extent of Class), or a
/// target dim whose extent differs from the logits', throws shape_error;
/// mean over zero targets is NaN, as in torch.
template <dimension Class, named_expression X, named_expression Targets>
auto cross_entropy(X&& logits, Targets&& targets, reduction how = reduction::mean) {
  using T = value_type_of_t<X>;
  using L = dims_of_t<X>;
  using I = value_type_of_t<Targets>;
  if constexpr (is_invalid_v<X> || is_invalid_v<Targets>) {
    return invalid_expression{};  // an error already reported
  } else if constexpr (!detail::cross_entropy_dims_fit_v<Class, L, dims_of_t<Targets>, I>) {
    detail::report_cross_entropy_dims<Class, L, dims_of_t<Targets>, I>();
    return invalid_expression{};
  } else {
    static_assert(std::is_floating_point_v<T>, "dimsum: cross_entropy needs floating-point logits");
    const auto p = detail::cross_entropy_forward<Class, T, without_t<L, dim_list<Class>>, I>(
        std::forward<X>(logits), std::forward<Targets>(targets), how);
    tensor<T> loss;
    loss.data()[0] = p.loss;
    return loss;
  }
}

}  // namespace dimsum
