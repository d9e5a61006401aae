#pragma once
/// \file
/// ALiBi (Press et al., "Train Short, Test Long"): a per-head slope times
/// the query-key distance, added to the attention scores instead of
/// position embeddings. `alibi_slopes<T>(nheads{n})` gives the slopes;
/// `relative_positions<T>(q_posn{n}, k_posn{m})` the key-minus-query
/// distances, lazily (no table); the bias is their outer product, added to
/// the scores by name: `scores + outer(slopes, relative_positions<T>(q_posn{n},
/// k_posn{n}))`, or `scores + alibi<T>(nheads{h}, q_posn{n}, k_posn{n})`.

#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include <dimsum/core/diagnostics.hpp>
#include <dimsum/core/errors.hpp>
#include <dimsum/ops/elementwise.hpp>
#include <dimsum/plan/fusion_traits.hpp>
#include <dimsum/tensor/named_access.hpp>
#include <dimsum/tensor/tensor.hpp>

namespace dimsum {

/// Checker: relative_positions over one dim for queries and keys.
template <class Dim>
struct relative_positions_query_and_key_are_the_same_dim {
  static_assert(detail::always_false<Dim>,
                "dimsum: relative_positions needs two different dims: the query position and the key position");
};

/// The ALiBi slope of each of n heads along dim H, as the paper's reference
/// code computes them: for n a power of two, head h (from 0) gets
/// 2^(-8 (h + 1) / n); otherwise the slopes of the largest power of two
/// m < n, followed by the 1st, 3rd, 5th, ... slopes of 2m for
/// the remaining n - m heads. Example: `alibi_slopes<float>(nheads{8})`
/// holds 1/2, 1/4, ..., 1/256.
template <class T = float, dimension H>
tensor<T, H> alibi_slopes(const H& heads) {
  auto power_of_two_slopes = [](std::size_t n) {
    std::vector<double> s(n);
    const double start = std::pow(2.0, -8.0 / static_cast<double>(n));
    for (std::size_t h = 0; h < n; ++h) s[h] = std::pow(start, static_cast<double>(h + 1));
    return s;
  };
  const std::size_t n = heads.value;
  std::vector<double> slopes;
  if (n > 0) {
    std::size_t m = 1;
    while (m * 2 <= n) m *= 2;
    slopes = power_of_two_slopes(m);
    if (m < n) {
      const auto extra = power_of_two_slopes(2 * m);
      for (std::size_t i = 0; slopes.size() < n; i += 2) slopes.push_back(extra[i]);
    }
  }
  tensor<T, H> t(heads);
  for (std::size_t h = 0; h < n; ++h) t.data()[h] = static_cast<T>(slopes[h]);
  return t;
}

/// A lazy key-minus-query distance over the dims (Q, K): the element at
/// (i, j) is `j - (i + offset)`, computed from the indices when read, so no
/// Q x K table exists (memory O(1)). Broadcast by name like any
/// expression; the fusion patterns recognise `slope * relative_positions`
/// (plan/fusion_patterns.hpp, `affine_bias`) and compute it inside the
/// fused attention kernel a vector of keys at a time.
template <class T, dimension Q, dimension K>
class relative_positions_expr : public expression_tag {
 public:
  using value_type = T;
  using dims = dim_list<Q, K>;
  using query_dim = Q;
  using key_dim = K;
  static constexpr std::size_t rank = 2;
  using fusion_traits = plan::relative_position_node<Q, K>;

  relative_positions_expr(const Q& q, const K& k, std::size_t offset) : extents_{q.value, k.value}, offset_(offset) {
    detail::check_static_extents<dims>(extents_, "relative_positions");
    // Positions offset + i must not wrap around (nor one past them, which
    // the fused kernel reads).
    if (offset > std::numeric_limits<std::size_t>::max() - q.value)
      throw shape_error("relative_positions over '" + std::string(Q::name.view()) + "', '" +
                        std::string(K::name.view()) + "': offset " + std::to_string(offset) + " plus the " +
                        std::to_string(q.value) + " query positions exceeds the largest position (SIZE_MAX)");
  }

