#pragma once
/// \file
/// `rename<From, To>(t)`: the same data with dim From called To. Free for
/// tensors: a view for an lvalue, the same storage for an rvalue. A renamed
/// lazy expression is a relabelled node, assigned directly; used inside an
/// element-wise expression it is evaluated once into a temporary. Self-attention uses it to tell
/// query positions from key positions.

#include <array>
#include <cstddef>
#include <utility>

#include <dimsum/ops/elementwise.hpp>

namespace dimsum {

namespace detail {
template <class L, class From, class To>
struct replace_dim;
template <class... Ds, class From, class To>
struct replace_dim<dim_list<Ds...>, From, To> {
  using type = dim_list<std::conditional_t<Ds::name.view() == From::name.view(), To, Ds>...>;
};
}  // namespace detail

/// L with the dim named like From replaced by To.
template <class L, dimension From, dimension To>
using replace_dim_t = typename detail::replace_dim<L, From, To>::type;

/// A lazy expression E with dim From called To.
template <dimension From, dimension To, class E>
class rename_expr : public expression_tag {
 public:
  using value_type = value_type_of_t<E>;
  using dims = replace_dim_t<dims_of_t<E>, From, To>;
  static constexpr std::size_t rank = dims::size;

  template <class X>
  explicit rename_expr(X&& e) : e_(std::forward<X>(e)) {
    detail::check_static_extents<dims>(e_.extents(), "rename");
  }
  auto extents() const { return e_.extents(); }
  const auto& operand() const { return e_; }

  // An element-wise parent reads the inner result under the new name. The
  // root may hold From as well (`rename<posn, q_posn>(a) + b` with b over
  // posn), so the inner expression cannot be evaluated against the root with
  // the name swapped back: it is materialised first.
  template <class Root>
  auto evaluator() const {
    return detail::materializing_evaluator<Root>(*this);
  }
  void eval_to(const strided<value_type, rank>& dst) const { e_.eval_to(dst); }

 private:
  detail::closure_t<E> e_;
};

/// Renames dim From to To: `rename<posn, k_posn>(k)`. From must be a dim of
/// t and To must not be (compile errors); if both have static extents they
/// must agree, and a static To is checked against t's extent at run time.
namespace detail {
template <dimension From, dimension To, class E>
auto rename_impl(E&& e) {
  using L = dims_of_t<E>;
  using X = std::remove_cvref_t<E>;
  if constexpr (is_invalid_v<E>) {
    return invalid_expression{};
  } else if constexpr (!contains_v<L, From>) {
    detail::report<rename_source_is_not_a_dim_of_the_tensor<diagnostic_name_t<From>, diagnostic_dims_t<L>>>();
    return invalid_expression{};
  } else if constexpr (From::name.view() != To::name.view() && contains_v<L, To>) {
    detail::report<rename_target_is_already_a_dim_of_the_tensor<diagnostic_name_t<To>, diagnostic_dims_t<L>>>();
    return invalid_expression{};
  } else if constexpr (!detail::static_extents_agree_v<dim_list<detail::at_t<L, index_of<L>(From::name.view())>>,
                                                         dim_list<dimsum::dim<From::name, To::static_extent>>>) {
    detail::report<rename_target_has_another_static_extent<
        diagnostic_name_t<From>, extent_c<L::static_extents[index_of<L>(From::name.view())]>, diagnostic_name_t<To>,
        extent_c<To::static_extent>>>();
    return invalid_expression{};
  } else {
    using R = replace_dim_t<L, From, To>;
    if constexpr (requires { e.data(); e.strides(); }) {
      detail::check_static_extents<R>(e.extents(), "rename");
      if constexpr (std::is_lvalue_reference_v<E>) {
        using T = std::remove_pointer_t<decltype(e.data())>;
        return view_for_t<T, R>(e.data(), e.extents(), e.strides());
      } else if constexpr (requires { e.storage(); }) {
        return tensor_for_t<value_type_of_t<X>, R>::adopt(std::move(e.storage()));
      } else {
        return view_for_t<std::remove_pointer_t<decltype(e.data())>, R>(e.data(), e.extents(), e.strides());
      }
    } else {
      return rename_expr<From, To, E>(std::forward<E>(e));
    }
  }
}
}  // namespace detail

/// Renames dim From to To (see above). An lvalue operand is held by
/// reference (DIMSUM_LIFETIMEBOUND: clang warns when the lazy result
/// outlives it), an rvalue is moved in.
template <dimension From, dimension To, named_expression E>
auto rename(E& e DIMSUM_LIFETIMEBOUND) {
  return detail::rename_impl<From, To>(e);
}
template <dimension From, dimension To, named_expression E>
  requires(!std::is_lvalue_reference_v<E>)
auto rename(E&& e) {
  return detail::rename_impl<From, To>(std::forward<E>(e));
}

}  // namespace dimsum
