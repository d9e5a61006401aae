#pragma once
/// \file
/// `reduce<"pattern", "op">(x, dims...)`: einops' reduce. The pattern is a
/// rearrange pattern whose output may leave out dims of the input: those
/// are reduced by the operation, one of sum, mean, max, min, prod, any, all
/// and logsumexp (the named reductions of ops/reduce.hpp), or a user's
/// associative operation given as `fold{f, identity}`:
///
///     reduce<"b (h h2) (w w2) c -> b h w c", "max">(x, h2{2}, w2{2})   // 2x2 max pooling
///     x - reduce<"b c h w -> b c 1 1", "mean">(x)                      // keepdim: x's dims
///     reduce<"b ... d -> b d", "sum">(x)                               // `...` on the left only: reduced
///     reduce<"b n d -> b d">(x, fold{[](float a, float b) { return a * b; }, 1.0f})
///
/// Groups split and merge as in rearrange; `1`/`()` are size-1 axes in the
/// input, and in the output they add no dim (PyTorch's keepdim: the result
/// broadcasts against the input by name, docs/design.md); and
/// `...` stands for the other dims by name; on the left alone it stands for
/// dims that are reduced. An output dim that the input lacks is an error
/// (`einsum_output_label_is_not_in_any_operand`), as is an unknown operation
/// (`reduce_operation_is_not_a_reduction`) or a reduce without one
/// (`reduce_needs_an_operation`). Lazy: the reduction runs on assignment,
/// and writes straight into the destination in the output's order.

#include <cstddef>
#include <string_view>
#include <type_traits>
#include <utility>

#include <dimsum/ops/einsum.hpp>
#include <dimsum/ops/reduce.hpp>
#include <dimsum/ops/regroup.hpp>

namespace dimsum {

/// Checker: reduce's operation is not one of the named reductions.
template <class Name>
struct reduce_operation_is_not_a_reduction {
  static_assert(detail::always_false<Name>,
                "dimsum: reduce's operation is not one of sum, mean, max, min, prod, any, all, logsumexp; for your "
                "own, pass fold{f, identity} after the tensor: reduce<\"b n d -> b d\">(x, fold{f, 0.0f})");
};
/// Checker: reduce<"pattern">(x) without an operation.
template <class Dims>
struct reduce_needs_an_operation {
  static_assert(detail::always_false<Dims>,
                "dimsum: reduce needs an operation: reduce<\"pattern\", \"sum\">(x), or fold{f, identity} after the "
                "tensor; a pattern that only moves dims is a rearrange");
};

namespace detail {

/// The reduction node of the named operation Name, or void.
template <fixed_string Name>
auto reduction_node_named() {
  constexpr std::string_view n = Name.view();
  using kernels::reduce_op;
  if constexpr (n == "sum")
    return std::type_identity<kernel_reduction<reduce_op::sum>>{};
  else if constexpr (n == "mean")
    return std::type_identity<kernel_reduction<reduce_op::mean>>{};
  else if constexpr (n == "max")
    return std::type_identity<kernel_reduction<reduce_op::max>>{};
  else if constexpr (n == "min")
    return std::type_identity<kernel_reduction<reduce_op::min>>{};
  else if constexpr (n == "prod")
    return std::type_identity<functor_reduction<reductions::prod>>{};
  else if constexpr (n == "any")
    return std::type_identity<functor_reduction<reductions::any>>{};
  else if constexpr (n == "all")
    return std::type_identity<functor_reduction<reductions::all>>{};
  else if constexpr (n == "logsumexp")
    return std::type_identity<functor_reduction<reductions::logsumexp>>{};
  else
    return std::type_identity<void>{};
}
template <fixed_string Name>
using reduction_node_named_t = typename decltype(reduction_node_named<Name>())::type;

struct no_reduction_object {};

/// reduce: the flat dims the output lacks are reduced by Node (with the
/// reduction object `op` for a fold), then the rest put in the output's
/// order.
template <class Node, class Op = no_reduction_object>
struct reduce_mode {
  static constexpr bool single_operand = true;
  static constexpr bool keeps_every_dim = false;
  static constexpr bool adds_dims = false;
  static constexpr bool ellipsis_on_the_left_only = true;
  // An output `1` or `()` adds no dim: the result broadcasts by name
  // against the input, as PyTorch's keepdim result does by position.
  static constexpr bool adds_size_1_axes = false;
  Op op{};

  template <class FlatOut, class Extras, class Flat>
  auto apply(const Extras&, Flat&& flat) const {
    using Dropped = difference_t<FlatOut, dims_of_t<Flat>>;
    return [&]<class... Ds>(dim_list<Ds...>*) {
      if constexpr (std::is_same_v<Op, no_reduction_object>)
        return reorder<FlatOut>(make_reduction_node<Node, Flat, Ds...>(std::forward<Flat>(flat)));
      else
        return reorder<FlatOut>(make_reduction_node<Node, Flat, Ds...>(std::forward<Flat>(flat), op));
    }(static_cast<Dropped*>(nullptr));
  }
};

template <class X>
inline constexpr bool is_fold_v = false;
template <class F, class T>
inline constexpr bool is_fold_v<fold<F, T>> = true;

}  // namespace detail

/// einops' reduce with a named operation: `reduce<"b (h h2) (w w2) c -> b h
/// w c", "max">(x, h2{2}, w2{2})` (see the file comment). The dims after the
/// tensor give group extents, as in rearrange. A list of tensors may stand
/// for the tensor (`std::vector` or `std::array`, stacked along the first
/// label, as in rearrange).
template <fixed_string S, fixed_string Op, class... Args>
  requires(sizeof...(Args) > 0)
auto reduce(Args&&... args) {
  using Node = detail::reduction_node_named_t<Op>;
  if constexpr (std::is_void_v<Node>) {
    detail::report<reduce_operation_is_not_a_reduction<label<Op>>>();
    return invalid_expression{};
  } else {
    return detail::pattern_args<S>(detail::reduce_mode<Node>{}, std::forward<Args>(args)...);
  }
}

/// einops' reduce with a user's associative operation:
/// `reduce<"b n d -> b d">(x, fold{f, identity}, dims...)`.
template <fixed_string S, class X, class R, class... Dims>
auto reduce(X&& x, R&& r, Dims&&... dims) {
  if constexpr (!detail::is_fold_v<std::remove_cvref_t<R>>) {
    if constexpr (named_expression<X>)
      detail::report<reduce_needs_an_operation<diagnostic_dims_t<dims_of_t<X>>>>();
    else
      detail::report<reduce_needs_an_operation<std::remove_cvref_t<X>>>();
    return invalid_expression{};
  } else {
    using F = std::remove_cvref_t<R>;
    return detail::pattern_args<S>(detail::reduce_mode<detail::functor_reduction<F>, F>{std::forward<R>(r)},
                                   std::forward<X>(x), std::forward<Dims>(dims)...);
  }
}

/// reduce<"pattern">(x) without an operation: a compile error
/// (`reduce_needs_an_operation`).
template <fixed_string S, class X>
auto reduce([[maybe_unused]] X&& x) {
  if constexpr (named_expression<X>)
    detail::report<reduce_needs_an_operation<diagnostic_dims_t<dims_of_t<X>>>>();
  else
    detail::report<reduce_needs_an_operation<std::remove_cvref_t<X>>>();
  return invalid_expression{};
}

}  // namespace dimsum
