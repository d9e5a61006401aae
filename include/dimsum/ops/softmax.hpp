#pragma once
/// \file
/// `softmax<D>(t)`: numerically stable softmax along the named dim D. The
/// result has t's dims. A slice whose values are all -inf gives NaN, as in
/// PyTorch; softmax over a dim t lacks is a compile error.

#include <array>
#include <cstddef>

#include <dimsum/kernels/reference.hpp>
#include <dimsum/kernels/softmax.hpp>
#include <dimsum/ops/elementwise.hpp>
#include <dimsum/plan/fusion_traits.hpp>
#include <dimsum/tensor/tensor.hpp>

namespace dimsum {

namespace detail {
/// Element-wise nodes (element-wise operations, the causal mask) whose rows
/// softmax can finish as they are written, told apart by their traits.
template <class Traits>
inline constexpr bool rowwise_traits = false;
template <plan::pointwise Op, class... A>
inline constexpr bool rowwise_traits<plan::elementwise_node<Op, A...>> = true;
template <class Q, class K, class X>
inline constexpr bool rowwise_traits<plan::causal_mask_node<Q, K, X>> = true;
template <class E>
inline constexpr bool rowwise_node = rowwise_traits<plan::fusion_traits_t<E>>;
}  // namespace detail

/// A lazy softmax of E along dim D.
template <dimension D, class E>
class softmax_expr : public expression_tag {
 public:
  using value_type = value_type_of_t<E>;
  using dims = dims_of_t<E>;
  using dim_type = D;
  static constexpr std::size_t rank = dims::size;
  using fusion_traits = plan::softmax_node<D, E>;
  static constexpr std::size_t axis = index_of<dims>(D::name.view());

  template <class X>
  explicit softmax_expr(X&& e) : e_(std::forward<X>(e)) {}

  auto extents() const { return e_.extents(); }
  const auto& operand() const { return e_; }

  template <class Root>
  auto evaluator() const {
    return detail::materializing_evaluator<Root>(*this);
  }
  /// Along a contiguous innermost dim the rows are vectorised, and an
  /// element-wise operand (the scaling and masks) is evaluated row by row
  /// with each row's softmax done while it is in cache: the scores are
  /// traversed once. Otherwise: evaluate, then softmax along the axis.
  void eval_to(const strided<value_type, rank>& dst) const {
    if constexpr (axis + 1 == rank) {
      if (dst.strides[axis] == 1) {
        const std::size_t n = dst.extents[axis];
        auto row = [n](value_type* p) { kernels::softmax_contiguous(p, n); };
        if constexpr (detail::rowwise_node<std::remove_cvref_t<E>>) {
          auto ev = e_.template evaluator<dims>();
          detail::run_elementwise(dst, ev, row);
        } else {
          e_.eval_to(dst);
          detail::for_each_row(dst, [&](const std::size_t*, value_type* p) { row(p); });
        }
        return;
      }
    }
    e_.eval_to(dst);
    kernels::softmax_axis(dst.data, dst.extents, dst.strides, axis);
  }

 private:
  detail::closure_t<E> e_;
};

namespace detail {
template <dimension D, class E>
auto softmax_impl(E&& e) {
  if constexpr (is_invalid_v<E>) {
    return invalid_expression{};
  } else if constexpr (!contains_v<dims_of_t<E>, D>) {
    detail::report<softmax_dim_is_not_a_dim_of_the_tensor<diagnostic_name_t<D>, diagnostic_dims_t<dims_of_t<E>>>>();
    return invalid_expression{};
  } else {
    return softmax_expr<D, E>(std::forward<E>(e));
  }
}
}  // namespace detail

/// Softmax along dim D: `softmax<k_posn>(scores)`. An lvalue operand is
/// held by reference (DIMSUM_LIFETIMEBOUND: clang warns when the lazy result
/// outlives it), an rvalue is moved in.
template <dimension D, named_expression E>
auto softmax(E& e DIMSUM_LIFETIMEBOUND) {
  return detail::softmax_impl<D>(e);
}
template <dimension D, named_expression E>
  requires(!std::is_lvalue_reference_v<E>)
auto softmax(E&& e) {
  return detail::softmax_impl<D>(std::forward<E>(e));
}

}  // namespace dimsum
