#pragma once
/// \file
/// `softmax<D>(t)`: numerically stable softmax along the named dim D. The
/// result has t's dims. A slice whose values are all -inf gives NaN, as in
/// PyTorch; softmax over a dim t lacks is a compile error.

#include <array>
#include <cstddef>

#include <dimsum/kernels/reference.hpp>
#include <dimsum/tensor/tensor.hpp>

namespace dimsum {

/// A lazy softmax of E along dim D.
template <dimension D, class E>
class softmax_expr : public expression_tag {
 public:
  using value_type = value_type_of_t<E>;
  using dims = dims_of_t<E>;
  using dim_type = D;
  static constexpr std::size_t rank = dims::size;
  static constexpr std::size_t axis = index_of<dims>(D::name.view());

  template <class X>
  explicit softmax_expr(X&& e) : e_(std::forward<X>(e)) {}

  auto extents() const { return e_.extents(); }
  const auto& operand() const { return e_; }

  template <class Root>
  auto evaluator() const {
    return detail::materializing_evaluator<Root>(*this);
  }
  void eval_to(const strided<value_type, rank>& dst) const {
    e_.eval_to(dst);
    kernels::softmax_axis(dst.data, dst.extents, dst.strides, axis);
  }

 private:
  detail::closure_t<E> e_;
};

/// Softmax along dim D: `softmax<k_posn>(scores)`.
template <dimension D, named_expression E>
auto softmax(E&& e) {
  if constexpr (is_invalid_v<E>) {
    return invalid_expression{};
  } else if constexpr (!contains_v<dims_of_t<E>, D>) {
    detail::report<softmax_dim_is_not_a_dim_of_the_tensor<diagnostic_name_t<D>, diagnostic_dims_t<dims_of_t<E>>>>();
    return invalid_expression{};
  } else {
    return softmax_expr<D, E>(std::forward<E>(e));
  }
}

}  // namespace dimsum
