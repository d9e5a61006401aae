#pragma once
/// \file
/// `parameter<T, Dims...>`: a trainable tensor and its gradient, both of
/// type `tensor<T, Dims...>` (DESIGN.md §10: a gradient has exactly its
/// parameter's dims). Modules declare their parameters as members of this
/// type; optimizers, state dicts and the tape find them by reflection
/// (Boost.Hana struct adaptation) and read `value` and `grad`.

#include <array>
#include <cstddef>
#include <type_traits>
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

  /// `p(tape)` is `tape.watch(p)`: a model's forward uses its parameters
  /// where it reads them, `einsum<"b i, i o -> b o">(x, W(t))`, as nn
  /// modules watch their own (a frozen one gives a constant var).
  template <class Tape>
    requires requires(Tape& t, parameter& p) { t.watch(p); }
  auto operator()(Tape& t) {
    return t.watch(*this);
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

/// Compile-time error: the gradient of a parameter whose type says it is
/// frozen (`frozen_parameter<T, Dims...>`, `nn::frozen<parameter<...>>`) was
/// asked for, through `p.grad` (Dims are its dims).
template <class Dims>
struct a_frozen_parameter_has_no_grad {
  static_assert(detail::always_false<Dims>,
                "dimsum: p.grad of a frozen_parameter: a parameter frozen by its type gets no gradient and has no "
                "grad to read or change; declare it parameter<T, Dims...> to train it (or freeze a parameter at run "
                "time with p.requires_grad = false)");
};
/// Compile-time error: `gradient(p)` of a `frozen_parameter`.
template <class Dims>
struct gradient_of_a_frozen_parameter {
  static_assert(detail::always_false<Dims>,
                "dimsum: gradient(p) of a frozen_parameter: a parameter frozen by its type gets no gradient; declare "
                "it parameter<T, Dims...> to train it (or freeze a parameter at run time with p.requires_grad = false)");
};
/// Compile-time error: `p.requires_grad = true` on a `frozen_parameter`.
template <class Dims>
struct a_frozen_parameter_cannot_be_unfrozen {
  static_assert(detail::always_false<Dims>,
                "dimsum: p.requires_grad = ... on a frozen_parameter: its type says it is frozen; declare it "
                "parameter<T, Dims...> to switch it at run time");
};

/// The type of `frozen_parameter::grad`: there is no gradient, and any use
/// (`p.grad.data()`, `p.grad(i, j)`, `tensor<...> g = p.grad`, printing it,
/// `p.grad.fill(0)`) is the compile error `a_frozen_parameter_has_no_grad`
/// naming the parameter's dims. It holds nothing.
template <class T, dimension... Ds>
struct frozen_parameter_grad {
  using error = a_frozen_parameter_has_no_grad<diagnostic_dims_t<dim_list<Ds...>>>;
  constexpr T* data() const {
    detail::report<error>();
    return nullptr;
  }
  constexpr std::size_t size() const {
    detail::report<error>();
    return 0;
  }
  constexpr std::array<std::size_t, sizeof...(Ds)> extents() const {
    detail::report<error>();
    return {};
  }
  template <class... I>
  constexpr T operator()(const I&...) const {
    detail::report<error>();
    return T();
  }
  template <class U>
  constexpr void fill(const U&) const {
    detail::report<error>();
  }
  template <class U, dimension... Es>
  operator tensor<U, Es...>() const {
    detail::report<error>();
    return {};
  }
  template <class Stream>
  friend constexpr Stream& operator<<(Stream& s, const frozen_parameter_grad&) {
    detail::report<error>();
    return s;
  }
};

/// The constant `frozen_parameter::requires_grad`: reads as false
/// (`if (p.requires_grad)` compiles); assigning it is the compile error
/// `a_frozen_parameter_cannot_be_unfrozen`.
template <dimension... Ds>
struct frozen_requires_grad {
  constexpr operator bool() const { return false; }
  template <class B>
  constexpr frozen_requires_grad& operator=(const B&) {
    detail::report<a_frozen_parameter_cannot_be_unfrozen<diagnostic_dims_t<dim_list<Ds...>>>>();
    return *this;
  }
};

/// A parameter frozen by its type (PyTorch's `requires_grad_(False)` on an
/// embedding or a backbone being fine-tuned around, said once in the
/// declaration): `value` is a `tensor<T, Ds...>` as a parameter's, and it
/// is found by reflection as a parameter (state dicts and `.safetensors`
/// save and load it under its name, `summary` and `parameter_count` list
/// it), but `tape.watch(p)` (and `p(tape)`) reads it as a constant, the
/// optimizers and `clip_grad_norm` skip it, and there is no gradient:
/// `gradient(p)`, `p.grad` and `p.requires_grad = true` are compile errors
/// naming its dims. `nn::frozen<parameter<T, Ds...>>` is this type.
template <class T, dimension... Ds>
struct frozen_parameter {
  using value_type = T;
  using dims = dim_list<Ds...>;
  using tensor_type = tensor<T, Ds...>;

  tensor_type value;
  /// No gradient: any use is a compile error (`frozen_parameter_grad`).
  [[no_unique_address]] frozen_parameter_grad<T, Ds...> grad;
  /// False, always (assigning it is a compile error).
  [[no_unique_address]] frozen_requires_grad<Ds...> requires_grad;

  frozen_parameter() = default;
  /// Takes `v` as the value.
  explicit frozen_parameter(tensor_type v) : value(std::move(v)) {}
  /// Zeros of the given dynamic extents (by name, as for `tensor`).
  template <dimension... Args>
    requires(sizeof...(Args) > 0)
  explicit frozen_parameter(const Args&... extents) : value(extents...) {}
  /// A trainable parameter's value, frozen (the gradient is dropped).
  explicit frozen_parameter(const parameter<T, Ds...>& p) : value(p.value) {}
  /// `p = t` sets the value (a state-dict load, a weight copied in).
  frozen_parameter& operator=(tensor_type v) {
    value = std::move(v);
    return *this;
  }
  /// Nothing to zero (so `nn::zero_grad(m)` visits it as any parameter).
  void zero_grad() {}

  /// `p(tape)` is `tape.watch(p)`: a constant var reading `value` in place.
  template <class Tape>
    requires requires(Tape& t, frozen_parameter& p) { t.watch(p); }
  auto operator()(Tape& t) {
    return t.watch(*this);
  }
};

/// Whether `P` is a `frozen_parameter<...>` (after removing cv-ref).
template <class P>
inline constexpr bool is_frozen_parameter_v = false;
template <class T, dimension... Ds>
inline constexpr bool is_frozen_parameter_v<frozen_parameter<T, Ds...>> = true;
template <class P>
  requires(!std::is_same_v<P, std::remove_cvref_t<P>>)
inline constexpr bool is_frozen_parameter_v<P> = is_frozen_parameter_v<std::remove_cvref_t<P>>;

/// Whether `P` is a `parameter<...>` or a `frozen_parameter<...>` (after
/// removing cv-ref): what reflection (`nn::for_each_parameter`) visits.
template <class P>
inline constexpr bool is_parameter_v = false;
template <class T, dimension... Ds>
inline constexpr bool is_parameter_v<parameter<T, Ds...>> = true;
template <class T, dimension... Ds>
inline constexpr bool is_parameter_v<frozen_parameter<T, Ds...>> = true;
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
