#pragma once
/// \file
/// Splitting one dim into several and merging several into one, the
/// building blocks of grouped axes (`(nheads d_head)`) in einsum strings and
/// `rearrange`; size-1 axes (`unit_axis`, a split into no dims or a merge of
/// none); and reordering dims (`reorder`). A split, merge or reorder only
/// changes strides: a split or reorder of a tensor or view is a view (or,
/// for an rvalue tensor, the same storage), and a merge writes through split
/// strides of its destination.

#include <algorithm>
#include <array>
#include <cstddef>
#include <string>
#include <utility>

#include <dimsum/tensor/tensor.hpp>

namespace dimsum {

namespace detail {
// "1@P": a name no label can spell (labels start with a letter or '_').
template <std::size_t P>
inline constexpr auto unit_axis_name = [] {
  constexpr std::size_t digits = [] {
    std::size_t n = 1;
    for (std::size_t v = P; v >= 10; v /= 10) ++n;
    return n;
  }();
  fixed_string<digits + 3> f{};
  f.data[0] = '1';
  f.data[1] = '@';
  std::size_t v = P;
  for (std::size_t i = digits; i-- > 0; v /= 10) f.data[2 + i] = static_cast<char>('0' + v % 10);
  return f;
}();

/// Whether a dim name is a unit_axis's ("1@P").
constexpr bool is_unit_axis_name(std::string_view n) { return n.size() > 2 && n[0] == '1' && n[1] == '@'; }
}  // namespace detail

/// The size-1 axis that a `1` or `()` at position P of a pattern's output
/// adds (einops' `b c h w -> b c 1 1`): a dim of static extent 1 named
/// "1@P", a name no label can spell, so a pattern reaches it only by
/// position, as `1` again (`b c 1 1 -> b c`). Two size-1 axes at the same
/// output position are the same dim. docs/design.md, "Size-1 axes", says why.
template <std::size_t P>
struct unit_axis : dim<detail::unit_axis_name<P>, 1> {};

namespace detail {
template <class L, std::size_t Pos, std::size_t Count, class Ins>
struct splice {
  static constexpr auto prefix = [] {
    std::array<std::size_t, Pos> a{};
    for (std::size_t i = 0; i < Pos; ++i) a[i] = i;
    return a;
  }();
  static constexpr auto suffix = [] {
    std::array<std::size_t, L::size - Pos - Count> a{};
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = Pos + Count + i;
    return a;
  }();
  using type = typename concat<typename concat<select_t<L, prefix>, Ins>::type, select_t<L, suffix>>::type;
};

/// Strides of the Count dims that split one dim of stride s, row-major.
template <std::size_t Count>
std::array<std::ptrdiff_t, Count> split_strides(std::ptrdiff_t s, const std::array<std::size_t, Count>& ext) {
  std::array<std::ptrdiff_t, Count> out{};
  std::ptrdiff_t acc = s;
  for (std::size_t i = Count; i-- > 0;) {
    out[i] = acc;
    if (i > 0) acc *= static_cast<std::ptrdiff_t>(ext[i]);
  }
  return out;
}
}  // namespace detail

/// L with the Count dims from Pos replaced by the dims of list Ins.
template <class L, std::size_t Pos, std::size_t Count, class Ins>
using splice_t = typename detail::splice<L, Pos, Count, Ins>::type;

/// A lazy expression E with its dims [Pos, Pos + Count) merged into NewDim,
/// row-major (the last of them varies fastest), as `(nheads d_head)`.
template <std::size_t Pos, std::size_t Count, dimension NewDim, class E>
class merge_expr : public expression_tag {
 public:
  using value_type = value_type_of_t<E>;
  using inner_dims = dims_of_t<E>;
  using dims = splice_t<inner_dims, Pos, Count, dim_list<NewDim>>;
  static constexpr std::size_t rank = dims::size;

