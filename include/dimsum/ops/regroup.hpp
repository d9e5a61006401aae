#pragma once
/// \file
/// Splitting one dim into several and merging several into one, the
/// building blocks of grouped axes (`(nheads d_head)`) in einsum strings and
/// `rearrange`. A split or merge only changes strides: a split of a tensor
/// or view is a view (or, for an rvalue, the same storage), and a merge
/// writes through split strides of its destination.

#include <algorithm>
#include <array>
#include <cstddef>
#include <string>
#include <utility>

#include <dimsum/tensor/tensor.hpp>

namespace dimsum {

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

/// Splits dim Pos of e into the dims of list NewDims with extents `ext`
/// (their product must equal the dim's extent: `shape_error` otherwise).
/// An lvalue tensor or view gives a view; anything else is evaluated once
/// and its storage reshaped in place.
template <std::size_t Pos, class NewDims, named_expression E>
auto split_dim(E&& e, const std::array<std::size_t, NewDims::size>& ext) {
  using L = dims_of_t<E>;
  using R = splice_t<L, Pos, 1, NewDims>;
  using T = value_type_of_t<E>;
  constexpr std::size_t n = NewDims::size;
  const auto in = e.extents();
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
    auto t = eval(std::forward<E>(e));
    using RT = tensor_for_t<T, R>;
    typename RT::storage_type::inner_shape_type shape{};
    for (std::size_t i = 0; i < R::size; ++i) shape[i] = rext[i];
    typename RT::storage_type::inner_strides_type strides{};
    const auto rs = detail::row_major_strides<R::size>(rext);
    for (std::size_t i = 0; i < R::size; ++i) strides[i] = rext[i] == 1 ? 0 : rs[i];
    return RT::adopt(typename RT::storage_type(std::move(t.storage().storage()), std::move(shape), std::move(strides)));
  }
}

}  // namespace dimsum
