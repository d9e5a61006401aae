#pragma once
/// \file
/// `parameter<T, Dims...>`: a trainable tensor and its gradient, both of
/// type `tensor<T, Dims...>` (DESIGN.md §10: a gradient has exactly its
/// parameter's dims). Modules declare their parameters as members of this
/// type; optimizers, state dicts and the tape find them by reflection
/// (Boost.Hana struct adaptation) and read `value` and `grad`.

#include <utility>

#include <dimsum/tensor/tensor.hpp>

namespace dimsum {

/// A trainable tensor `value` and the gradient `grad` that a backward pass
/// accumulates into it; both have the dims `Ds...`, so
/// `static_assert(std::is_same_v<decltype(p.grad), decltype(p.value)>)`.
template <class T, dimension... Ds>
struct parameter {
  using value_type = T;
  using dims = dim_list<Ds...>;
  using tensor_type = tensor<T, Ds...>;

  tensor_type value;
  tensor_type grad;
  /// False for a frozen parameter (PyTorch's `requires_grad_(False)`): the
  /// tape reads it as a constant (`tape.watch(p)` gives a var without
  /// gradient), backward leaves `grad` alone, optimizers skip it, and
  /// `gradient(p)` throws `grad::tape_error`. Checkpoints save and load it
  /// as any parameter. `nn::set_requires_grad(m, false)` freezes a module.
  bool requires_grad = true;

  parameter() = default;
  /// Takes `v` as the value; the gradient starts as zeros of its extents.
  explicit parameter(tensor_type v) : value(std::move(v)), grad(tensor_type::from_extents(value.extents())) {}
  /// Zeros of the given dynamic extents (by name, as for `tensor`).
  template <dimension... Args>
    requires(sizeof...(Args) > 0)
  explicit parameter(const Args&... extents) : value(extents...), grad(extents...) {}
  /// `p = t` is `p = parameter(t)`: `t` becomes the value and the gradient
  /// zeros of its extents (a module's weights set from a loaded tensor:
  /// `head.key.weight = load_npy<...>(path)`).
  parameter& operator=(tensor_type v) {
    value = std::move(v);
    grad = tensor_type::from_extents(value.extents());
    return *this;
  }

  /// Sets the gradient to zeros of the value's extents (PyTorch's
  /// `zero_grad(set_to_none=False)`).
  void zero_grad() {
    if (grad.extents() != value.extents())
      grad = tensor_type::from_extents(value.extents());
    else
      grad.fill(T(0));
  }
};

/// Whether `P` is a `parameter<...>` (after removing cv-ref).
template <class P>
inline constexpr bool is_parameter_v = false;
template <class T, dimension... Ds>
inline constexpr bool is_parameter_v<parameter<T, Ds...>> = true;
template <class P>
  requires(!std::is_same_v<P, std::remove_cvref_t<P>>)
inline constexpr bool is_parameter_v<P> = is_parameter_v<std::remove_cvref_t<P>>;

/// A parameter used as an operand of + - * / (`x + lin.bias`): one
/// `dimsum:` error saying to read `p.value` or watch `p`, instead of the
/// compiler's "no match for operator+" (module weights were plain tensors
/// before parameters held a value and a gradient).
template <class Left, class Right>
struct elementwise_operand_is_a_parameter {
  static_assert(detail::always_false<Left, Right>,
                "dimsum: an element-wise operand is a parameter, not a tensor; read its value with p.value, or watch "
                "it on a tape (tape.watch(p)) to differentiate through it");
};

namespace detail {
template <class A, class B>
concept parameter_operands = is_parameter_v<A> || is_parameter_v<B>;
template <class A, class B>
constexpr invalid_expression report_parameter_operand() {
  report<elementwise_operand_is_a_parameter<std::remove_cvref_t<A>, std::remove_cvref_t<B>>>();
  return {};
}
}  // namespace detail

template <class A, class B>
  requires detail::parameter_operands<A, B>
constexpr invalid_expression operator+(const A&, const B&) {
  return detail::report_parameter_operand<A, B>();
}
template <class A, class B>
  requires detail::parameter_operands<A, B>
constexpr invalid_expression operator-(const A&, const B&) {
  return detail::report_parameter_operand<A, B>();
}
template <class A, class B>
  requires detail::parameter_operands<A, B>
constexpr invalid_expression operator*(const A&, const B&) {
  return detail::report_parameter_operand<A, B>();
}
template <class A, class B>
  requires detail::parameter_operands<A, B>
constexpr invalid_expression operator/(const A&, const B&) {
  return detail::report_parameter_operand<A, B>();
}

}  // namespace dimsum