  template <class X>
  explicit merge_expr(X&& e) : e_(std::forward<X>(e)) {
    const auto in = e_.extents();
    for (std::size_t i = 0; i < Pos; ++i) extents_[i] = in[i];
    extents_[Pos] = detail::checked_product(in.data() + Pos, inner_dims::names.data() + Pos, Count, "merge");
    for (std::size_t i = Pos + 1; i < rank; ++i) extents_[i] = in[i + Count - 1];
    detail::check_static_extents<dims>(extents_, "merge");
  }

  const std::array<std::size_t, rank>& extents() const { return extents_; }
  const auto& operand() const { return e_; }

  template <class Root>
  auto evaluator() const {
    return detail::materializing_evaluator<Root>(*this);
  }
  void eval_to(const strided<value_type, rank>& dst) const {
    // Nothing to write; and the split strides of an empty group need not fit.
    if (std::find(dst.extents.begin(), dst.extents.end(), std::size_t(0)) != dst.extents.end()) return;
    strided<value_type, inner_dims::size> flat{dst.data, e_.extents(), {}};
    for (std::size_t i = 0; i < Pos; ++i) flat.strides[i] = dst.strides[i];
    std::array<std::size_t, Count> group{};
    for (std::size_t i = 0; i < Count; ++i) group[i] = flat.extents[Pos + i];
    const auto gs = detail::split_strides<Count>(dst.strides[Pos], group);
    for (std::size_t i = 0; i < Count; ++i) flat.strides[Pos + i] = gs[i];
    for (std::size_t i = Pos + 1; i < rank; ++i) flat.strides[i + Count - 1] = dst.strides[i];
    e_.eval_to(flat);
  }

