#pragma once
/// \file
/// einops' repeat, in two spellings:
///
///     repeat(x, batch{4})                                // new dims first: (batch, x's dims...)
///     repeat<"n d -> b n d">(x, b{4})                    // a pattern: new dims anywhere
///     repeat<"h w -> hh(r h) w">(x, r{2})                // tiling inside a group (np.tile)
///     repeat<"h w -> hh(h r) w">(x, r{2})                // each element r times (repeat_interleave)
///     repeat<"() n d -> b n d">(x, b{4})                 // a size-1 axis replaced by a new dim
///
/// Broadcasting views, not copies, until assignment: a new dim is read
/// with stride 0 (a `tensor_view` of a tensor or view, a lazy node
/// otherwise); a group that merges a new dim with others is written by the
/// assignment straight into its destination (used inside a larger
/// element-wise expression, it is evaluated once into a temporary).

#include <array>
#include <cstddef>
#include <string_view>
#include <utility>

#include <dimsum/ops/detail/pattern_checks.hpp>
#include <dimsum/ops/einsum.hpp>
#include <dimsum/ops/regroup.hpp>
#include <dimsum/tensor/tensor.hpp>

namespace dimsum {

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

namespace detail {
/// repeat: the output's flat dims that the operand lacks are new, with
/// extents from the dims passed after it; the operand is read with stride
/// 0 along them, in the output's order.
struct repeat_mode {
  static constexpr bool single_operand = true;
  static constexpr bool keeps_every_dim = true;
  static constexpr bool adds_dims = true;
  static constexpr bool ellipsis_on_the_left_only = false;
  static constexpr bool adds_size_1_axes = true;
  template <class Label>
  static void report_dropped() {
    report<repeat_drops_a_dim<Label>>();
  }

  template <class FlatOut, class Extras, class Flat>
  auto apply(const Extras& extras, Flat&& flat) const {
    using In = dims_of_t<Flat>;
    using New = difference_t<In, FlatOut>;
    if constexpr (viewable_v<Flat>) {
      using T = value_type_of_t<Flat>;
      const auto in_ext = flat.extents();
      const auto in_st = flat.strides();
      std::array<std::size_t, FlatOut::size> ext{};
      std::array<std::ptrdiff_t, FlatOut::size> st{};
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        (
            [&] {
              using D = at_t<FlatOut, I>;
              constexpr std::size_t p = find_name(In::names, D::name.view());
              if constexpr (p == npos) {
                ext[I] = extra_dim_value<D>(extras).value;
              } else {
                ext[I] = in_ext[p];
                st[I] = in_st[p];
              }
            }(),
            ...);
      }(std::make_index_sequence<FlatOut::size>{});
      checked_size<T, FlatOut>(ext, "repeat");
      return view_for_t<const T, FlatOut>(flat.data(), ext, st);
    } else {
      return [&]<class... Ds>(dim_list<Ds...>*) {
        return reorder<FlatOut>(repeat_expr<Flat, Ds...>(std::forward<Flat>(flat), extra_dim_value<Ds>(extras)...));
      }(static_cast<New*>(nullptr));
    }
  }
};
}  // namespace detail

/// einops' repeat with a pattern: `repeat<"h w -> h w c">(x, c{3})`. Each
/// output label the input lacks is a new dim whose extent is given by a
/// dim passed after the tensor; inside a group it tiles (`hh(r h)`: the
/// whole h, r times) or repeats each element (`hh(h r)`). Input groups
/// split, `1`/`()` are size-1 axes (dropped on the left, added on the
/// right), and `...` stands for the other dims by name. A list of tensors
/// may stand for the tensor, as in rearrange. Compile time: every input
/// dim is kept (`repeat_drops_a_dim`), each new dim's extent is given
/// (`repeat_new_dim_has_no_extent`), and no extent is given for a dim the
/// tensor has (`repeat_adds_a_dim_the_tensor_already_has`). A broadcasting
/// view (see the file comment).
template <fixed_string S, class... Args>
  requires(sizeof...(Args) > 0)
auto repeat(Args&&... args) {
  return detail::pattern_args<S>(detail::repeat_mode{}, std::forward<Args>(args)...);
}

}  // namespace dimsum
