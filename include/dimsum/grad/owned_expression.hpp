#pragma once
/// \file
/// `grad::detail::own_expression(x)`: a copy of a lazy expression that
/// refers to nothing of the caller's, for a lazy var chain that keeps a
/// mask or a condition until backward (grad/lazy_attention.hpp). The
/// element-wise structure is kept, so the fused kernels still read the mask
/// as a source, a block at a time (ops/detail/fused_attention.hpp
/// `mask_rows`), and no tensor of the scores' size exists; only the leaves
/// are copied: each tensor or view it reads (document ids, position ids,
/// prefix lengths: small, per position) into a shared tensor, read through
/// a view. A scalar and `relative_positions` own what they read and are
/// kept as they are; any other node (a contraction, a renamed expression)
/// is evaluated once into a shared tensor of its own dims.
///
///     auto m = own_expression(rename<posn, q_posn>(doc) != rename<posn, k_posn>(doc));
///     // m.expression reads copies of doc, which m.kept holds

#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <dimsum/ops/alibi.hpp>
#include <dimsum/ops/elementwise.hpp>
#include <dimsum/tensor/tensor.hpp>

namespace dimsum::grad::detail {

/// The tensors an owned expression reads, held while any copy of it lives.
using kept_tensors = std::vector<std::shared_ptr<const void>>;

/// An expression and the tensors it reads (see the file comment).
template <class E>
struct owned_expression {
  E expression;
  std::shared_ptr<const kept_tensors> kept;
};

template <class X>
inline constexpr bool is_elementwise_node = false;
template <class Op, class... Args>
inline constexpr bool is_elementwise_node<elementwise_expr<Op, Args...>> = true;

/// Expressions that hold nothing by reference and keep their own values.
template <class X>
inline constexpr bool owns_its_values = false;
template <class T>
inline constexpr bool owns_its_values<scalar_expr<T>> = true;
template <class T, dimension Q, dimension K>
inline constexpr bool owns_its_values<relative_positions_expr<T, Q, K>> = true;

/// x rebuilt over copies of what it reads, the copies appended to `kept`.
template <class X>
auto rebuild_owning(const X& x, kept_tensors& kept) {
  if constexpr (owns_its_values<X>) {
    return X(x);
  } else if constexpr (is_elementwise_node<X>) {
    return std::apply(
        [&](const auto&... a) {
          return elementwise_expr<std::remove_cvref_t<decltype(x.op())>, decltype(rebuild_owning(a, kept))...>(
              x.op(), rebuild_owning(a, kept)...);
        },
        x.operands());
  } else {
    // a leaf (its data copied) or a node of another kind (evaluated), in
    // a tensor of its own dims that the views below read
    using T = tensor_for_t<value_type_of_t<X>, dims_of_t<X>>;
    auto t = std::make_shared<const T>(x);
    kept.push_back(t);
    return view_for_t<const value_type_of_t<X>, dims_of_t<X>>(t->data(), t->extents(), t->strides());
  }
}

/// A copy of x as a prvalue (moved into the expression that takes it, so
/// that it holds the copy, not a reference to x).
template <class X>
X copy_of(const X& x) {
  return x;
}

/// The owned copy of x (see the file comment).
template <named_expression X>
auto own_expression(const X& x) {
  auto kept = std::make_shared<kept_tensors>();
  auto e = rebuild_owning(x, *kept);
  return owned_expression<decltype(e)>{std::move(e), std::move(kept)};
}

}  // namespace dimsum::grad::detail