 private:
  detail::closure_t<E> e_;
  std::array<std::size_t, rank> extents_{};
};

/// Compile-time error of split_dim and merge_dims: the dims they name by
/// position, [Pos, Pos + Count), run past the tensor's last dim.
template <class Position, class Count, class Dims>
struct split_or_merge_position_is_past_the_last_dim {
  static_assert(detail::always_false<Position, Count, Dims>,
                "dimsum: split_dim<Pos, ...> / merge_dims<Pos, Count, ...>: the dims from position Pos (0-based) run "
                "past the tensor's last dim");
};

namespace detail {
template <std::size_t Pos, class NewDims, class E>
auto split_dim_checked(E&& e, const std::array<std::size_t, NewDims::size>& ext);

/// The row-major tensor t (an rvalue) seen as a To of extents ext (the same
/// number of elements): its buffer moved, not copied.
template <class To, class From>
To reshaped(From&& t, const std::array<std::size_t, To::rank>& ext) {
  typename To::storage_type::inner_shape_type shape{};
  typename To::storage_type::inner_strides_type strides{};
  const auto rs = row_major_strides<To::rank>(ext);
  for (std::size_t i = 0; i < To::rank; ++i) {
    shape[i] = ext[i];
    strides[i] = ext[i] == 1 ? 0 : rs[i];  // xtensor's strides: 0 for a dim of extent 1
  }
  return To::adopt(typename To::storage_type(std::move(t.storage().storage()), std::move(shape), std::move(strides)));
}

/// Whether a split or merge of dims [Pos, Pos + Count) of L into Ins is
/// valid: a pure condition (one that itself failed a static_assert would be
/// a second error on clang); report_regroup reports in the failing branch.
template <class L, std::size_t Pos, std::size_t Count, class Ins>
constexpr bool regroup_ok() {
  if constexpr (Pos + Count > L::size)
    return false;
  else
    return duplicate_dim_v<splice_t<L, Pos, Count, Ins>> == npos;
}
template <class L, std::size_t Pos, std::size_t Count, class Ins>
constexpr void report_regroup() {
  if constexpr (Pos + Count > L::size)
    report<split_or_merge_position_is_past_the_last_dim<position_c<Pos>, count_c<Count>, diagnostic_dims_t<L>>>();
  else
    check_unique_dims<splice_t<L, Pos, Count, Ins>>();
}
}  // namespace detail

/// Splits dim Pos of e into the dims of list NewDims with extents `ext`
/// (their product must equal the dim's extent: `shape_error` otherwise).
/// An lvalue tensor or view gives a view; anything else is evaluated once
/// and its storage reshaped in place. Compile time: Pos is one of e's
/// dims, and the result has no dim twice.
template <std::size_t Pos, class NewDims, named_expression E>
auto split_dim(E&& e, const std::array<std::size_t, NewDims::size>& ext) {
  if constexpr (!detail::regroup_ok<dims_of_t<E>, Pos, 1, NewDims>()) {
    detail::report_regroup<dims_of_t<E>, Pos, 1, NewDims>();
    return invalid_expression{};
  } else {
    return detail::split_dim_checked<Pos, NewDims>(std::forward<E>(e), ext);
  }
}

/// e with its dims [Pos, Pos + Count) merged into NewDim, row-major (the
/// last of them varies fastest): the inverse of split_dim, as a lazy
/// `merge_expr` (`view(batch, -1, num_heads * dim_k)` after a transpose).
/// Compile time: the dims exist and the result has no dim twice. Run
/// time: the product is checked for overflow, a static NewDim against it.
template <std::size_t Pos, std::size_t Count, dimension NewDim, named_expression E>
auto merge_dims(E&& e) {
  if constexpr (!detail::regroup_ok<dims_of_t<E>, Pos, Count, dim_list<NewDim>>()) {
    detail::report_regroup<dims_of_t<E>, Pos, Count, dim_list<NewDim>>();
    return invalid_expression{};
  } else {
    return merge_expr<Pos, Count, NewDim, E>(std::forward<E>(e));
  }
}

namespace detail {
template <std::size_t Pos, class NewDims, class E>
auto split_dim_checked(E&& e, const std::array<std::size_t, NewDims::size>& ext) {
  using L = dims_of_t<E>;
  using R = splice_t<L, Pos, 1, NewDims>;
  using T = value_type_of_t<E>;
  constexpr std::size_t n = NewDims::size;
  const auto in = e.extents();
  if constexpr (n == 0) {
    if (in[Pos] != 1)
      throw shape_error("dim '" + std::string(L::names[Pos]) + "' of extent " + std::to_string(in[Pos]) +
                        " stands at a size-1 axis ('1' or '()') of the pattern: its extent must be 1");
  }
  if (detail::checked_product(ext.data(), NewDims::names.data(), n, "split") != in[Pos]) {
    std::string parts;
    for (std::size_t i = 0; i < n; ++i)
      parts += (i ? " x " : "") + std::string(NewDims::names[i]) + "=" + std::to_string(ext[i]);
    throw shape_error("split of dim '" + std::string(L::names[Pos]) + "' of extent " + std::to_string(in[Pos]) +
                      " into " + parts + ": the product differs");
  }
  std::array<std::size_t, R::size> rext{};
  for (std::size_t i = 0; i < Pos; ++i) rext[i] = in[i];
  for (std::size_t i = 0; i < n; ++i) rext[Pos + i] = ext[i];
  for (std::size_t i = Pos + 1; i < L::size; ++i) rext[i + n - 1] = in[i];
  detail::check_static_extents<R>(rext, "split");
  // The result's strides must fit even when it is empty.
  const bool empty = detail::checked_size<T, R>(rext, "split") == 0;
  // A tensor_view is split as a view even as an rvalue: it owns nothing.
  constexpr bool is_view = requires { e.data(); e.strides(); } && !requires { e.storage(); };
  if constexpr (is_view || (std::is_lvalue_reference_v<E> && requires { e.data(); e.strides(); })) {
    // An empty result reads nothing: row-major strides (which fit) will do.
    std::array<std::ptrdiff_t, R::size> rst = detail::row_major_strides<R::size>(rext);
    if (!empty) {
      const auto st = e.strides();
      for (std::size_t i = 0; i < Pos; ++i) rst[i] = st[i];
      const auto gs = detail::split_strides<n>(st[Pos], ext);
      for (std::size_t i = 0; i < n; ++i) rst[Pos + i] = gs[i];
      for (std::size_t i = Pos + 1; i < L::size; ++i) rst[i + n - 1] = st[i];
    }
    return view_for_t<std::remove_pointer_t<decltype(e.data())>, R>(e.data(), rext, rst);
  } else {
    return reshaped<tensor_for_t<T, R>>(eval(std::forward<E>(e)), rext);
  }
}
}  // namespace detail

namespace detail {
// Whether e is read in place by a view of it: a tensor_view, or an lvalue
// tensor (an rvalue tensor owns its storage, which a view cannot keep).
template <class E>
inline constexpr bool viewable_v =
    requires(const std::remove_cvref_t<E>& e) {
      e.data();
      e.strides();
    } && (std::is_lvalue_reference_v<E> || !requires(std::remove_cvref_t<E>& e) { e.storage(); });
}  // namespace detail

/// A lazy expression E with its dims in the order of Out (the same names):
/// a transpose. Element-wise parents read E by name, as if nothing moved;
/// assigned, E writes into the destination through permuted strides.
template <class Out, class E>
class reorder_expr : public expression_tag {
 public:
  using value_type = value_type_of_t<E>;
  using dims = detail::select_t<dims_of_t<E>, positions_in<Out, dims_of_t<E>>()>;
  static constexpr std::size_t rank = dims::size;