  const std::array<std::size_t, 2>& extents() const { return extents_; }
  /// The position of query 0 when key 0 is at position 0.
  std::size_t offset() const { return offset_; }
  /// The distance of key j from query i, `j - (i + offset)`, by name; an
  /// index past its dim's extent throws `shape_error`, as a tensor's does.
  T operator()(const Q& i, const K& j) const {
    detail::offset_from_indices<dims>(extents_, std::array<std::ptrdiff_t, 2>{}, i, j);
    return static_cast<T>(static_cast<double>(j.value) - static_cast<double>(i.value + offset_));
  }
  T operator()(const K& j, const Q& i) const { return (*this)(i, j); }

  template <class Root>
  auto evaluator() const {
    constexpr std::size_t q = index_of<Root>(Q::name.view());
    constexpr std::size_t k = index_of<Root>(K::name.view());
    return evaluator_type<Root::size, q, k>{offset_};
  }
  void eval_to(const strided<T, 2>& dst) const {
    auto ev = evaluator<dims>();
    detail::run_elementwise(dst, ev);
  }

 private:
  // Whichever of Q and K is the root's innermost dim is read from j; the
  // other is fixed by seek. Distances are whole numbers, exact in T up to
  // 2^24 (float) positions.
  template <std::size_t R, std::size_t QP, std::size_t KP>
  struct evaluator_type {
    std::size_t offset;
    std::size_t qi = 0, ki = 0;
    void seek(const std::size_t* idx) {
      if constexpr (QP != R - 1) qi = idx[QP];
      if constexpr (KP != R - 1) ki = idx[KP];
    }
    T operator[](std::size_t j) const {
      const std::size_t q = (QP == R - 1 ? j : qi) + offset;
      const std::size_t k = KP == R - 1 ? j : ki;
      return static_cast<T>(static_cast<double>(k) - static_cast<double>(q));
    }
  };

  std::array<std::size_t, 2> extents_;
  std::size_t offset_;
};

/// The distance from each query to each key, `j - (i + offset)`, as a lazy
/// expression with dims (Q, K) (`relative_positions_expr`: no table is
/// stored; assign it to a tensor to get one): negative for keys before the
/// query (ALiBi's bias is a head's slope times it). `offset` is the
/// position of the first query when the keys start at 0 (queries after a
/// key/value cache). Q and K must be different dims. Example:
/// `tensor<float, q_posn, k_posn> d = relative_positions<float>(q_posn{4},
/// k_posn{4});` holds 0 on the diagonal, -1 just below it.
template <class T = float, dimension Q, dimension K>
auto relative_positions(const Q& q, const K& k, std::size_t offset = 0) {
  if constexpr (Q::name.view() == K::name.view()) {
    detail::report<relative_positions_query_and_key_are_the_same_dim<diagnostic_name_t<Q>>>();
    return invalid_expression{};
  } else {
    return relative_positions_expr<T, Q, K>(q, k, offset);
  }
}

/// The ALiBi bias over (H, Q, K) as one lazy expression:
/// `outer(alibi_slopes<T>(heads), relative_positions<T>(q, k, offset))`,
/// the slopes (n values) owned by the expression, the distances computed
/// when read: memory linear in the head count, none in the positions. Add
/// it to the scores by name; the fused attention kernel computes it a
/// vector at a time (plan/fusion_patterns.hpp). Example:
/// `scores + alibi<float>(nheads{12}, q_posn{n}, k_posn{n})`.
template <class T = float, dimension H, dimension Q, dimension K>
auto alibi(const H& heads, const Q& q, const K& k, std::size_t offset = 0) {
  if constexpr (Q::name.view() == K::name.view()) {
    detail::report<relative_positions_query_and_key_are_the_same_dim<diagnostic_name_t<Q>>>();
    return invalid_expression{};
  } else {
    return outer(alibi_slopes<T>(heads), relative_positions_expr<T, Q, K>(q, k, offset));
  }
}

}  // namespace dimsum
