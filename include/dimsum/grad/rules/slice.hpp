#pragma once
/// \file
/// select, slice, stack and concat on vars. The gradient of a selection
/// or slice is the output's gradient placed back at its index or range
/// (zeros elsewhere); that of stack or concat is the matching piece of the
/// output's gradient for each part.
///
///     auto last = dimsum::select<posn>(h, n - 1);   // var without posn

#include <cstddef>
#include <string>
#include <vector>

#include <dimsum/grad/rules/elementwise.hpp>
#include <dimsum/ops/slice.hpp>
#include <dimsum/ops/stack.hpp>

namespace dimsum::grad::detail {
/// g added into the gradient of v at [begin, begin + n) along D (Keep:
/// whether g still has D, as for slice, or lacks it, as for select).
template <dimension D, bool Keep, class V, class G>
void place(const V& v, const G& g, std::size_t begin, std::size_t n) {
  if (!v.requires_grad()) return;
  auto& node = *v.node();
  node.ensure_grad();
  // Added into a view of the gradient, by name (tensor_view's +=).
  dimsum::detail::restrict_leaf<D, Keep>(node.grad, begin, n) += g;
}
}  // namespace dimsum::grad::detail

namespace dimsum {

/// Index i along D of a var; the result lacks D. The gradient goes back to
/// index i.
template <dimension D, grad::detail::var_like V>
auto select(V&& v, std::size_t i) {
  return grad::detail::record_op(dimsum::select<D>(v.value(), i), [v, i](const auto& g, const auto&) {
    grad::detail::place<D, false>(v, g, i, 1);
  }, v);
}

/// The range [begin, end) along D of a var. The gradient goes back to that
/// range.
template <dimension D, grad::detail::var_like V>
auto slice(V&& v, std::size_t begin, std::size_t end) {
  return grad::detail::record_op(dimsum::slice<D>(v.value(), begin, end), [v, begin, end](const auto& g, const auto&) {
    grad::detail::place<D, true>(v, g, begin, end - begin);
  }, v);
}

namespace grad::detail {
/// Records `join` (stack or concat) of the parts' values; `rule(g, parts)`
/// sends each part its piece of the gradient.
template <class T, dimension... Ds, class Join, class Rule>
auto record_join(const std::vector<var<T, Ds...>>& parts, Join join, Rule rule) {
  std::vector<tensor<T, Ds...>> values;
  tape* t = nullptr;
  bool rg = false;
  for (const auto& p : parts) {
    values.push_back(p.value());
    t = common_tape({t, p.owner()});
    rg = rg || p.requires_grad();
  }
  auto fwd = join(values);
  if constexpr (is_invalid_v<decltype(fwd)>)
    return invalid_expression{};
  else
    return record(t, std::move(fwd), rg, [parts, rule](const auto& g, const auto&) { rule(g, parts); });
}
}  // namespace grad::detail

/// Stacks vars of equal dims along a new dim D (first in the result, as for
/// tensors); part j's gradient is select<D>(g, j).
template <dimension D, class T, dimension... Ds>
auto stack(const std::vector<grad::var<T, Ds...>>& parts) {
  return grad::detail::record_join(
      parts, [](const auto& values) { return dimsum::stack<D>(values); },
      [](const auto& g, const auto& ps) {
        for (std::size_t j = 0; j < ps.size(); ++j)
          if (ps[j].requires_grad()) ps[j].node()->accumulate(dimsum::select<D>(g, j));
      });
}

/// Concatenates vars along their dim D; part j's gradient is its range of g.
template <dimension D, class T, dimension... Ds>
auto concat(const std::vector<grad::var<T, Ds...>>& parts) {
  return grad::detail::record_join(
      parts, [](const auto& values) { return dimsum::concat<D>(values); },
      [](const auto& g, const auto& ps) {
        std::size_t begin = 0;
        for (const auto& p : ps) {
          const std::size_t n = p.template extent<D>();
          if (p.requires_grad()) p.node()->accumulate(dimsum::slice<D>(g, begin, begin + n));
          begin += n;
        }
      });
}

}  // namespace dimsum
