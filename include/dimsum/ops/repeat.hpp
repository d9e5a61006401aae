#pragma once
/// \file
/// `repeat(x, batch{4}, ...)`: new dims along which x is repeated (einops
/// `repeat(x, "n d -> b n d", b=4)`), as a broadcasting view: nothing is
/// copied until the expression is assigned or evaluated.

#include <array>
#include <cstddef>
#include <string_view>
#include <utility>

#include <dimsum/core/diagnostics.hpp>
#include <dimsum/tensor/tensor.hpp>

namespace dimsum {

/// Checker: repeat adds a dim the tensor already has (or names one twice).
template <class Dim, class Dims>
struct repeat_adds_a_dim_the_tensor_already_has {
  static_assert(detail::always_false<Dim, Dims>,
                "dimsum: repeat adds a dim that the tensor already has (a dim appears once per tensor)");
};

/// The lazy repetition of E along the new dims Ds: dims (Ds..., E's dims).
template <class E, dimension... Ds>
class repeat_expr : public expression_tag {
 public:
  using value_type = value_type_of_t<E>;
  using dims = union_t<dim_list<Ds...>, dims_of_t<E>>;
  static constexpr std::size_t rank = dims::size;

  template <class X>
  repeat_expr(X&& e, const Ds&... d) : e_(std::forward<X>(e)) {
    const std::array<std::size_t, sizeof...(Ds)> added{d.value...};
    (detail::check_static_extent<Ds>(d.value, "repeat"), ...);
    const auto in = e_.extents();
    for (std::size_t i = 0; i < sizeof...(Ds); ++i) extents_[i] = added[i];
    for (std::size_t i = 0; i < in.size(); ++i) extents_[sizeof...(Ds) + i] = in[i];
    detail::checked_size<value_type, dims>(extents_, "repeat");
  }

  const std::array<std::size_t, rank>& extents() const { return extents_; }
  const auto& operand() const { return e_; }

  /// The operand's own evaluator over the root: every dim the operand lacks
  /// (the new ones among them) is read with stride 0.
  template <class Root>
  auto evaluator() const {
    return e_.template evaluator<Root>();
  }
  void eval_to(const strided<value_type, rank>& dst) const {
    auto ev = evaluator<dims>();
    detail::run_elementwise(dst, ev);
  }

 private:
  detail::closure_t<E> e_;
  std::array<std::size_t, rank> extents_{};
};

namespace detail {
// The first of Ds that E has or that an earlier D repeats, or npos.
template <class L, dimension... Ds>
constexpr std::size_t first_existing_dim() {
  constexpr std::array<std::string_view, sizeof...(Ds)> names{Ds::name.view()...};
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (find_name(L::names, names[i]) != npos) return i;
    for (std::size_t j = 0; j < i; ++j)
      if (names[j] == names[i]) return i;
  }
  return npos;
}
}  // namespace detail

/// x repeated along new dims, one argument per dim giving its extent:
/// `repeat(x, batch{4})` has dims (batch, x's dims...) and equals x at every
/// batch index. Several dims come first in the order given. A static dim
/// may be passed default-constructed (`d_head{}`: its static extent); a
/// different extent throws `shape_error`. Compile time: each new dim is
/// absent from x and named once (`repeat_adds_a_dim_the_tensor_already_has`).
/// Lazy, a broadcasting view: `y = repeat(b, batch{4}) + x` reads b four
/// times and copies nothing; assigning materialises.
template <named_expression E, dimension... Ds>
  requires(sizeof...(Ds) > 0)
auto repeat(E&& e, const Ds&... d) {
  using L = dims_of_t<E>;
  if constexpr (is_invalid_v<E>) {
    return invalid_expression{};
  } else if constexpr (constexpr std::size_t bad = detail::first_existing_dim<L, Ds...>(); bad != detail::npos) {
    using D = detail::at_t<dim_list<Ds...>, bad>;
    detail::report<repeat_adds_a_dim_the_tensor_already_has<diagnostic_name_t<D>, diagnostic_dims_t<L>>>();
    return invalid_expression{};
  } else {
    return repeat_expr<E, Ds...>(std::forward<E>(e), d...);
  }
}

}  // namespace dimsum
