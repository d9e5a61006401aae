#pragma once
/// \file
/// Sliding-window causal masks by name: `window_mask<q_posn, k_posn>(scores,
/// window, -inf)` keeps, for each query, its own position and the
/// `window - 1` keys before it (Longformer/Mistral-style local attention),
/// with an optional position offset for queries that follow a key/value
/// cache.

#include <array>
#include <cstddef>
#include <limits>
#include <string>

#include <dimsum/core/diagnostics.hpp>
#include <dimsum/core/errors.hpp>
#include <dimsum/ops/elementwise.hpp>
#include <dimsum/plan/fusion_traits.hpp>

namespace dimsum {

/// Checker: window_mask names a dim the tensor does not have.
template <class Dim, class Dims>
struct window_mask_dim_is_not_a_dim_of_the_tensor {
  static_assert(detail::always_false<Dim, Dims>, "dimsum: window_mask over a dim that the tensor does not have");
};
/// Checker: window_mask's query and key dims are the same dim.
template <class Dim>
struct window_mask_query_and_key_are_the_same_dim {
  static_assert(detail::always_false<Dim>,
                "dimsum: window_mask needs two different dims: the query position and the key position");
};

/// A lazy sliding-window causal mask: t where the key index j and the
/// query index i satisfy `j <= i + offset` and `i + offset - j < window`,
/// `value` elsewhere.
template <dimension Q, dimension K, class E>
class window_mask_expr : public expression_tag {
 public:
  using value_type = value_type_of_t<E>;
  using dims = dims_of_t<E>;
  using query_dim = Q;
  using key_dim = K;
  static constexpr std::size_t rank = dims::size;
  using fusion_traits = plan::window_mask_node<Q, K, E>;

  template <class X>
  window_mask_expr(X&& e, std::size_t window, value_type masked_value, std::size_t offset)
      : e_(std::forward<X>(e)), window_(window), value_(masked_value), offset_(offset) {
    if (window == 0)
      throw shape_error("window_mask over '" + std::string(Q::name.view()) + "', '" + std::string(K::name.view()) +
                        "': the window must hold at least the query's own position (window >= 1)");
    // Positions offset + i, and one past them, must not wrap around.
    const std::size_t nq = e_.extents()[index_of<dims>(Q::name.view())];
    if (offset > std::numeric_limits<std::size_t>::max() - nq)
      throw shape_error("window_mask over '" + std::string(Q::name.view()) + "', '" + std::string(K::name.view()) +
                        "': offset " + std::to_string(offset) + " plus the " + std::to_string(nq) +
                        " query positions exceeds the largest position (SIZE_MAX)");
  }

  auto extents() const { return e_.extents(); }
  const auto& operand() const { return e_; }
  value_type masked_value() const { return value_; }
  std::size_t window() const { return window_; }
  std::size_t offset() const { return offset_; }

  template <class Root>
  auto evaluator() const {
    using Inner = decltype(e_.template evaluator<Root>());
    constexpr std::size_t q = index_of<Root>(Q::name.view());
    constexpr std::size_t k = index_of<Root>(K::name.view());
    return evaluator_type<Inner, Root::size, q, k>{e_.template evaluator<Root>(), value_, window_, offset_};
  }
  void eval_to(const strided<value_type, rank>& dst) const {
    auto ev = evaluator<dims>();
    detail::run_elementwise(dst, ev);
  }

 private:
  template <class Inner, std::size_t R, std::size_t QP, std::size_t KP>
  struct evaluator_type {
    Inner inner;
    value_type value;
    std::size_t window, offset;
    std::size_t qi = 0, ki = 0;
    void seek(const std::size_t* idx) {
      inner.seek(idx);
      if constexpr (QP != R - 1) qi = idx[QP];
      if constexpr (KP != R - 1) ki = idx[KP];
    }
    value_type operator[](std::size_t j) const {
      const std::size_t q = (QP == R - 1 ? j : qi) + offset;
      const std::size_t k = KP == R - 1 ? j : ki;
      return k > q || q - k >= window ? value : static_cast<value_type>(inner[j]);
    }
  };

  detail::closure_t<E> e_;
  std::size_t window_;
  value_type value_;
  std::size_t offset_;
};

/// Masks t with `masked_value` outside a causal sliding window: query i
/// (at absolute position i + offset) keeps keys j with
/// `i + offset - window < j <= i + offset`, i.e. itself and the
/// `window - 1` positions before it. `window` >= 1 (`shape_error`
/// otherwise); a window at least the key extent is the causal mask
/// (shifted by `offset`). Q and K are two different dims of t (compile
/// errors otherwise). Example: `window_mask<q_posn, k_posn>(scores, 4, -inf)`.
template <dimension Q, dimension K, named_expression E, scalar V>
auto window_mask(E&& e, std::size_t window, V masked_value, std::size_t offset = 0) {
  using L = dims_of_t<E>;
  if constexpr (is_invalid_v<E>) {
    return invalid_expression{};
  } else if constexpr (Q::name.view() == K::name.view()) {
    detail::report<window_mask_query_and_key_are_the_same_dim<diagnostic_name_t<Q>>>();
    return invalid_expression{};
  } else if constexpr (!contains_v<L, Q>) {
    detail::report<window_mask_dim_is_not_a_dim_of_the_tensor<diagnostic_name_t<Q>, diagnostic_dims_t<L>>>();
    return invalid_expression{};
  } else if constexpr (!contains_v<L, K>) {
    detail::report<window_mask_dim_is_not_a_dim_of_the_tensor<diagnostic_name_t<K>, diagnostic_dims_t<L>>>();
    return invalid_expression{};
  } else {
    return window_mask_expr<Q, K, E>(std::forward<E>(e), window, static_cast<value_type_of_t<E>>(masked_value), offset);
  }
}

}  // namespace dimsum
