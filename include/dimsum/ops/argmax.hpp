#pragma once
/// \file
/// `argmax<D>(t)` and `argmin<D>(t)`: the index along the named dim D of
/// the largest (smallest) element, as torch.argmax(t, dim) and
/// torch.argmin(t, dim): int64 indices with t's dims without D, the first
/// index on ties, and a NaN counts as larger (smaller) than everything, so
/// the first NaN wins. A dim t lacks is a compile error; D of extent 0
/// throws `shape_error` (PyTorch raises too).

#include <cstddef>
#include <cstdint>
#include <string>

#include <dimsum/ops/reduce.hpp>

namespace dimsum {

namespace reductions {
/// The position of the first extremum of n > 0 elements (Max: the largest,
/// else the smallest); the first NaN wins over every number.
template <bool Max>
struct arg_extremum {
  template <class T>
  using result_t = std::int64_t;
  template <class T, class Read>
  static std::int64_t reduce(std::size_t n, Read&& read) {
    std::size_t best = 0;
    T b = read(0);
    if (b != b) return 0;
    for (std::size_t i = 1; i < n; ++i) {
      const T v = read(i);
      if (v != v) return static_cast<std::int64_t>(i);
      if (Max ? b < v : v < b) {
        b = v;
        best = i;
      }
    }
    return static_cast<std::int64_t>(best);
  }
};
/// argmax as a reduction (`reduction_expr<argmax, dim_list<D>, E>`).
struct argmax : arg_extremum<true> {
  static constexpr const char* name = "argmax";
};
/// argmin as a reduction.
struct argmin : arg_extremum<false> {
  static constexpr const char* name = "argmin";
};
}  // namespace reductions

namespace detail {
template <class Op, dimension D, class E>
auto arg_extremum_impl(E&& e) {
  using L = dims_of_t<E>;
  if constexpr (!is_invalid_v<E> && contains_v<L, D>) {
    constexpr std::size_t p = index_of<L>(D::name.view());
    if (e.extents()[p] == 0)
      throw shape_error(std::string(Op::name) + " over dim '" + std::string(D::name.view()) +
                        "' of extent 0 has no answer; PyTorch raises here too");
  }
  return make_reduction_node<functor_reduction<Op>, E, D>(std::forward<E>(e));
}
}  // namespace detail

/// The index along D of the largest element, torch.argmax(t, dim):
/// `argmax<vocab>(logits)` gives int64 token ids over the other dims. Ties
/// give the first index; a NaN is the largest (the first NaN wins). D must
/// be a dim of t (`reduction_dim_is_not_a_dim_of_the_tensor`) and have a
/// nonzero extent (`shape_error`). Lazy, like the reductions.
template <dimension D, named_expression E>
auto argmax(E&& e) {
  return detail::arg_extremum_impl<reductions::argmax, D>(std::forward<E>(e));
}
/// The index along D of the smallest element, torch.argmin(t, dim); rules
/// as for argmax (a NaN is the smallest).
template <dimension D, named_expression E>
auto argmin(E&& e) {
  return detail::arg_extremum_impl<reductions::argmin, D>(std::forward<E>(e));
}

}  // namespace dimsum
