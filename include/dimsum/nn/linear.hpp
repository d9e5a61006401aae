#pragma once
/// \file
/// `nn::linear<T, In, Out>`: PyTorch's nn.Linear with named dims. The weight
/// is stored in PyTorch's layout (Out, In), so `.npy` files saved from a
/// module load as they are. Applied to x, it contracts x's dim In and puts
/// Out in its place: (batch, posn, In) -> (batch, posn, Out).

#include <cmath>
#include <cstdint>
#include <random>
#include <string>

#include <dimsum/io/npy.hpp>
#include <dimsum/ops/einsum.hpp>
#include <dimsum/ops/rename.hpp>

namespace dimsum::nn {

template <class T, dimension In, dimension Out>
struct linear {
  tensor<T, Out, In> weight;  // PyTorch's (out_features, in_features)
  tensor<T, Out> bias;
  bool has_bias = true;

  linear() = default;
  /// Zero weights (and bias); `reset_parameters` or `load` fills them.
  linear(In in, Out out, bool with_bias = true) : weight(out, in), bias(out), has_bias(with_bias) {}

  /// PyTorch's default initialisation, U(-1/sqrt(in), 1/sqrt(in)) for the
  /// weight and the bias, from a seeded generator (the distribution, not
  /// torch's numbers).
  void reset_parameters(std::uint64_t seed) {
    const std::size_t fan_in = weight.template extent<In>();
    const double bound = fan_in ? 1.0 / std::sqrt(double(fan_in)) : 0.0;
    std::mt19937_64 gen(seed);
    std::uniform_real_distribution<double> dist(-bound, bound);
    for (std::size_t i = 0; i < weight.size(); ++i) weight.data()[i] = static_cast<T>(dist(gen));
    for (std::size_t i = 0; i < bias.size(); ++i) bias.data()[i] = has_bias ? static_cast<T>(dist(gen)) : T(0);
  }

  /// Loads `weight` (Out, In) and, if a path is given, `bias` (Out) from
  /// `.npy` files written from PyTorch (`module.weight.detach().numpy()`).
  static linear load(const std::string& weight_path, const std::string& bias_path = "") {
    linear l;
    l.weight = load_npy<tensor<T, Out, In>>(weight_path);
    l.has_bias = !bias_path.empty();
    if (l.has_bias)
      l.bias = load_npy<tensor<T, Out>>(bias_path, Out{l.weight.template extent<Out>()});
    else
      l.bias = tensor<T, Out>(Out{l.weight.template extent<Out>()});
    return l;
  }

  /// x with dim In replaced by Out: y = x W^T + b.
  template <named_expression X>
  auto operator()(X&& x) const {
    using L = dims_of_t<X>;
    using R = replace_dim_t<L, In, Out>;
    if constexpr (!contains_v<L, In>) {
      detail::report<linear_input_lacks_the_in_dim<diagnostic_name_t<In>, diagnostic_dims_t<L>>>();
      return invalid_expression{};
    } else if constexpr (contains_v<L, Out> && In::name.view() != Out::name.view()) {
      detail::report<linear_input_already_has_the_out_dim<diagnostic_name_t<Out>, diagnostic_dims_t<L>>>();
      return invalid_expression{};
    } else {
      auto y = detail::make_einsum<R>(std::forward<X>(x), weight);
      if (has_bias) return tensor_for_t<T, R>(std::move(y) + bias);
      return tensor_for_t<T, R>(std::move(y));
    }
  }
};

}  // namespace dimsum::nn
