#pragma once
/// \file
/// `grad::lazy_var`: the result of an operation on vars that may start or
/// continue an attention chain (the score einsum of two vars, then scales,
/// masks, a constant bias, softmax). It holds the tensor expression of the
/// chain over the vars' values, the vars it reads (their nodes, so nothing
/// it refers to can be destroyed) and the masks and biases it reads (owned
/// copies), and records nothing yet. The einsum that completes the
/// attention pattern with a var V records one fused tape node
/// (grad/rules/attention.hpp); any other use materialises it: the ordinary
/// operations on vars are recorded then, once, and it behaves as the var
/// they give (it is `var_like`: value(), node(), every var operation).
/// `grad::fused_var` is the var the fused node gives;
/// `uses_fused_attention_v` holds for it.
///
///     auto s = einsum<"b i d, b j d -> b i j">(q, k) * 0.125f;   // lazy: nothing recorded
///     auto z = einsum<"b i j, b j c -> b i c">(softmax<j>(s), v); // one fused node
///     static_assert(dimsum::uses_fused_attention_v<decltype(z)>);

#include <memory>
#include <optional>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include <dimsum/grad/tape.hpp>
#include <dimsum/plan/fusion_patterns.hpp>

namespace dimsum::grad {

/// A chain of operations on vars not yet recorded (see the file comment).
/// Var is the var it materialises to, Expr the tensor expression of its
/// value (over the values of the vars in Leaves and of owned tensors),
/// Make the callable that records the unfused operations and returns Var.
template <class Var, class Expr, class Leaves, class Make>
class lazy_var : public var_tag {
 public:
  using var_type = Var;
  using value_type = typename Var::value_type;
  using dims = typename Var::dims;
  static constexpr std::size_t rank = Var::rank;
  using tensor_type = typename Var::tensor_type;
  using node_type = typename Var::node_type;
  using expression_type = Expr;

  lazy_var(Expr e, Leaves leaves, Make make)
      : expr_(std::move(e)), leaves_(std::move(leaves)), make_(std::move(make)),
        cache_(std::make_shared<std::optional<Var>>()) {}

  /// The tensor expression of the value (what the fused kernel runs).
  const Expr& expression() const { return expr_; }
  /// The score einsum's operand vars, in its operand order.
  const Leaves& leaves() const { return leaves_; }
  /// The var of the recorded unfused operations (recorded on the first call;
  /// copies of this lazy_var share it).
  const Var& materialize() const {
    if (!*cache_) cache_->emplace(make_());
    return **cache_;
  }

  const tensor_type& value() const { return materialize().value(); }
  auto extents() const { return materialize().extents(); }
  template <dimension D>
  std::size_t extent() const {
    return materialize().template extent<D>();
  }
  value_type item() const
    requires(rank == 0)
  {
    return materialize().item();
  }
  bool requires_grad() const { return materialize().requires_grad(); }
  grad::tape* owner() const { return materialize().owner(); }
  const std::shared_ptr<node_type>& node() const { return materialize().node(); }

  /// `v.retain_grad()` and `v.register_hook(f)` of the materialised var (a
  /// result such as `einsum(h, W)` of two vars is lazy; these record it,
  /// unfused, and keep or hook its gradient as on any var).
  void retain_grad() const { materialize().retain_grad(); }
  template <class F>
  void register_hook(F f) const {
    materialize().register_hook(std::move(f));
  }

  /// `var<T, Ds...> s = lazy;`: the materialised var (another var type gives
  /// the var assignment's compile error, naming both dim lists).
  template <class U, dimension... Es>
  operator var<U, Es...>() const {
    return var<U, Es...>(materialize());
  }

 private:
  Expr expr_;
  Leaves leaves_;
  Make make_;
  std::shared_ptr<std::optional<Var>> cache_;
};

/// The var of one fused attention node, typed by the tensor expression the
/// node runs, so that `uses_fused_attention_v<decltype(z)>` can be asserted
/// on the var path too. It is a `var` in every other respect.
template <class Var, class Expr>
class fused_var : public Var {
 public:
  using var_type = Var;
  using expression_type = Expr;
  explicit fused_var(Var v) : Var(std::move(v)) {}
};

namespace detail {

template <class X>
inline constexpr bool is_lazy_var_v = false;
template <class Var, class Expr, class Leaves, class Make>
inline constexpr bool is_lazy_var_v<lazy_var<Var, Expr, Leaves, Make>> = true;

template <class Var, class Expr, class Leaves, class Make>
inline constexpr bool is_var_v<lazy_var<Var, Expr, Leaves, Make>> = true;
template <class Var, class Expr>
inline constexpr bool is_var_v<fused_var<Var, Expr>> = true;

template <class X>
inline constexpr bool is_fused_var_v = false;
template <class Var, class Expr>
inline constexpr bool is_fused_var_v<fused_var<Var, Expr>> = true;

/// Whether X is a lazy var expression.
template <class X>
concept lazy_var_like = is_lazy_var_v<std::remove_cvref_t<X>>;

/// Whether X is a var that is not lazy (its value is recorded).
template <class X>
concept recorded_var = var_like<X> && !is_lazy_var_v<std::remove_cvref_t<X>>;

/// A lazy var of value expression e, the score operands `leaves`, and
/// `make` (recording the unfused operations, returning a var of e's dims).
template <class E, class Leaves, class Make>
auto make_lazy(E&& e, Leaves leaves, Make make) {
  using X = std::remove_cvref_t<E>;
  using V = var_for_t<value_type_of_t<X>, dims_of_t<X>>;
  return lazy_var<V, X, Leaves, Make>(std::forward<E>(e), std::move(leaves), std::move(make));
}

/// A copy of x's expression, as an rvalue (moved into the next node, so
/// that no expression refers to a lazy_var object, which may be a temporary).
template <class X>
auto expression_copy(const X& x) {
  return typename std::remove_cvref_t<X>::expression_type(x.expression());
}

/// An owned copy of a tensor or expression (evaluated), shared by every
/// copy of the lazy_var that reads it.
template <class X>
auto own(X&& x) {
  using T = tensor_for_t<value_type_of_t<X>, dims_of_t<X>>;
  return std::make_shared<const T>(dimsum::eval(std::forward<X>(x)));
}

}  // namespace detail
}  // namespace dimsum::grad

namespace dimsum {

/// `eval` of a lazy var: the recorded var of its unfused operations (as
/// eval of a tensor expression, it ends the fusion; the scores are
/// materialised).
template <class V>
  requires grad::detail::var_like<V> && grad::detail::lazy_var_like<V>
typename std::remove_cvref_t<V>::var_type eval(V&& v) {
  return v.materialize();
}

/// A fused attention node's var: its expression is the attention pattern.
template <class Var, class Expr>
inline constexpr bool uses_fused_attention_v<grad::fused_var<Var, Expr>> = true;
template <class Var, class Expr>
inline constexpr std::string_view attention_not_fused_reason_v<grad::fused_var<Var, Expr>>{};

}  // namespace dimsum
