#pragma once
/// \file
/// Indexing by name: `select<D>(t, i)` takes index i along D and drops D
/// (PyTorch's `t[i]` on that dim); `slice<D>(t, begin, end)` keeps D with the
/// extent end - begin (`t[begin:end]`). Both are bounds-checked at run time
/// (`shape_error`). On a tensor or view they give a view of the same memory;
/// on a lazy expression they evaluate it first and return a tensor.

#include <array>
#include <concepts>
#include <cstddef>
#include <string>
#include <utility>

#include <dimsum/tensor/tensor.hpp>

namespace dimsum {

namespace detail {
// Reports D missing from L. Called in the failing branch of
// `if constexpr (!contains_v<L, D>)`, never as the condition: clang counts a
// condition whose evaluation fails a static_assert as a second error.
template <class L, dimension D>
constexpr void report_dim_absent() {
  report<argument_is_not_a_dim_of_the_tensor<diagnostic_name_t<D>, diagnostic_dims_t<L>>>();
}

// Views e (a tensor or view) with dim p restricted to [begin, begin + n);
// Keep says whether the dim stays.
template <dimension D, bool Keep, class E>
auto restrict_leaf(E&& e, std::size_t begin, std::size_t n) {
  using L = dims_of_t<E>;
  constexpr std::size_t p = index_of<L>(D::name.view());
  // An empty result reads nothing, and an empty operand may have no memory
  // (a null data pointer): add no offset then.
  bool empty = n == 0;
  for (std::size_t i = 0; i < L::size; ++i) empty = empty || (i != p && e.extents()[i] == 0);
  auto* data = empty ? e.data() : e.data() + static_cast<std::ptrdiff_t>(begin) * e.strides()[p];
  using T = std::remove_pointer_t<decltype(e.data())>;
  if constexpr (Keep) {
    auto ext = e.extents();
    ext[p] = n;
    return view_for_t<T, L>(data, ext, e.strides());
  } else {
    using R = without_t<L, dim_list<D>>;
    std::array<std::size_t, R::size> ext{};
    std::array<std::ptrdiff_t, R::size> st{};
    for (std::size_t i = 0, k = 0; i < L::size; ++i)
      if (i != p) {
        ext[k] = e.extents()[i];
        st[k++] = e.strides()[i];
      }
    return view_for_t<T, R>(data, ext, st);
  }
}

template <class E>
inline constexpr bool is_viewable_v = requires(E e) {
  e.data();
  e.strides();
} && (std::is_lvalue_reference_v<E> || !requires(E e) { e.storage(); });
}  // namespace detail

namespace detail {
template <dimension D, class E, class I>
auto select_impl(E&& e, I index) {
  using L = dims_of_t<E>;
  if constexpr (is_invalid_v<E>) {
    return invalid_expression{};
  } else if constexpr (!contains_v<L, D>) {
    report_dim_absent<L, D>();
    return invalid_expression{};
  } else {
    // A constant position: g++ 12 at -O2 otherwise sees the npos branch of
    // index_of and warns (-Warray-bounds) where the slice is inlined.
    constexpr std::size_t p = index_of<L>(D::name.view());
    const std::size_t n = e.extents()[p];
    if (std::cmp_less(index, 0) || std::cmp_greater_equal(index, n))
      throw shape_error("select: index " + index_string(index) + " is out of range for dim '" +
                        std::string(D::name.view()) + "' of extent " + std::to_string(n));
    const auto i = static_cast<std::size_t>(index);
    if constexpr (is_viewable_v<E>) {
      return restrict_leaf<D, false>(e, i, 1);
    } else {
      auto t = eval(std::forward<E>(e));
      return eval(restrict_leaf<D, false>(t, i, 1));
    }
  }
}

template <dimension D, class E, class B, class En>
auto slice_impl(E&& e, B first, En last) {
  using L = dims_of_t<E>;
  if constexpr (is_invalid_v<E>) {
    return invalid_expression{};
  } else if constexpr (!contains_v<L, D>) {
    report_dim_absent<L, D>();
    return invalid_expression{};
  } else {
    // A constant position: g++ 12 at -O2 otherwise sees the npos branch of
    // index_of and warns (-Warray-bounds) where the slice is inlined.
    constexpr std::size_t p = index_of<L>(D::name.view());
    const std::size_t n = e.extents()[p];
    if (std::cmp_less(first, 0) || std::cmp_greater(first, last) || std::cmp_greater(last, n))
      throw shape_error("slice: range [" + index_string(first) + ", " + index_string(last) +
                        ") is out of range for dim '" + std::string(D::name.view()) + "' of extent " +
                        std::to_string(n));
    const auto begin = static_cast<std::size_t>(first), end = static_cast<std::size_t>(last);
    if constexpr (is_viewable_v<E>) {
      return restrict_leaf<D, true>(e, begin, end - begin);
    } else {
      auto t = eval(std::forward<E>(e));
      return eval(restrict_leaf<D, true>(t, begin, end - begin));
    }
  }
}

}  // namespace detail

/// Index i along dim D; the result lacks D. `select<token>(inputs, 1)` is
/// seed 004's `inputs[1]`. Any integer type; a negative index is out of
/// range (and printed as negative), as is one at or past the extent. An
/// lvalue tensor or view gives a view of its memory (on clang, returning
/// one of a local tensor is a -Wdangling warning); an rvalue tensor or a
/// lazy expression gives a tensor.
template <dimension D, named_expression E, std::integral I>
  requires detail::is_viewable_v<E&>
auto select(E& e DIMSUM_LIFETIMEBOUND, I index) {
  return detail::select_impl<D>(e, index);
}
template <dimension D, named_expression E, std::integral I>
  requires(!(std::is_lvalue_reference_v<E> && detail::is_viewable_v<E>))
auto select(E&& e, I index) {
  return detail::select_impl<D>(std::forward<E>(e), index);
}

/// The range [begin, end) along dim D; D stays, with extent end - begin
/// (0 <= begin <= end <= extent; negative bounds are errors, not counted
/// from the end). Views and tensors as for `select`.
/// `slice<chr>(data, i, i + block_size)` is seed 001's `data[i:i+block_size]`.
template <dimension D, named_expression E, std::integral B, std::integral En>
  requires detail::is_viewable_v<E&>
auto slice(E& e DIMSUM_LIFETIMEBOUND, B begin, En end) {
  return detail::slice_impl<D>(e, begin, end);
}
template <dimension D, named_expression E, std::integral B, std::integral En>
  requires(!(std::is_lvalue_reference_v<E> && detail::is_viewable_v<E>))
auto slice(E&& e, B begin, En end) {
  return detail::slice_impl<D>(std::forward<E>(e), begin, end);
}

}  // namespace dimsum