  template <class X>
  explicit reorder_expr(X&& e) : e_(std::forward<X>(e)) {}

  std::array<std::size_t, rank> extents() const { return detail::permute<dims_of_t<E>, dims>(e_.extents()); }
  const auto& operand() const { return e_; }

  template <class Root>
  auto evaluator() const {
    return e_.template evaluator<Root>();
  }
  void eval_to(const strided<value_type, rank>& dst) const {
    using In = dims_of_t<E>;
    e_.eval_to(strided<value_type, rank>{dst.data, detail::permute<dims, In>(dst.extents),
                                          detail::permute<dims, In>(dst.strides)});
  }

 private:
  detail::closure_t<E> e_;
};

/// e with its dims in the order of the list Out (the same names): e itself
/// when the order is already Out's, a view of a tensor or view, otherwise a
/// lazy `reorder_expr`.
template <class Out, named_expression E>
decltype(auto) reorder(E&& e) {
  using L = dims_of_t<E>;
  if constexpr (is_invalid_v<E>) {
    return invalid_expression{};
  } else if constexpr (!same_name_set_v<L, Out>) {
    detail::report<reorder_needs_the_same_dims<diagnostic_dims_t<Out>, diagnostic_dims_t<L>>>();
    return invalid_expression{};
  } else if constexpr (std::is_same_v<detail::select_t<L, positions_in<Out, L>()>, L>) {
    if constexpr (std::is_lvalue_reference_v<E>)
      return static_cast<E>(e);
    else
      return std::remove_cvref_t<E>(std::move(e));
  } else if constexpr (detail::viewable_v<E>) {
    using R = detail::select_t<L, positions_in<Out, L>()>;
    return view_for_t<std::remove_pointer_t<decltype(e.data())>, R>(e.data(), detail::permute<L, R>(e.extents()),
                                                                    detail::permute<L, R>(e.strides()));
  } else {
    return reorder_expr<Out, E>(std::forward<E>(e));
  }
}

/// e with the size-1 dim U inserted at position Pos: a view of a tensor or
/// view, otherwise a lazy merge of no dims into U.
template <std::size_t Pos, dimension U, named_expression E>
auto insert_unit_axis(E&& e) {
  using L = dims_of_t<E>;
  if constexpr (detail::viewable_v<E>) {
    using R = splice_t<L, Pos, 0, dim_list<U>>;
    const auto in = e.extents();
    const auto st = e.strides();
    std::array<std::size_t, R::size> ext{};
    std::array<std::ptrdiff_t, R::size> rst{};
    for (std::size_t i = 0; i < R::size; ++i) {
      ext[i] = i < Pos ? in[i] : i == Pos ? 1 : in[i - 1];
      rst[i] = i < Pos ? st[i] : i == Pos ? 0 : st[i - 1];
    }
    detail::check_static_extents<R>(ext, "size-1 axis");
    return view_for_t<std::remove_pointer_t<decltype(e.data())>, R>(e.data(), ext, rst);
  } else {
    return merge_expr<Pos, 0, U, E>(std::forward<E>(e));
  }
}

}  // namespace dimsum
