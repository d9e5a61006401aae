#pragma once
/// \file
/// Diagonals and traces by name: `diagonal<a, a2>(x)` and `trace<a, a2>(x)`,
/// the named form of einops/numpy's repeated label (`i i -> i`, `i i ->`),
/// which a dimsum tensor cannot write (names are unique within a tensor).

#include <array>
#include <cstddef>
#include <string>
#include <utility>

#include <dimsum/core/diagnostics.hpp>
#include <dimsum/ops/reduce.hpp>
#include <dimsum/tensor/tensor.hpp>

namespace dimsum {

/// Checker: a diagonal or trace names a dim the tensor does not have.
template <class Dim, class Dims>
struct diagonal_dim_is_not_a_dim_of_the_tensor {
  static_assert(detail::always_false<Dim, Dims>, "dimsum: diagonal/trace over a dim that the tensor does not have");
};
/// Checker: a diagonal or trace pairs a dim with itself.
template <class Dim>
struct diagonal_pairs_a_dim_with_itself {
  static_assert(detail::always_false<Dim>,
                "dimsum: diagonal/trace needs two different dims (rename one first, e.g. rename<a, a2>)");
};
/// Checker: the two dims of a diagonal or trace have different static extents.
template <class Dim, class Extent, class Dim2, class Extent2>
struct diagonal_dims_have_different_static_extents {
  static_assert(detail::always_false<Dim, Extent, Dim2, Extent2>,
                "dimsum: diagonal/trace of two dims whose static extents differ");
};

/// The lazy diagonal of E over dims A and A2: E's dims without A2, and at
/// each index the element of E with A2 = A.
template <dimension A, dimension A2, class E>
class diagonal_expr : public expression_tag {
 public:
  using value_type = value_type_of_t<E>;
  using dims = without_t<dims_of_t<E>, dim_list<A2>>;
  static constexpr std::size_t rank = dims::size;

  template <class X>
  explicit diagonal_expr(X&& e) : e_(std::forward<X>(e)) {
    using In = dims_of_t<E>;
    const auto in = e_.extents();
    const std::size_t n = in[index_of<In>(A::name.view())], n2 = in[index_of<In>(A2::name.view())];
    if (n != n2)
      throw shape_error("diagonal: dims '" + std::string(A::name.view()) + "' and '" + std::string(A2::name.view()) +
                        "' must have equal extents but have " + std::to_string(n) + " and " + std::to_string(n2));
    constexpr auto pos = positions_in<dims, In>();
    for (std::size_t i = 0; i < rank; ++i) extents_[i] = in[pos[i]];
  }

  const std::array<std::size_t, rank>& extents() const { return extents_; }
  const auto& operand() const { return e_; }

  template <class Root>
  auto evaluator() const {
    return detail::materializing_evaluator<Root>(*this);
  }
  /// A strided read of E: A's stride is A's plus A2's.
  void eval_to(const strided<value_type, rank>& dst) const {
    using In = dims_of_t<E>;
    auto&& src = detail::materialize(e_);
    constexpr auto pos = positions_in<dims, In>();
    const auto st = src.strides();
    std::array<std::ptrdiff_t, rank> s{};
    for (std::size_t i = 0; i < rank; ++i) s[i] = st[pos[i]];
    s[index_of<dims>(A::name.view())] += st[index_of<In>(A2::name.view())];
    detail::leaf_evaluator<value_type, rank> ev{src.data(), s};
    detail::run_elementwise(dst, ev);
  }

 private:
  detail::closure_t<E> e_;
  std::array<std::size_t, rank> extents_{};
};

namespace detail {
// diagonal (Trace false) or trace (Trace true) after the compile-time
// checks; one report and an invalid_expression on a mistake.
template <dimension A, dimension A2, bool Trace, class E>
auto make_diagonal(E&& e) {
  using L = dims_of_t<E>;
  if constexpr (is_invalid_v<E>) {
    return invalid_expression{};
  } else if constexpr (!contains_v<L, A>) {
    report<diagonal_dim_is_not_a_dim_of_the_tensor<diagnostic_name_t<A>, diagnostic_dims_t<L>>>();
    return invalid_expression{};
  } else if constexpr (!contains_v<L, A2>) {
    report<diagonal_dim_is_not_a_dim_of_the_tensor<diagnostic_name_t<A2>, diagnostic_dims_t<L>>>();
    return invalid_expression{};
  } else if constexpr (A::name.view() == A2::name.view()) {
    report<diagonal_pairs_a_dim_with_itself<diagnostic_name_t<A>>>();
    return invalid_expression{};
  } else if constexpr (constexpr std::size_t n = L::static_extents[index_of<L>(A::name.view())],
                       n2 = L::static_extents[index_of<L>(A2::name.view())];
                       n != dynamic && n2 != dynamic && n != n2) {
    report<diagonal_dims_have_different_static_extents<diagnostic_name_t<A>, extent_c<n>, diagnostic_name_t<A2>,
                                                       extent_c<n2>>>();
    return invalid_expression{};
  } else if constexpr (Trace) {
    return sum<A>(diagonal_expr<A, A2, E>(std::forward<E>(e)));
  } else {
    return diagonal_expr<A, A2, E>(std::forward<E>(e));
  }
}
}  // namespace detail

/// The diagonal of x over dims A and A2, keeping A: the result has x's dims
/// without A2, in x's order, and holds x's elements where A2 equals A
/// (einops/numpy `i i -> i`). Compile time: A and A2 are two different dims
/// of x, their static extents (if both static) equal; run time: their
/// extents equal (`shape_error` naming both). Lazy; assigning or an
/// enclosing operation reads x with A's stride plus A2's (no copy of x).
/// Example: `auto d = eval(diagonal<q_posn, k_posn>(scores));` has dims
/// (batch, nheads, q_posn).
template <dimension A, dimension A2, named_expression E>
auto diagonal(E&& e) {
  return detail::make_diagonal<A, A2, false>(std::forward<E>(e));
}

/// The trace of x over dims A and A2: the sum of its diagonal over A (einops
/// `i i ->`), so the result has x's dims without A and A2. Same checks as
/// `diagonal`. Example: `auto t = eval(trace<q_posn, k_posn>(scores));` has
/// dims (batch, nheads).
template <dimension A, dimension A2, named_expression E>
auto trace(E&& e) {
  return detail::make_diagonal<A, A2, true>(std::forward<E>(e));
}

}  // namespace dimsum
