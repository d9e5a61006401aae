#pragma once
/// \file
/// ALiBi (Press et al., "Train Short, Test Long"): a per-head slope times
/// the query-key distance, added to the attention scores instead of
/// position embeddings. `alibi_slopes<T>(nheads{n})` gives the slopes;
/// `relative_positions<T>(q_posn{n}, k_posn{m})` the key-minus-query
/// distances; the bias is their outer product, added to the scores by
/// name: `scores + outer(slopes, relative_positions<T>(q_posn{n}, k_posn{n}))`.

#include <cmath>
#include <cstddef>
#include <vector>

#include <dimsum/core/diagnostics.hpp>
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

/// The distance from each query to each key, `j - (i + offset)`, as a
/// tensor with dims (Q, K): negative for keys before the query (ALiBi's
/// bias is a head's slope times it). `offset` is the position of the first
/// query when the keys start at 0 (queries after a key/value cache). Q and
/// K must be different dims. Example: `relative_positions<float>(q_posn{4},
/// k_posn{4})` holds 0 on the diagonal, -1 just below it.
template <class T = float, dimension Q, dimension K>
auto relative_positions(const Q& q, const K& k, std::size_t offset = 0) {
  if constexpr (Q::name.view() == K::name.view()) {
    detail::report<relative_positions_query_and_key_are_the_same_dim<diagnostic_name_t<Q>>>();
    return invalid_expression{};
  } else {
    tensor<T, Q, K> t(q, k);
    for (std::size_t i = 0; i < q.value; ++i)
      for (std::size_t j = 0; j < k.value; ++j)
        t.data()[i * k.value + j] = static_cast<T>(static_cast<double>(j) - static_cast<double>(i + offset));
    return t;
  }
}

}  // namespace dimsum
