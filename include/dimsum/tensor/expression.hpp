#pragma once
/// \file
/// The protocol every named expression follows (tensors, views and lazy
/// nodes), closure semantics, and the generic element-wise evaluation loop.
///
/// A named expression E has
///   - `value_type`, `dims` (a dim_list) and `rank`;
///   - `extents()`: its run-time extents in `dims` order, checked when the
///     expression was built (so a shape error is thrown before any work);
///   - `eval_to(strided<value_type, rank>)`: writes itself into a strided
///     destination whose extents and strides are given in E's dims order
///     (the caller permutes them: names, not positions, place the data);
///   - `evaluator<Root>()`: an element-wise cursor over the index space of a
///     root expression with dims `Root`, used to fuse element-wise trees.
/// Expressions that are not element-wise (einsum, reductions, softmax)
/// materialise into a temporary when an element-wise parent asks for an
/// evaluator; assigned directly, they write straight into the destination.

#include <algorithm>
#include <array>
#include <cstdint>
#include <concepts>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include <dimsum/core/diagnostics.hpp>
#include <dimsum/core/dim_list.hpp>
#include <dimsum/core/errors.hpp>

/// Marks a parameter whose argument the result may refer to: a lazy
/// expression holds its lvalue operands by reference, and a view points
/// into its tensor. On clang this is `[[clang::lifetimebound]]`, so
/// returning an expression built from local tensors is a warning
/// (-Wreturn-stack-address, part of -Wdangling; see docs/errors.md); on
/// other compilers it is empty. Put it only on parameters that bind lvalues
/// (rvalues are moved into the expression and are safe).
#if defined(__clang__)
#define DIMSUM_LIFETIMEBOUND [[clang::lifetimebound]]
#else
#define DIMSUM_LIFETIMEBOUND
#endif

