#pragma once
/// \file
/// `t5_relative_bucket(rel, bidirectional, num_buckets, max_distance)`: T5's
/// bucketing of key-minus-query distances (HF transformers'
/// `T5Attention._relative_position_bucket`), element-wise over a named
/// integer expression, lazily; `t5_bucket` is the same function on one
/// distance, for `map`. With `relative_positions<int>` and `lookup`, it
/// gives T5's learned relative-position bias without a positions x
/// positions table:
///
///     auto buckets = dimsum::t5_relative_bucket(dimsum::relative_positions<int>(q_posn{p}, k_posn{p}), true, 32, 128);
///     auto bias = dimsum::lookup<bucket>(table, buckets);   // (q_posn, k_posn, nheads)

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include <dimsum/core/errors.hpp>
#include <dimsum/ops/map.hpp>

namespace dimsum {

/// T5's bucket of one key-minus-query distance `rel` (HF's
/// `_relative_position_bucket`, float32 log and truncation included):
/// bidirectional, half the buckets are for keys after the query
/// (`rel > 0`) and half for the others, by |rel|; otherwise (causal) only
/// `-min(rel, 0)` counts. Within a half of n buckets, distances below n / 2
/// have one bucket each, the rest share the others log-spaced up to
/// `max_distance`, beyond which the last bucket holds them all. Buckets are
/// in [0, num_buckets). Example: `t5_bucket{true, 32, 128}(-3) == 3`.
struct t5_bucket {
  bool bidirectional = true;
  std::int64_t num_buckets = 32;
  std::int64_t max_distance = 128;

  std::int64_t operator()(std::int64_t rel) const {
    std::int64_t n = num_buckets, bucket = 0;
    if (bidirectional) {
      n /= 2;
      if (rel > 0) bucket += n;
      rel = rel < 0 ? -rel : rel;
    } else {
      rel = rel < 0 ? -rel : 0;
    }
    const std::int64_t max_exact = n / 2;
    if (rel < max_exact) return bucket + rel;
    // as torch computes it in float32: log(rel / max_exact) / log(max_distance / max_exact) * (n - max_exact)
    const float denominator = static_cast<float>(std::log(static_cast<double>(max_distance) / static_cast<double>(max_exact)));
    const float scaled = std::log(static_cast<float>(rel) / static_cast<float>(max_exact)) / denominator *
                         static_cast<float>(n - max_exact);
    std::int64_t large = max_exact + static_cast<std::int64_t>(scaled);
    if (large > n - 1) large = n - 1;
    return bucket + large;
  }
};

/// T5's relative-position bucket of every element of the integer
/// expression `rel` (key minus query, as `relative_positions<int>`
/// gives), lazily: `map(t5_bucket{bidirectional, num_buckets, max_distance},
/// rel)`, dims those of rel, values int64. num_buckets must be at least 2
/// (4 when bidirectional) and max_distance larger than the exact range
/// (shape_error otherwise). Example:
/// `t5_relative_bucket(relative_positions<int>(q_posn{64}, k_posn{64}), true, 32, 128)`.
template <named_expression R>
auto t5_relative_bucket(R&& rel, bool bidirectional, std::int64_t num_buckets = 32, std::int64_t max_distance = 128) {
  static_assert(std::is_integral_v<value_type_of_t<R>>,
                "dimsum: t5_relative_bucket needs integer distances (relative_positions<int>)");
  const std::int64_t half = bidirectional ? num_buckets / 2 : num_buckets;
  if (half < 2 || max_distance <= half / 2)
    throw shape_error("t5_relative_bucket: " + std::to_string(num_buckets) + " buckets (" +
                      (bidirectional ? "bidirectional" : "causal") + ") and max_distance " + std::to_string(max_distance) +
                      ": need at least 2 buckets per direction and max_distance above half of them");
  return dimsum::map(t5_bucket{bidirectional, num_buckets, max_distance}, std::forward<R>(rel));
}

}  // namespace dimsum
