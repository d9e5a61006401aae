#pragma once
/// \file
/// What an expression node says about itself to the fusion patterns
/// (plan/fusion_patterns.hpp). A node declares one of these as its member
/// type `fusion_traits`:
///
///     template <dimension D, class E>
///     class softmax_expr : public expression_tag {
///      public:
///       using fusion_traits = plan::softmax_node<D, E>;   // "a softmax over D of E"
///       ...
///
/// and the patterns read the traits, never the node's class: a new node
/// joins a pattern by declaring traits, and plan/ needs no declaration of
/// any ops/ class. A node without `fusion_traits` is opaque to fusion.
/// Operand types are as the node stores them (references included); the
/// patterns strip them.

#include <type_traits>

namespace dimsum::plan {

/// The node fuses with nothing (the default for a node without traits).
struct opaque_node {};

/// A contraction of `Ops` keeping the dims `Out` (a dim_list): einsum.
template <class Out, class... Ops>
struct contraction_node {
  using out = Out;
};

/// A softmax over the dim `D` of the operand `X`.
template <class D, class X>
struct softmax_node {
  using dim = D;
  using operand = X;
};

/// A softmax over the dim `D` of the operand `X` with the sink logits `S`
/// in its denominator (ops/sink_softmax.hpp).
template <class D, class X, class S>
struct sink_softmax_node {
  using dim = D;
  using operand = X;
  using sinks = S;
};

/// A causal mask over query dim `Q` and key dim `K` of the operand `X`: the
/// node's `masked_value()` where the key index exceeds the query index.
template <class Q, class K, class X>
struct causal_mask_node {
  using query_dim = Q;
  using key_dim = K;
  using operand = X;
};

/// A sliding-window causal mask over query dim `Q` and key dim `K` of the
/// operand `X`: the node's `masked_value()` outside the keys j with
/// `i + offset() - window() < j <= i + offset()`.
template <class Q, class K, class X>
struct window_mask_node {
  using query_dim = Q;
  using key_dim = K;
  using operand = X;
};

/// The key-minus-query distance `j - (i + offset())` over query dim `Q` and
/// key dim `K`, computed from the indices (ops/alibi.hpp's
/// relative_positions): a slope times it is an affine bias the attention
/// kernel computes itself.
template <class Q, class K>
struct relative_position_node {
  using query_dim = Q;
  using key_dim = K;
};

/// The element-wise operations fusion patterns tell apart.
enum class pointwise { other, multiply, divide, masked_fill, plus, where, tanh, differentiable_map };

/// An element-wise operation `Op` over the operands `Args`: a scale is a
/// `multiply` or `divide` with a `scalar_node` operand; `masked_fill` has
/// the operands (x, mask, scalar), `where` (cond, a, b), `plus` (a, b),
/// `tanh` (x), `differentiable_map` (x: `map(with_derivative(f, df), x)`).
template <pointwise Op, class... Args>
struct elementwise_node {
  static constexpr pointwise op = Op;
};

/// A scalar held by value in the node's `value` member.
struct scalar_node {};

/// The fusion traits of node type E: its `fusion_traits`, or `opaque_node`.
template <class E>
struct fusion_traits_of {
  using type = opaque_node;
};
template <class E>
  requires requires { typename E::fusion_traits; }
struct fusion_traits_of<E> {
  using type = typename E::fusion_traits;
};

/// The fusion traits of node type E (cv-ref stripped), `opaque_node` if it
/// declares none.
template <class E>
using fusion_traits_t = typename fusion_traits_of<std::remove_cvref_t<E>>::type;

}  // namespace dimsum::plan
