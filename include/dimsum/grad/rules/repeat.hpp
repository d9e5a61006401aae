#pragma once
/// \file
/// repeat on vars, both spellings (`repeat(v, b{4})` and
/// `repeat<"h w -> hh(r h) w">(v, r{2})`): the gradient of a repetition is
/// the output's gradient summed over the new dims (tiles and repeated
/// elements included), an einsum onto the var's flat dims.
///
///     auto tiled = dimsum::repeat<"n d -> b n d">(w, b{4});

#include <array>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include <dimsum/grad/rules/elementwise.hpp>
#include <dimsum/ops/repeat.hpp>

namespace dimsum {

namespace grad::detail {
/// Records the repetition `fwd` of v: v's value seen flat as In, the
/// result as Out (extents out_ext), which has In's dims and new ones; the
/// gradient is summed over the new dims.
template <class In, class Out, class Fwd, class V>
auto record_repetition(Fwd&& fwd, const V& v, const std::array<std::size_t, Out::size>& out_ext) {
  using T = typename V::value_type;
  return record_op(std::forward<Fwd>(fwd), [v, out_ext](const auto& g, const auto&) {
    const view_for_t<const T, Out> gv(g.data(), out_ext, dimsum::detail::row_major_strides(out_ext));
    const tensor_for_t<T, In> dx = dimsum::detail::make_einsum<In>(gv);
    v.node()->accumulate_raw(dx.data());
  }, v);
}
}  // namespace grad::detail

/// x repeated along new dims, on a var; the gradient sums over them.
template <grad::detail::var_like V, dimension... Ds>
  requires(sizeof...(Ds) > 0)
auto repeat(V&& v, const Ds&... d) {
  auto fwd = dimsum::repeat(v.value(), d...);
  if constexpr (is_invalid_v<decltype(fwd)>) {
    return invalid_expression{};
  } else {
    using In = typename std::remove_cvref_t<V>::dims;
    using Out = dims_of_t<decltype(fwd)>;
    const auto out_ext = fwd.extents();
    return grad::detail::record_repetition<In, Out>(std::move(fwd), v, out_ext);
  }
}

/// einops' repeat on a var, recorded as one node; the flat dims come from
/// the same pattern resolution as the forward.
template <fixed_string S, grad::detail::var_like V, class... Dims>
auto repeat(V&& v, Dims&&... dims) {
  auto fwd = dimsum::repeat<S>(v.value(), dims...);
  if constexpr (is_invalid_v<decltype(fwd)>) {
    return invalid_expression{};
  } else {
    const auto f = detail::flats_of<S, false, true>(v.value(), std::remove_cvref_t<Dims>(dims)...);
    using F = decltype(f);
    return grad::detail::record_repetition<typename F::in, typename F::out>(std::move(fwd), v, f.out_extents);
  }
}

}  // namespace dimsum
