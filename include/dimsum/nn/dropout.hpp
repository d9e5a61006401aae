#pragma once
/// \file
/// `nn::dropout`: zeroes each element with probability p and scales the rest
/// by 1 / (1 - p) in training; the identity in inference or at p = 0, as
/// nn.Dropout. Seeded, so a run is reproducible. Called on a `grad::var`,
/// it records `dimsum::dropout` on the var's tape with the mask the tensor
/// form draws for the same seed, so the backward uses that mask.

#include <cstdint>
#include <random>
#include <string>

#include <dimsum/grad/rules/dropout.hpp>
#include <dimsum/tensor/tensor.hpp>

namespace dimsum::nn {

struct dropout {
  double p = 0.0;
  bool training = false;
  std::uint64_t seed = 0;

  explicit dropout(double prob = 0.0, bool train = false, std::uint64_t s = 0) : p(prob), training(train), seed(s) {
    if (!(p >= 0.0 && p < 1.0)) throw error("dropout: p must be in [0, 1), got " + std::to_string(p));
  }

  /// The (evaluated) result; each call draws a new mask.
  template <named_expression X>
  auto operator()(X&& x) {
    auto t = eval(std::forward<X>(x));
    if (!training || p == 0.0) return t;
    std::mt19937_64 gen(seed++);
    std::bernoulli_distribution keep(1.0 - p);
    using T = value_type_of_t<decltype(t)>;
    const T scale = static_cast<T>(1.0 / (1.0 - p));
    for (std::size_t i = 0; i < t.size(); ++i) t.data()[i] = keep(gen) ? t.data()[i] * scale : T(0);
    return t;
  }

  /// The same on a var (PyTorch's `self.drop(x)` in a training step): in
  /// training with p > 0, `dimsum::dropout(x, p, seed++)`, whose mask is
  /// the one the tensor form draws for that seed; otherwise x itself.
  template <grad::detail::var_like X>
  auto operator()(X&& x) {
    using V = std::remove_cvref_t<X>;
    if (!training || p == 0.0) return V(std::forward<X>(x));
    return V(dimsum::dropout(std::forward<X>(x), p, seed++));
  }
};

}  // namespace dimsum::nn
