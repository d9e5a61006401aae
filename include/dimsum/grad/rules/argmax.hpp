#pragma once
/// \file
/// argmax and argmin of a var: int64 indices of its value, a tensor and not
/// a var (indices have no gradient; torch.argmax of a tensor that requires
/// grad gives indices that do not either).
///
///     auto next_token = dimsum::argmax<vocab>(logits);   // logits a var

#include <dimsum/grad/tape.hpp>
#include <dimsum/ops/argmax.hpp>

namespace dimsum {

/// The index along D of the largest element of a var's value (ops/argmax.hpp's
/// rules), evaluated into a tensor of std::int64_t.
template <dimension D, grad::detail::var_like V>
auto argmax(const V& v) {
  return eval(dimsum::argmax<D>(v.value()));
}
/// The index along D of the smallest element of a var's value, as argmax.
template <dimension D, grad::detail::var_like V>
auto argmin(const V& v) {
  return eval(dimsum::argmin<D>(v.value()));
}

}  // namespace dimsum
