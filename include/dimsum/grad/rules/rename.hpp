#pragma once
/// \file
/// rename on vars: `rename<posn, q_posn>(q)`; the gradient is renamed back.

#include <type_traits>

#include <dimsum/grad/rules/elementwise.hpp>
#include <dimsum/ops/rename.hpp>

namespace dimsum {

/// Dim From of a var renamed To; the gradient is rename<To, From>(g): g's
/// buffer itself, which has the same layout.
template <dimension From, dimension To, grad::detail::var_like V>
auto rename(V&& v) {
  return grad::detail::record_op(dimsum::rename<From, To>(v.value()), [v](auto& g, const auto&) {
    using VT = typename std::remove_cvref_t<V>::tensor_type;
    if constexpr (std::is_same_v<typename VT::storage_type, typename std::remove_cvref_t<decltype(g)>::storage_type>)
      v.node()->accumulate(VT::adopt(std::move(g.storage())));
    else
      v.node()->accumulate(dimsum::rename<To, From>(g));
  }, v);
}

}  // namespace dimsum
