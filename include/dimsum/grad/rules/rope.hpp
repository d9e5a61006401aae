#pragma once
/// \file
/// rope on vars: `rope<posn, d_head>(q, rope_pairs::half_split)`. The
/// rotation is orthogonal, so the gradient is g rotated back (by -angle).

#include <cstddef>
#include <utility>

#include <dimsum/grad/rules/elementwise.hpp>
#include <dimsum/ops/rope.hpp>

namespace dimsum {

/// Rotary position embedding of a var (same checks and arguments as on a
/// tensor); the gradient is rope<Pos, Feat> of g by the opposite angles.
template <dimension Pos, dimension Feat, grad::detail::var_like V>
auto rope(V&& v, rope_pairs pairs, double base = 10000.0, std::size_t offset = 0) {
  using X = std::remove_cvref_t<V>;
  using T = typename X::value_type;
  using L = typename X::dims;
  return detail::rope_checked<Pos, Feat, L>([&] {
    tensor_for_t<T, L> out = v.value();
    detail::rope_apply<Pos, Feat, T, L>(out, pairs, base, offset, false);
    return grad::detail::record_op(std::move(out), [v, pairs, base, offset](const auto& g, const auto&) {
      tensor_for_t<T, L> back = g;
      detail::rope_apply<Pos, Feat, T, L>(back, pairs, base, offset, true);
      v.node()->accumulate(back);
    }, v);
  });
}

}  // namespace dimsum
