#pragma once
/// \file
/// PyTorch's initialisations by name (`torch.nn.init`), filling a tensor or
/// a parameter's value in place: `uniform`, `normal`, `constant`, `ones`,
/// `zeros`, and `kaiming_uniform<FanIn...>` with the fan-in given by dims
/// (nn.Linear's weight: `kaiming_uniform<In>(w, seed)`, which with torch's
/// default a = sqrt(5) is U(-1/sqrt(fan_in), 1/sqrt(fan_in))). Each draw is
/// a deterministic function of the seed, the same on every platform:
/// mt19937_64 (the engine is specified by the standard; its distributions
/// are not), uniforms from the top 53 bits, normals by Box-Muller. The
/// distributions are torch's; the numbers are not (docs/design.md, "Modules
/// as Hana structs"). Per-parameter seeds come from
/// `optim::seed_parameters`. See tests/unit/nn_init.cpp.
///
///     nn::init::kaiming_uniform<d_in>(lin.weight, seed);   // as nn.Linear.reset_parameters

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numbers>
#include <random>
#include <string>
#include <type_traits>

#include <dimsum/core/errors.hpp>
#include <dimsum/grad/parameter.hpp>
#include <dimsum/tensor/tensor.hpp>

namespace dimsum::nn::init {

/// The portable random source of the initialisers.
class generator {
 public:
  explicit generator(std::uint64_t seed) : engine_(seed) {}
  /// Uniform in [0, 1): the top 53 bits of one 64-bit draw.
  double uniform() { return double(engine_() >> 11) * 0x1p-53; }
  /// Standard normal by Box-Muller from two uniforms in (0, 1) (one value
  /// per call).
  double normal() {
    const double u1 = open_uniform();  // log(u1) is finite
    const double u2 = open_uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }

 private:
  double open_uniform() { return (double(engine_() >> 11) + 0.5) * 0x1p-53; }
  std::mt19937_64 engine_;
};

namespace detail {
template <class X>
inline constexpr bool is_tensor_v = false;
template <class T, dimension... Ds>
inline constexpr bool is_tensor_v<tensor<T, Ds...>> = true;

// The tensor an initialisation fills: a tensor itself, or a parameter's value.
template <class X>
auto& values(X& x) {
  if constexpr (is_parameter_v<X>)
    return x.value;
  else
    return x;
}
// Fills x with f() element by element; a parameter's gradient is zeroed.
template <class X, class F>
void fill_with(X& x, F f) {
  auto& t = values(x);
  using T = typename std::remove_cvref_t<decltype(t)>::value_type;
  for (std::size_t i = 0; i < t.size(); ++i) t.data()[i] = static_cast<T>(f());
  if constexpr (is_parameter_v<X>) x.zero_grad();
}
}  // namespace detail

/// What the initialisations fill: a `tensor` or a `parameter` (its value;
/// its gradient is zeroed).
template <class X>
concept initialisable = is_parameter_v<X> || detail::is_tensor_v<X>;

/// The product of the extents of the dims Ds of x (the fan-in or fan-out
/// that an initialisation is scaled by).
template <dimension... Ds, initialisable X>
std::size_t fan(const X& x) {
  if constexpr (is_parameter_v<X>)
    return (std::size_t(1) * ... * x.value.template extent<Ds>());
  else
    return (std::size_t(1) * ... * x.template extent<Ds>());
}

/// U(a, b) entries (`nn.init.uniform_`), drawn from g (a layer draws its
/// weight, then its bias, from one stream, as torch does) or from a
/// generator seeded with `seed`.
template <initialisable X>
void uniform(X& x, generator& g, double a = 0.0, double b = 1.0) {
  if (!(a <= b && std::isfinite(a) && std::isfinite(b)))  // as torch's uniform_
    throw error("nn::init::uniform: needs finite bounds a <= b, got a = " + std::to_string(a) +
                ", b = " + std::to_string(b));
  detail::fill_with(x, [&] { return a + (b - a) * g.uniform(); });
}
template <initialisable X>
void uniform(X& x, std::uint64_t seed, double a = 0.0, double b = 1.0) {
  generator g(seed);
  uniform(x, g, a, b);
}

/// N(mean, std^2) entries (`nn.init.normal_`).
template <initialisable X>
void normal(X& x, generator& g, double mean = 0.0, double std = 1.0) {
  if (!(std >= 0.0))  // as torch's normal_
    throw error("nn::init::normal: needs std >= 0, got " + std::to_string(std));
  detail::fill_with(x, [&] { return mean + std * g.normal(); });
}
template <initialisable X>
void normal(X& x, std::uint64_t seed, double mean = 0.0, double std = 1.0) {
  generator g(seed);
  normal(x, g, mean, std);
}

/// Every entry v (`nn.init.constant_`).
template <initialisable X>
void constant(X& x, double v) {
  detail::fill_with(x, [v] { return v; });
}
/// Every entry 1 (`nn.init.ones_`; a layer norm's weight).
template <initialisable X>
void ones(X& x) {
  constant(x, 1.0);
}
/// Every entry 0 (`nn.init.zeros_`; a layer norm's bias).
template <initialisable X>
void zeros(X& x) {
  constant(x, 0.0);
}

/// The bound of `kaiming_uniform` for leaky-ReLU slope a and the given
/// fan-in: gain sqrt(2 / (1 + a^2)) times sqrt(3 / fan_in); 0 for fan-in 0.
inline double kaiming_uniform_bound(std::size_t fan_in, double a = std::sqrt(5.0)) {
  return fan_in ? std::sqrt(2.0 / (1.0 + a * a)) * std::sqrt(3.0 / double(fan_in)) : 0.0;
}

/// U(-bound, bound) with bound = kaiming_uniform_bound(fan-in, a), the
/// fan-in being the product of the extents of the dims FanIn
/// (`nn.init.kaiming_uniform_(w, a)`, mode 'fan_in', leaky_relu gain).
/// torch's default a = sqrt(5) is nn.Linear's weight init.
template <dimension... FanIn, initialisable X>
  requires(sizeof...(FanIn) > 0)
void kaiming_uniform(X& x, generator& g, double a = std::sqrt(5.0)) {
  const double bound = kaiming_uniform_bound(fan<FanIn...>(x), a);
  uniform(x, g, -bound, bound);
}
template <dimension... FanIn, initialisable X>
  requires(sizeof...(FanIn) > 0)
void kaiming_uniform(X& x, std::uint64_t seed, double a = std::sqrt(5.0)) {
  generator g(seed);
  kaiming_uniform<FanIn...>(x, g, a);
}

}  // namespace dimsum::nn::init
