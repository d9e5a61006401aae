#pragma once
/// \file
/// `dropout(x, p, seed)` on vars: zeroes each element with probability p and
/// scales the others by 1 / (1 - p), as torch's F.dropout in training; the
/// mask is drawn once (seeded std::mt19937_64) and the backward pass uses
/// the same mask. p = 0 is the identity.
///
///     auto h = dimsum::dropout(attn, 0.1, step_seed);

#include <cstdint>
#include <random>
#include <string>

#include <dimsum/core/errors.hpp>
#include <dimsum/grad/rules/elementwise.hpp>

namespace dimsum {

/// Compile-time error: `dropout(x, p, seed)` of a tensor or expression.
template <class Dims>
struct dropout_with_a_seed_takes_a_var {
  static_assert(detail::always_false<Dims>,
                "dimsum: dropout(x, p, seed) is the form for grad::var (a training step on a tape); for a tensor "
                "use nn::dropout(p, /*training=*/true, seed)(x)");
};

/// `dropout(x, p, seed)` of a tensor or expression: the compile error
/// `dropout_with_a_seed_takes_a_var`, naming x's dims.
template <named_expression E>
invalid_expression dropout(const E&, double, std::uint64_t) {
  detail::report<dropout_with_a_seed_takes_a_var<diagnostic_dims_t<dims_of_t<E>>>>();
  return {};
}

/// Dropout of a var with drop probability p in [0, 1) (dimsum::error
/// otherwise), seeded; the gradient is g times the same scaled mask.
template <grad::detail::var_like V>
auto dropout(V&& v, double p, std::uint64_t seed) {
  using X = std::remove_cvref_t<V>;
  using T = typename X::value_type;
  if (!(p >= 0.0 && p < 1.0)) throw error("dropout: p must be in [0, 1), got " + std::to_string(p));
  auto mask = tensor_for_t<T, typename X::dims>::from_extents(v.extents());
  std::mt19937_64 gen(seed);
  std::bernoulli_distribution keep(1.0 - p);
  const T scale = static_cast<T>(1.0 / (1.0 - p));
  for (auto& m : mask.storage()) m = p == 0.0 || keep(gen) ? scale : T(0);
  const tensor_for_t<T, typename X::dims> out = v.value() * mask;
  return grad::detail::record_op(out, [v, mask](const auto& g, const auto&) { v.node()->accumulate(g * mask); }, v);
}

}  // namespace dimsum