namespace dimsum {

/// Base of every named expression; `named_expression<E>` tests for it.
struct expression_tag {};

/// Anything with named dims: a tensor, a view, or a lazy expression.
template <class E>
concept named_expression = std::is_base_of_v<expression_tag, std::remove_cvref_t<E>>;

/// The dims (a dim_list) of a named expression.
template <class E>
using dims_of_t = typename std::remove_cvref_t<E>::dims;

/// The element type of a named expression.
template <class E>
using value_type_of_t = typename std::remove_cvref_t<E>::value_type;

/// Whether a named expression's values are bool (a view's `const bool`
/// included): what `where`'s condition, `masked_fill`'s mask, an attention
/// mask and `!x` must be, as torch.where's, masked_fill's and `~`'s.
template <class E>
inline constexpr bool bool_valued_v = std::is_same_v<std::remove_cv_t<value_type_of_t<E>>, bool>;

/// A scalar that can stand on one side of an element-wise operation.
template <class S>
concept scalar = std::is_arithmetic_v<std::remove_cvref_t<S>>;

/// The result of an expression that failed a compile-time shape check. It
/// absorbs every further operation, so one mistake yields one diagnostic.
struct invalid_expression : expression_tag {
  using value_type = float;
  using dims = dim_list<>;
  static constexpr std::size_t rank = 0;
};

template <class E>
inline constexpr bool is_invalid_v = std::is_same_v<std::remove_cvref_t<E>, invalid_expression>;

/// A name-free strided block of memory: what kernels see.
template <class T, std::size_t R>
struct strided {
  T* data = nullptr;
  std::array<std::size_t, R> extents{};
  std::array<std::ptrdiff_t, R> strides{};
};

namespace detail {

/// True for an argument that a lazy expression holds by reference: a
/// named expression passed as an lvalue (E deduced by a forwarding
/// reference).
template <class E>
concept held_by_reference = named_expression<E> && std::is_lvalue_reference_v<E>;

/// xtensor's closure semantics: an lvalue is held by const reference, an
/// rvalue is moved in and owned by the expression.
template <class E>
using closure_t = std::conditional_t<std::is_lvalue_reference_v<E>, const std::remove_reference_t<E>&,
                                     std::remove_cvref_t<E>>;

/// "[a=0, b=4294967296]": names (or "axis i" when `names` is null) and
/// extents, for messages.
inline std::string extents_string(const std::size_t* extents, const std::string_view* names, std::size_t n) {
  std::string s = "[";
  for (std::size_t i = 0; i < n; ++i) {
    if (i) s += ", ";
    if (names)
      s += names[i];
    else
      s += "axis " + std::to_string(i);
    s += '=';
    s += std::to_string(extents[i]);
  }
  return s + "]";
}

/// The product of n extents (0 when one is 0), checked so that the product
/// of the *non-zero* extents times `unit` fits in a ptrdiff_t: then every
/// stride, and every byte offset, of a buffer with these extents fits too,
/// even when another extent is 0 and nothing is allocated (numpy's rule).
/// Otherwise a `shape_error` from `where` names every dim and its extent.
inline std::size_t checked_product(const std::size_t* extents, const std::string_view* names, std::size_t n,
                                   std::string_view where, std::size_t unit = 1) {
  constexpr auto limit = static_cast<std::size_t>(PTRDIFF_MAX);
  std::size_t p = unit;
  bool zero = false;
  for (std::size_t i = 0; i < n; ++i) {
    if (extents[i] == 0) {
      zero = true;
    } else if (p > limit / extents[i]) {
      throw shape_error(std::string(where) + ": extents " + extents_string(extents, names, n) +
                        (unit == 1 ? std::string() : " of " + std::to_string(unit) + "-byte elements") +
                        " are larger than memory can address: their product" +
                        (std::find(extents, extents + n, std::size_t(0)) != extents + n ? " (leaving out zeros)" : "") +
                        " overflows ptrdiff_t");
    } else {
      p *= extents[i];
    }
  }
  return zero ? 0 : p / unit;
}

/// The product of n extents when no names are at hand (the element count of
/// a buffer that exists, whose extents were checked when it was built).
inline std::size_t checked_product(const std::size_t* extents, std::size_t n) {
  return checked_product(extents, nullptr, n, "product of extents");
}

/// The element count of a buffer of T with the extents `ext` of the dims
/// `L`, checked before anything is allocated (`checked_product` with
/// sizeof(T)): the byte count, ignoring zero extents, must fit in a
/// ptrdiff_t.
template <class T, class L>
std::size_t checked_size(const std::array<std::size_t, L::size>& ext, std::string_view where = "tensor") {
  return checked_product(ext.data(), L::names.data(), L::size, where, sizeof(T));
}

/// Row-major (C order) strides for the given extents.
template <std::size_t R>
std::array<std::ptrdiff_t, R> row_major_strides(const std::array<std::size_t, R>& ext) {
  std::array<std::ptrdiff_t, R> s{};
  std::ptrdiff_t acc = 1;
  for (std::size_t i = R; i-- > 0;) {
    s[i] = acc;
    acc *= static_cast<std::ptrdiff_t>(ext[i] == 0 ? 1 : ext[i]);
  }
  return s;
}

/// Checks that two extents of the dim `name` agree; `where` says which
/// operation compared them.
inline void check_extent(std::string_view name, std::size_t a, std::size_t b, const char* where) {
  if (a != b)
    throw shape_error(std::string(where) + ": dim '" + std::string(name) + "' has extent " + std::to_string(a) +
                      " on the left but " + std::to_string(b) + " on the right");
}

/// Checks a run-time extent against a dim's static extent.
template <class D>
void check_static_extent(std::size_t e, const char* where) {
  if constexpr (D::is_static) {
    if (e != D::static_extent)
      throw shape_error(std::string(where) + ": dim '" + std::string(D::name.view()) + "' is static with extent " +
                        std::to_string(D::static_extent) + " but got extent " + std::to_string(e));
  }
}

template <class L, std::size_t... I>
void check_static_extents_impl([[maybe_unused]] const std::array<std::size_t, L::size>& e, [[maybe_unused]] const char* where,
                               std::index_sequence<I...>) {
  (check_static_extent<at_t<L, I>>(e[I], where), ...);
}
/// Checks every static dim of L against the extents e (in L's order).
template <class L>
void check_static_extents(const std::array<std::size_t, L::size>& e, const char* where) {
  check_static_extents_impl<L>(e, where, std::make_index_sequence<L::size>{});
}

/// Strides of a source laid out in dims `Src`, seen from a root with dims
/// `Root`: 0 for root dims the source lacks (broadcast).
template <class Root, class Src>
std::array<std::ptrdiff_t, Root::size> strides_in_root(const std::array<std::ptrdiff_t, Src::size>& s) {
  constexpr auto pos = positions_in<Root, Src>();
  std::array<std::ptrdiff_t, Root::size> out{};
  for (std::size_t i = 0; i < Root::size; ++i) out[i] = pos[i] == npos ? 0 : s[pos[i]];
  return out;
}

/// Element-wise cursor over a strided leaf. `seek` takes the root
/// multi-index (its innermost entry is ignored); `operator[]` the innermost.
template <class T, std::size_t R>
struct leaf_evaluator {
  const T* data;
  std::array<std::ptrdiff_t, R> strides;
  const T* base = nullptr;

  void seek(const std::size_t* idx) {
    const T* p = data;
    for (std::size_t i = 0; i + 1 < R; ++i) p += static_cast<std::ptrdiff_t>(idx[i]) * strides[i];
    base = p;
  }
  T operator[](std::size_t j) const {
    if constexpr (R == 0)
      return *base;
    else
      return base[static_cast<std::ptrdiff_t>(j) * strides[R - 1]];
  }
  /// Whether one step along root dim d is `next` steps along the innermost
  /// dim (so the dims from d in walk memory as one).
  bool merges(std::size_t d, std::size_t next) const {
    return strides[d] == strides[R - 1] * static_cast<std::ptrdiff_t>(next);
  }
};

/// A leaf evaluator that owns the temporary it reads (a materialised
/// non-element-wise child).
template <class Tensor, class Root>
struct owning_evaluator {
  Tensor tmp;
  leaf_evaluator<typename Tensor::value_type, Root::size> ev;

