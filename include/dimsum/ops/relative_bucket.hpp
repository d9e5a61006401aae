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

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <dimsum/core/errors.hpp>
#include <dimsum/ops/alibi.hpp>
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

/// T5's buckets over the query and key dims (Q, K), lazily:
/// `t5_relative_bucket` of `relative_positions<I>(q, k, offset)`. The
/// bucket depends only on the distance `j - (i + offset)` and is constant
/// beyond `max_distance`, so the expression holds the bucket of each
/// distance within reach (at most 2 min(p, max_distance) + 1 values, none
/// per position pair) and an element is one read. Values int64.
template <dimension Q, dimension K>
class t5_relative_bucket_expr : public expression_tag {
 public:
  using value_type = std::int64_t;
  using dims = dim_list<Q, K>;
  static constexpr std::size_t rank = 2;

  t5_relative_bucket_expr(const std::array<std::size_t, 2>& extents, std::size_t offset, const t5_bucket& f)
      : extents_(extents), offset_(offset), function_(f) {
    // distances reach from -(nq - 1 + offset) to nk - 1; past max_distance
    // the bucket no longer changes, so they are clamped there
    const auto reach = static_cast<std::size_t>(f.max_distance);
    const std::size_t before = extents[0] == 0 ? 0 : std::min(extents[0] - 1, reach) + std::min(offset, reach);
    lo_ = -static_cast<std::int64_t>(std::min(before, reach));
    hi_ = extents[1] == 0 ? 0 : static_cast<std::int64_t>(std::min(extents[1] - 1, reach));
    buckets_.resize(static_cast<std::size_t>(hi_ - lo_ + 1));
    for (std::int64_t d = lo_; d <= hi_; ++d) buckets_[static_cast<std::size_t>(d - lo_)] = f(d);
    // where each distance's run of equal buckets ends, upward and downward
    // (`run`: a row's runs found in one read each)
    const std::size_t n = buckets_.size();
    run_up_.resize(n);
    run_down_.resize(n);
    for (std::size_t x = n; x-- > 0;)
      run_up_[x] = x + 1 < n && buckets_[x + 1] == buckets_[x] ? run_up_[x + 1] : lo_ + static_cast<std::int64_t>(x);
    for (std::size_t x = 0; x < n; ++x)
      run_down_[x] = x > 0 && buckets_[x - 1] == buckets_[x] ? run_down_[x - 1] : lo_ + static_cast<std::int64_t>(x);
  }

  const std::array<std::size_t, 2>& extents() const { return extents_; }
  std::size_t offset() const { return offset_; }
  /// The bucket function.
  const t5_bucket& function() const { return function_; }

  template <class Root>
  auto evaluator() const {
    constexpr std::size_t q = index_of<Root>(Q::name.view());
    constexpr std::size_t k = index_of<Root>(K::name.view());
    return evaluator_type<Root::size, q, k>{buckets_.data() - lo_, lo_, hi_, offset_, run_up_.data() - lo_,
                                            run_down_.data() - lo_};
  }
  void eval_to(const strided<value_type, 2>& dst) const {
    auto ev = evaluator<dims>();
    detail::run_elementwise(dst, ev);
  }

 private:
  template <std::size_t R, std::size_t QP, std::size_t KP>
  struct evaluator_type {
    const std::int64_t* at_zero;  // the bucket of distance 0 (indexed by distance)
    std::int64_t lo, hi;
    std::size_t offset;
    // the last (first) distance of the run of equal buckets from each
    // distance upward (downward), indexed by distance
    const std::int64_t* up_at_zero;
    const std::int64_t* down_at_zero;
    std::size_t qi = 0, ki = 0;
    void seek(const std::size_t* idx) {
      if constexpr (QP != R - 1) qi = idx[QP];
      if constexpr (KP != R - 1) ki = idx[KP];
    }
    std::int64_t operator[](std::size_t j) const {
      const std::size_t q = (QP == R - 1 ? j : qi) + offset;
      const std::size_t k = KP == R - 1 ? j : ki;
      const std::int64_t d = k >= q ? static_cast<std::int64_t>(std::min<std::size_t>(k - q, std::size_t(hi)))
                                    : -static_cast<std::int64_t>(std::min<std::size_t>(q - k, std::size_t(-lo)));
      return at_zero[d];
    }
    /// How many innermost indices from j (j < end) have the bucket of j:
    /// the distances clamped together beyond the reach, then the equal
    /// buckets in a row (the log-spaced ones), so that a gather or scatter
    /// along a row (`lookup`) reads each run's bucket once.
    std::size_t run(std::size_t j, std::size_t end) const {
      if constexpr (QP != R - 1 && KP != R - 1) {
        return end - j;  // the innermost index is neither position: one bucket
      } else {
        // u = k - (q + offset), unclamped: it grows with j when the keys
        // are innermost, falls when the queries are; the distances of a
        // run's buckets end at `last` (clamping extends a run that reaches
        // lo or hi past it)
        const auto q = static_cast<std::int64_t>((QP == R - 1 ? j : qi) + offset);
        const auto k = static_cast<std::int64_t>(KP == R - 1 ? j : ki);
        const std::int64_t u = k - q, c = u < lo ? lo : u > hi ? hi : u;
        if constexpr (KP == R - 1) {
          const std::int64_t last = up_at_zero[c];
          if (last == hi) return end - j;
          return std::min(end - j, static_cast<std::size_t>(last - u + 1));
        } else {
          const std::int64_t last = down_at_zero[c];
          if (last == lo) return end - j;
          return std::min(end - j, static_cast<std::size_t>(u - last + 1));
        }
      }
    }
  };

  std::array<std::size_t, 2> extents_;
  std::size_t offset_;
  t5_bucket function_;
  std::int64_t lo_ = 0, hi_ = 0;
  std::vector<std::int64_t> buckets_, run_up_, run_down_;
};

namespace detail {
template <class X>
inline constexpr bool is_relative_positions = false;
template <class T, class Q, class K>
inline constexpr bool is_relative_positions<relative_positions_expr<T, Q, K>> = true;
}  // namespace detail

/// T5's relative-position bucket of every element of the integer
/// expression `rel` (key minus query, as `relative_positions<int>`
/// gives), lazily: `map(t5_bucket{bidirectional, num_buckets, max_distance},
/// rel)`, dims those of rel, values int64; of `relative_positions` itself,
/// a `t5_relative_bucket_expr` that holds the bucket of each distance
/// (one read per element, no logarithm). num_buckets must be at least 2
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
  const t5_bucket f{bidirectional, num_buckets, max_distance};
  if constexpr (detail::is_relative_positions<std::remove_cvref_t<R>>) {
    // the distances' own dims and offset: the buckets by distance, precomputed
    using X = std::remove_cvref_t<R>;
    return t5_relative_bucket_expr<typename X::query_dim, typename X::key_dim>(rel.extents(), rel.offset(), f);
  } else {
    return dimsum::map(f, std::forward<R>(rel));
  }
}

}  // namespace dimsum
