#pragma once
/// \file
/// split_dim and merge_dims on vars: a split or merge of row-major dims is
/// a reshape (the same elements in the same order), so the gradient is the
/// output's gradient reshaped back, its buffer handed on without a copy
/// when the input has no gradient yet.
///
///     auto heads = dimsum::split_dim<2, dim_list<nheads, d_head>>(q, {8, 64});   // q: var (batch, posn, features)
///     auto concat = dimsum::merge_dims<2, 2, features>(heads);                  // back to (batch, posn, features)

#include <algorithm>
#include <array>
#include <cstddef>
#include <type_traits>
#include <utility>

#include <dimsum/grad/tape.hpp>
#include <dimsum/ops/regroup.hpp>

namespace dimsum {

namespace grad::detail {
/// Records var v's elements seen with the dims R and extents ext (a split
/// or merge of row-major dims); the gradient is g seen with v's dims.
template <class R, class V>
auto record_reshape(const V& v, const std::array<std::size_t, R::size>& ext) {
  using X = std::remove_cvref_t<V>;
  using RT = tensor_for_t<typename X::value_type, R>;
  RT value = uninitialized_tensor<RT>(ext);
  std::copy_n(v.value().data(), value.size(), value.data());
  return record(v.owner(), std::move(value), v.requires_grad(), [v](auto& g, const auto&) {
    v.node()->accumulate(dimsum::detail::reshaped<typename X::tensor_type>(std::move(g), v.extents()));
  });
}
}  // namespace grad::detail

/// split_dim on a var: dim Pos split into the dims of NewDims with extents
/// `ext`; the same checks and errors as on tensors. The gradient is the
/// output's gradient with those dims merged back.
template <std::size_t Pos, class NewDims, grad::detail::var_like V>
auto split_dim(V&& v, const std::array<std::size_t, NewDims::size>& ext) {
  auto fwd = dimsum::split_dim<Pos, NewDims>(v.value(), ext);  // a view of v's value: checks only
  if constexpr (is_invalid_v<decltype(fwd)>)
    return invalid_expression{};
  else
    return grad::detail::record_reshape<dims_of_t<decltype(fwd)>>(v, fwd.extents());
}

/// merge_dims on a var: dims [Pos, Pos + Count) merged into NewDim; the
/// same checks and errors as on tensors. The gradient is the output's
/// gradient split back.
template <std::size_t Pos, std::size_t Count, dimension NewDim, grad::detail::var_like V>
auto merge_dims(V&& v) {
  auto fwd = dimsum::merge_dims<Pos, Count, NewDim>(v.value());  // lazy: extents and checks only
  if constexpr (is_invalid_v<decltype(fwd)>)
    return invalid_expression{};
  else
    return grad::detail::record_reshape<dims_of_t<decltype(fwd)>>(v, fwd.extents());
}

}  // namespace dimsum