  explicit owning_evaluator(Tensor&& t)
      : tmp(std::move(t)),
        ev{tmp.data(), strides_in_root<Root, typename Tensor::dims>(tmp.strides())} {}
  owning_evaluator(owning_evaluator&& o) noexcept
      : tmp(std::move(o.tmp)), ev{tmp.data(), o.ev.strides} {}
  void seek(const std::size_t* idx) { ev.seek(idx); }
  auto operator[](std::size_t j) const { return ev[j]; }
  bool merges(std::size_t d, std::size_t next) const { return ev.merges(d, next); }
};

/// Calls f(idx, row) for every innermost row of dst's extents, in row-major
/// order: idx is the multi-index (its last entry 0), row points at the row's
/// first element. Nothing when an extent is 0. Requires R >= 1.
template <class T, std::size_t R, class F>
void for_each_row(const strided<T, R>& dst, F&& f) {
  static_assert(R >= 1);
  const auto& ext = dst.extents;
  for (std::size_t i = 0; i < R; ++i)
    if (ext[i] == 0) return;
  std::array<std::size_t, R> idx{};
  while (true) {
    T* row = dst.data;
    for (std::size_t i = 0; i + 1 < R; ++i) row += static_cast<std::ptrdiff_t>(idx[i]) * dst.strides[i];
    f(static_cast<const std::size_t*>(idx.data()), row);
    // Odometer over the outer dims.
    std::size_t d = R - 1;
    while (true) {
      if (d == 0) return;
      --d;
      if (++idx[d] < ext[d]) break;
      idx[d] = 0;
    }
  }
}

/// An evaluator that can say whether trailing dims merge into one row.
template <class E>
concept merging_evaluator = requires(const E& e, std::size_t x) {
  { e.merges(x, x) } -> std::convertible_to<bool>;
};

/// A row callback that does nothing.
struct no_row_fn {
  template <class T>
  void operator()(T*) const noexcept {}
};

/// Runs an element-wise evaluator over dst's extents and stores each value
/// into `dst` (all in the root's dims order). `row_fn(p)` is called after
/// each innermost row is written, p pointing at its first element, while
/// the row is still in cache (softmax finishes rows this way).
///
/// Without a row callback, trailing dims that every operand and dst walk as
/// one (a bias (nheads, d_head) over (batch, posn, nheads, d_head) is one
/// row of nheads * d_head per (batch, posn)) become one longer row, when
/// every evaluator can tell (`merges`; evaluators that read the index, like
/// causal_mask's, cannot).
template <class T, std::size_t R, class Ev, class RowFn = no_row_fn>
void run_elementwise(const strided<T, R>& dst_in, Ev& ev, RowFn&& row_fn = {}) {
  if constexpr (R == 0) {
    ev.seek(nullptr);
    *dst_in.data = static_cast<T>(ev[0]);
  } else {
    strided<T, R> dst = dst_in;
    if constexpr (std::is_same_v<std::remove_cvref_t<RowFn>, no_row_fn> && merging_evaluator<Ev>) {
      for (std::size_t d = R - 1; d-- > 0;) {
        const std::size_t next = dst.extents[R - 1];
        if (dst.strides[d] != dst.strides[R - 1] * static_cast<std::ptrdiff_t>(next) || !ev.merges(d, next)) break;
        dst.extents[R - 1] *= dst.extents[d];
        dst.extents[d] = dst.extents[d] == 0 ? 0 : 1;
      }
    }
    const std::size_t inner = dst.extents[R - 1];
    const std::ptrdiff_t ds = dst.strides[R - 1];
    // A copy from a leaf of the same type (tensor assignment, views, a bias
    // fill) whose row is contiguous or broadcast runs as std::copy / fill.
    auto block_copy = [&](T* out) {
      if constexpr (std::is_same_v<Ev, leaf_evaluator<T, R>>) {
        if (ds == 1 && ev.strides[R - 1] == 1) return std::copy_n(ev.base, inner, out), true;
        if (ds == 1 && ev.strides[R - 1] == 0) return std::fill_n(out, inner, *ev.base), true;
      }
      return false;
    };
    for_each_row(dst, [&](const std::size_t* idx, T* out) {
      ev.seek(idx);
      if (block_copy(out)) {
      } else if (ds == 1) {
        for (std::size_t j = 0; j < inner; ++j) out[j] = static_cast<T>(ev[j]);
      } else {
        for (std::size_t j = 0; j < inner; ++j) out[static_cast<std::ptrdiff_t>(j) * ds] = static_cast<T>(ev[j]);
      }
      row_fn(out);
    });
  }
}

/// Permutes an array given in dims `From` order into dims `To` order
/// (same name set).
template <class From, class To, class X>
std::array<X, To::size> permute(const std::array<X, From::size>& a) {
  constexpr auto pos = positions_in<To, From>();
  std::array<X, To::size> out{};
  for (std::size_t i = 0; i < To::size; ++i) out[i] = a[pos[i]];
  return out;
}

}  // namespace detail
}  // namespace dimsum
