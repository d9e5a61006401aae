#pragma once
/// \file
/// rename on vars: `rename<posn, q_posn>(q)`; the gradient is renamed back.

#include <dimsum/grad/rules/elementwise.hpp>
#include <dimsum/ops/rename.hpp>

namespace dimsum {

/// Dim From of a var renamed To; the gradient is rename<To, From>(g).
template <dimension From, dimension To, grad::detail::var_like V>
auto rename(V&& v) {
  return grad::detail::record_op(dimsum::rename<From, To>(v.value()), [v](const auto& g, const auto&) {
    v.node()->accumulate(dimsum::rename<To, From>(g));
  }, v);
}

}  // namespace dimsum
