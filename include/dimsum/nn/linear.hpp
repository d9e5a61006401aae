#pragma once
/// \file
/// `nn::linear<T, In, Out>`: PyTorch's nn.Linear with named dims. Its
/// parameters are members found by reflection (`BOOST_HANA_DEFINE_STRUCT`):
/// `weight`, a `parameter<T, Out, In>` in PyTorch's layout (Out, In), so
/// `.npy` files and state dicts saved from a module load as they are, and
/// `bias`, a `std::optional<parameter<T, Out>>` that is empty for a layer
/// built without bias (PyTorch's `bias=None`: no "bias" key in its state
/// dict). Applied to x, it contracts x's dim In and puts Out in its place:
/// (batch, posn, In) -> (batch, posn, Out). Applied to a `grad::var`, it
/// records the same on the var's tape with its parameters watched, so a
/// backward pass accumulates `weight.grad` and `bias->grad`:
///
///     auto y = lin(x);      // x: a var of tape t; y: a var (batch, posn, Out)
///     auto z = lin(t, x);   // the same for a tensor x (a constant of tape t)
///
/// A float layer on a bf16 var (or tensor) input watches its weight and
/// bias as bf16 copies (mixed precision: the cast is on the tape, the
/// float32 masters get float32 gradients) and gives a bf16 var.

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include <boost/hana/define_struct.hpp>

#include <dimsum/grad/parameter.hpp>
#include <dimsum/grad/rules/einsum.hpp>
#include <dimsum/grad/rules/elementwise.hpp>
#include <dimsum/grad/tape.hpp>
#include <dimsum/io/npy.hpp>
#include <dimsum/nn/detail/on_tape.hpp>
#include <dimsum/nn/init.hpp>
#include <dimsum/ops/einsum.hpp>
#include <dimsum/ops/rename.hpp>

namespace dimsum::nn {

template <class T, dimension In, dimension Out>
struct linear {
  BOOST_HANA_DEFINE_STRUCT(linear, (parameter<T, Out, In>, weight), (std::optional<parameter<T, Out>>, bias));

  linear() = default;
  /// Zero weight (and bias, unless `with_bias` is false); `reset_parameters`
  /// or a state-dict load fills them.
  linear(In in, Out out, bool with_bias = true) : weight(out, in) {
    if (with_bias) bias.emplace(out);
  }
  /// Plain numbers (PyTorch's `nn.Linear(30, 10)`) or the dims swapped: a
  /// compile error naming the layer's dims and what was given.
  template <class A, class B>
    requires(dimsum::detail::dim_or_number<A> && dimsum::detail::dim_or_number<B> &&
             !(std::is_same_v<A, In> && std::is_same_v<B, Out>))
  linear(A, B, bool = true) {
    dimsum::detail::report<linear_is_built_from_its_in_then_its_out_dim<
        diagnostic_name_t<In>, diagnostic_name_t<Out>, A, B>>();
  }

  /// Whether the layer adds a bias.
  bool has_bias() const { return bias.has_value(); }

  /// nn.Linear.reset_parameters: the weight kaiming_uniform over the fan-in
  /// In with a = sqrt(5), i.e. U(-1/sqrt(in), 1/sqrt(in)), then the bias
  /// U(-1/sqrt(in), 1/sqrt(in)), both from one stream seeded with `seed`
  /// (nn/init.hpp: torch's distributions, not torch's numbers).
  void reset_parameters(std::uint64_t seed) {
    init::generator g(seed);
    init::kaiming_uniform<In>(weight, g);
    if (bias) {
      const std::size_t fan_in = init::fan<In>(weight);
      const double bound = fan_in ? 1.0 / std::sqrt(double(fan_in)) : 0.0;  // fan-in 0: no weights, bias 0
      init::uniform(*bias, g, -bound, bound);
    }
  }

  /// Loads `weight` (Out, In) and, if a path is given, `bias` (Out) from
  /// `.npy` files written from PyTorch (`module.weight.detach().numpy()`).
  static linear load(const std::string& weight_path, const std::string& bias_path = "") {
    linear l;
    l.weight = parameter<T, Out, In>(load_npy<tensor<T, Out, In>>(weight_path));
    if (!bias_path.empty())
      l.bias.emplace(load_npy<tensor<T, Out>>(bias_path, Out{l.weight.value.template extent<Out>()}));
    return l;
  }

  /// x with dim In replaced by Out: y = x W^T + b.
  template <named_expression X>
  auto operator()(X&& x) const {
    return apply(std::forward<X>(x), weight.value, [&]() -> const auto& { return bias->value; });
  }

  /// The same on a var x, recorded on x's tape with `weight` and `bias`
  /// watched: backward accumulates their gradients (PyTorch's `lin(x)` in a
  /// training loop). A var on no tape throws `grad::tape_error`.
  template <grad::detail::var_like X>
  auto operator()(X&& x) {
    return (*this)(detail::tape_of_input(x, "nn::linear"), std::forward<X>(x));
  }

  /// The same on tape t for x a var of t or a tensor (a constant input).
  template <class X>
    requires(grad::detail::var_like<X> || named_expression<X>)
  auto operator()(grad::tape& t, X&& x) {
    using Input = std::remove_cvref_t<X>;
    return apply(std::forward<X>(x), detail::watch_for<Input>(t, weight), [&] { return detail::watch_for<Input>(t, *bias); });
  }

 private:
  // y = x W^T (+ b) for a weight W and a bias b (bias() is called only
  // when the layer has one): tensors, or vars of one tape.
  template <class X, class W, class B>
  auto apply(X&& x, const W& w, B&& bias_of) const {
    using L = dims_of_t<X>;
    using R = replace_dim_t<L, In, Out>;
    if constexpr (!contains_v<L, In>) {
      dimsum::detail::report<linear_input_lacks_the_in_dim<diagnostic_name_t<In>, diagnostic_dims_t<L>>>();
      return invalid_expression{};
    } else if constexpr (contains_v<L, Out> && In::name.view() != Out::name.view()) {
      dimsum::detail::report<linear_input_already_has_the_out_dim<diagnostic_name_t<Out>, diagnostic_dims_t<L>>>();
      return invalid_expression{};
    } else if constexpr (grad::detail::any_var_v<X, W>) {
      using V = grad::var_for_t<value_type_of_t<W>, R>;  // T, or bf16 for a float layer on a bf16 input
      V y = [&]<dimension... O>(dim_list<O...>*) { return einsum<O...>(std::forward<X>(x), w); }(static_cast<R*>(nullptr));
      if (bias) return V(std::move(y) + bias_of());
      return y;
    } else {
      auto y = dimsum::detail::make_einsum<R>(std::forward<X>(x), w);
      if (bias) return tensor_for_t<T, R>(std::move(y) + bias_of());
      return tensor_for_t<T, R>(std::move(y));
    }
  }
};

}  // namespace dimsum::nn
