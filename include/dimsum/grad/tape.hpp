#pragma once
/// \file
/// `grad::tape` and `grad::var<T, Dims...>`: reverse-mode differentiation
/// as in PyTorch's autograd. A tape records, in order, every operation on
/// vars; `tape.backward(loss)` walks it backwards and accumulates each
/// parameter's gradient into `parameter::grad`. A var holds its value
/// (evaluated eagerly, so it prints and debugs like a tensor) and its node
/// on the tape. Gradients have exactly the dims of what they are the
/// gradient of (DESIGN.md §10). See docs/design.md, "Gradients".
///
///     dimsum::grad::tape tape;
///     auto w = tape.watch(W);                         // W: parameter<float, d_in, d_out>
///     auto y = dimsum::einsum<"b d_in, d_in d_out -> b d_out">(x, w);
///     tape.backward(dimsum::sum<b, d_out>(y * y));    // W.grad += d loss / d W

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <dimsum/core/malloc_settings.hpp>
#include <dimsum/grad/parameter.hpp>
#include <dimsum/kernels/detail/bf16_convert.hpp>
#include <dimsum/kernels/reduce.hpp>
#include <dimsum/ops/elementwise.hpp>
#include <dimsum/tensor/tensor.hpp>

namespace dimsum {

/// Base of `grad::var`: makes namespace dimsum an associated namespace of
/// every var, so the var overloads of dimsum's operations are found by
/// argument-dependent lookup (inside templates too).
struct var_tag {};

// --- compile-time errors of the gradient API (docs/errors.md) ---
template <class Dims>
struct backward_needs_a_rank_0_loss {
  static_assert(detail::always_false<Dims>,
                "dimsum: tape.backward(loss) needs a rank-0 loss; reduce it first (sum<...> or mean<...>), as torch "
                "requires a scalar");
};
template <class What>
struct backward_needs_a_var {
  static_assert(detail::always_false<What>,
                "dimsum: tape.backward(loss) needs a grad::var recorded on the tape, not a tensor or expression");
};
template <class What>
struct gradient_of_something_that_is_not_a_parameter_or_var {
  static_assert(detail::always_false<What>,
                "dimsum: gradient(x) needs a parameter or a grad::var; a tensor or expression has no gradient: "
                "watch a parameter W itself (tape.watch(W), not tape.watch(W.value), which watches a copy) and read "
                "gradient(W), or read gradient(v) of the var v = tape.watch(x) of a tensor x");
};
template <class Asked, class Actual>
struct gradient_dims_differ_from_the_variable_dims {
  static_assert(detail::always_false<Asked, Actual>,
                "dimsum: gradient<Dims...>(x) asks for dims that differ from x's dims (a gradient has exactly its "
                "variable's dims)");
};
template <class VarDims, class TensorDims>
struct a_var_is_not_a_tensor {
  static_assert(detail::always_false<VarDims, TensorDims>,
                "dimsum: a grad::var is not a tensor; read its value with v.value() (a tensor with the var's dims), "
                "or keep the result a var");
};
template <class Declared, class Source>
struct a_var_keeps_the_order_of_its_dims {
  static_assert(detail::always_false<Declared, Source>,
                "dimsum: a grad::var is not transposed by assignment; declare it with the dims in the order the "
                "expression has (or auto), or reorder with rearrange<\"...\">(v), which records the gradient");
};
template <class VarDims>
struct a_gradient_hook_takes_the_var_gradient {
  static_assert(detail::always_false<VarDims>,
                "dimsum: v.register_hook(f) calls f with v's gradient, a tensor<T, Dims...>& with v's value type and "
                "dims in v's order; f cannot take it (auto& takes any)");
};
template <class VarDims>
struct gradient_of_the_var_of_a_frozen_parameter {
  static_assert(detail::always_false<VarDims>,
                "dimsum: gradient(v), v.retain_grad() or v.register_hook(f) of the var of a frozen_parameter: "
                "tape.watch(p) of a parameter frozen by its type reads it as a constant, which gets no gradient; "
                "declare it parameter<T, Dims...> to train it");
};
template <class First, class Other>
struct var_operands_need_the_same_value_type {
  static_assert(detail::always_false<First, Other>,
                "dimsum: an operation on grad::vars (+ - * /, minimum, maximum, pow, clamp, where, ...) needs its var "
                "and tensor operands of one value type; torch promotes, but a var's gradient has the var's value type "
                "and dimsum does not convert it silently: convert the tensor with dimsum::cast<T>(x), or watch the "
                "tensors as one type");
};

namespace grad {

/// Misuse of a tape found at run time: backward twice, vars of two tapes
/// in one operation, a loss from another tape.
struct tape_error : std::logic_error {
  using std::logic_error::logic_error;
};

class tape;

namespace detail {

/// One recorded operation: propagates its output's gradient to its inputs.
struct node_base {
  virtual ~node_base() = default;
  virtual void propagate() = 0;
  /// Frees the gradient once `propagate` has sent it on (PyTorch frees a
  /// non-leaf's .grad the same way), unless `keep_grad`.
  virtual void release_grad() noexcept = 0;
  /// Frees the rule and what it holds (its inputs' nodes, saved values):
  /// called when the tape, which alone can run it, is destroyed.
  virtual void release_rule() noexcept = 0;
  /// Throws `tape_error` if a watched parameter's value no longer has the
  /// extents it had when it was watched (backward would read its gradient
  /// and value out of step); nothing for other nodes.
  virtual void check_watched_extents() const {}
  /// The address of the `grad` of the parameter this node watches (its
  /// gradient goes there), else null.
  virtual const void* parameter_grad_address() const noexcept { return nullptr; }
  bool requires_grad = false;
  bool keep_grad = false;  // a watched tensor: `gradient(v)` reads it after backward
  bool frozen = false;     // a frozen parameter watched: a constant, `gradient(v)` throws
};

/// Whether the dim lists A and B have the same names in the same order
/// (their static extents may differ: one dim may be static, the other dynamic).
template <class A, class B>
constexpr bool same_names_in_order() {
  if (A::size != B::size) return false;
  for (std::size_t i = 0; i < A::size; ++i)
    if (A::names[i] != B::names[i]) return false;
  return true;
}

using dimsum::detail::uninitialized_tensor;  // tensor/tensor.hpp

/// The node of a var with dims Ds: its value, its gradient (allocated on
/// the first contribution) and the rule that sends the gradient on. The
/// rule receives the gradient as a mutable tensor: it is freed right after
/// the rule has run, so a rule may move it into an input's gradient or
/// compute in its buffer instead of allocating another.
template <class T, dimension... Ds>
struct var_node final : node_base {
  using tensor_type = tensor<T, Ds...>;
  using rule_type = std::function<void(tensor_type& grad, const tensor_type& value)>;

  tensor_type own;                   // the value, unless it is a parameter's
  const tensor_type* value_ptr = &own;
  const tensor_type* param_grad = nullptr;  // a watched parameter's grad, which gradient(v) reads
  tensor_type grad;
  bool has_grad = false;
  rule_type rule;
  std::vector<std::function<void(tensor_type&)>> hooks;  // run on the gradient before it is sent on

  const tensor_type& value() const { return *value_ptr; }

  // A bf16 var's gradient is summed in float32 (docs/design.md, "bfloat16
  // gradients"): every contribution goes into `wide`, in float32, and the
  // sum is rounded to bf16 once, when backward reaches this node
  // (`settle`), before hooks and the rule see it (a bf16 tensor that is
  // the only contribution is kept as it is). For float and double,
  // `wide` is an empty member and contributions go straight into `grad`.
  using wide_value_type = accumulator_t<T>;
  static constexpr bool sums_wide = !std::is_same_v<wide_value_type, T>;
  using wide_tensor_type = tensor<wide_value_type, Ds...>;
  struct no_wide {};
  [[no_unique_address]] std::conditional_t<sums_wide, wide_tensor_type, no_wide> wide;
  bool has_wide = false;

  /// grad += e, where e has these dims or a subset of them (broadcast).
  /// For a bf16 var, e may be bf16 or float32: it is added in float32.
  template <class E>
  void accumulate(E&& e) {
    if constexpr (sums_wide) {
      accumulate_wide(std::forward<E>(e));
    } else if constexpr (same_name_set_v<dim_list<Ds...>, dims_of_t<E>>) {
      if (!has_grad) {
        grad = std::forward<E>(e);  // a tensor rvalue is moved in, not copied
        has_grad = true;
      } else if constexpr (std::is_same_v<std::remove_cvref_t<E>, tensor_type>) {
        accumulate_raw(e.data());  // a tensor: added from where it is
      } else {
        const tensor_type t = std::forward<E>(e);
        accumulate_raw(t.data());
      }
    } else {
      // Evaluated first: grad + (a nested expression) trips a false
      // -Warray-bounds in g++ 12 at -O3.
      const auto t = dimsum::eval(std::forward<E>(e));
      ensure_grad();
      // grad + t broadcast, added in grad's own buffer (each element is
      // read and written at the same place, so in place is safe).
      auto sum = grad + t;
      static_assert(same_names_in_order<dims_of_t<decltype(sum)>, dim_list<Ds...>>());
      sum.eval_to(strided<T, sizeof...(Ds)>{grad.data(), grad.extents(), grad.strides()});
    }
  }
  /// The float32 sum of a bf16 var's gradient: wide += e (e of these dims
  /// or a subset, bf16 or float32; bf16 is widened exactly).
  template <class E>
  void accumulate_wide(E&& e)
    requires sums_wide
  {
    using A = wide_value_type;
    if constexpr (std::is_same_v<std::remove_cvref_t<E>, tensor_type>) {
      if (!has_wide && !has_grad) {
        // A bf16 gradient alone is kept as it is: widening it to float32 and
        // rounding the sum back gives the same values (a later contribution
        // joins it in float32, as a loss's seed does, in `settle`).
        grad = std::forward<E>(e);
        has_grad = true;
        return;
      }
    }
    if constexpr (same_name_set_v<dim_list<Ds...>, dims_of_t<E>> && std::is_same_v<value_type_of_t<E>, A>) {
      if (!has_wide) {
        wide = std::forward<E>(e);  // a float tensor rvalue is moved in
        has_wide = true;
        return;
      }
    }
    auto t = [&] {
      if constexpr (std::is_same_v<value_type_of_t<E>, A>)
        return dimsum::eval(std::forward<E>(e));
      else
        return dimsum::eval(dimsum::cast<A>(std::forward<E>(e)));
    }();
    if constexpr (same_name_set_v<dim_list<Ds...>, dims_of_t<decltype(t)>> &&
                  same_names_in_order<dims_of_t<decltype(t)>, dim_list<Ds...>>()) {
      if (!has_wide) {
        wide = std::move(t);
        has_wide = true;
        return;
      }
      kernels::detail::add_contiguous(wide.data(), t.data(), wide.size());
    } else {
      ensure_wide();
      auto sum = wide + t;
      static_assert(same_names_in_order<dims_of_t<decltype(sum)>, dim_list<Ds...>>());
      sum.eval_to(strided<A, sizeof...(Ds)>{wide.data(), wide.extents(), wide.strides()});
    }
  }
  /// wide += the float32 buffer at p, laid out as this node's value.
  void accumulate_wide_raw(const wide_value_type* p)
    requires sums_wide
  {
    if (!has_wide) {
      wide = uninitialized_tensor<wide_tensor_type>(value().extents());
      std::copy_n(p, wide.size(), wide.data());
      has_wide = true;
      return;
    }
    kernels::detail::add_contiguous(wide.data(), p, wide.size());
  }
  void ensure_wide()
    requires sums_wide
  {
    if (!has_wide) {
      wide = wide_tensor_type::from_extents(value().extents());
      has_wide = true;
    }
  }
  /// Rounds a bf16 var's float32 gradient sum to bf16, once (nothing when
  /// nothing was summed, or for float and double vars).
  void settle() {
    if constexpr (sums_wide) {
      if (!has_wide) return;
      if (has_grad) add_widened(grad.data());  // set directly (a loss's seed): joins the sum
      grad = uninitialized_tensor<tensor_type>(value().extents());
      const wide_value_type* w = wide.data();
      T* g = grad.data();
      if constexpr (std::is_same_v<T, bf16> && std::is_same_v<wide_value_type, float>)
        kernels::detail::round_contiguous(w, grad.size(), g);
      else
        for (std::size_t i = 0, n = grad.size(); i < n; ++i) g[i] = T(w[i]);
      has_grad = true;
      drop_wide();
    }
  }
  /// wide += the buffer at p (T values laid out as this node's value), widened.
  void add_widened(const T* p)
    requires sums_wide
  {
    wide_value_type* w = wide.data();
    if constexpr (std::is_same_v<T, bf16> && std::is_same_v<wide_value_type, float>)
      kernels::detail::widen_add_contiguous(p, wide.size(), w);
    else
      for (std::size_t i = 0, n = wide.size(); i < n; ++i) w[i] += static_cast<wide_value_type>(p[i]);
  }
  void drop_wide() noexcept {
    if constexpr (sums_wide) {
      has_wide = false;
      if constexpr (((Ds::static_extent == dynamic) || ...)) wide = wide_tensor_type();
    }
  }

  /// grad += the buffer at p, laid out as this node's value (row-major).
  /// For a bf16 var: widened and added to the float32 sum.
  void accumulate_raw(const T* p) {
    if constexpr (sums_wide) {
      if (!has_wide) {  // the first float32 contribution: widened, not added to zeros
        wide = uninitialized_tensor<wide_tensor_type>(value().extents());
        wide_value_type* w = wide.data();
        if constexpr (std::is_same_v<T, bf16> && std::is_same_v<wide_value_type, float>)
          kernels::detail::widen_contiguous(p, wide.size(), w);
        else
          for (std::size_t i = 0, n = wide.size(); i < n; ++i) w[i] = static_cast<wide_value_type>(p[i]);
        has_wide = true;
        return;
      }
      add_widened(p);
      return;
    }
    if (!has_grad) {  // the first contribution: copied, not added to zeros
      grad = uninitialized_tensor<tensor_type>(value().extents());
      std::copy_n(p, grad.size(), grad.data());
      has_grad = true;
      return;
    }
    kernels::detail::add_contiguous(grad.data(), p, grad.size());
  }
  void ensure_grad() {
    if (!has_grad) {
      grad = tensor_type::from_extents(value().extents());
      has_grad = true;
    }
  }
  void propagate() override {
    settle();
    if (!has_grad) return;
    for (auto& h : hooks) h(grad);
    if (!rule) return;
    if (!keep_grad) return rule(grad, value());
    tensor_type g = grad;  // a rule may reuse the buffer it is given: a retained gradient must stay as it is
    rule(g, value());
  }
  void release_rule() noexcept override { rule = nullptr; }
  const void* parameter_grad_address() const noexcept override { return param_grad; }
  bool watched_param = false;  // reads a parameter's value in place
  std::array<std::size_t, sizeof...(Ds)> watched_extents{};  // its extents when watched
  void check_watched_extents() const override {
    if (!watched_param || value().extents() == watched_extents) return;
    std::string names;
    ((names += (names.empty() ? "" : ", "), names += Ds::name.view()), ...);
    std::string m = "tape.backward: a parameter (";
    m.append(names).append(") was watched with extents (");
    auto extents = [&m](const std::array<std::size_t, sizeof...(Ds)>& e) {
      for (std::size_t i = 0; i < e.size(); ++i) m.append(i ? ", " : "").append(std::to_string(e[i]));
    };
    extents(watched_extents);
    m.append(") but its value now has extents (");
    extents(value().extents());
    m.append("); a watched parameter keeps its value until backward has run (assign it after the step)");
    throw tape_error(m);
  }
  void release_grad() noexcept override {
    if (keep_grad) return;
    drop_wide();
    if (!has_grad) return;
    // A default tensor is empty when a dim is dynamic (activations have
    // dynamic batch and position dims); an all-static one keeps its size.
    if constexpr (((Ds::static_extent == dynamic) || ...)) grad = tensor_type();
    has_grad = false;
  }
};

template <class X>
inline constexpr bool is_var_v = false;

}  // namespace detail

/// A value recorded on a tape: `value()` is a materialised
/// `tensor<T, Ds...>`; operations on vars (the same spellings as on
/// tensors: einsum, `+ - * /`, softmax, sum, ...) record their backward
/// rule. A var made from a constant has no gradient and no tape.
template <class T, dimension... Ds>
class var : public var_tag {
 public:
  using value_type = T;
  using dims = dim_list<Ds...>;
  static constexpr std::size_t rank = sizeof...(Ds);
  using tensor_type = tensor<T, Ds...>;
  using node_type = detail::var_node<T, Ds...>;

  var() : node_(std::make_shared<node_type>()) {}
  /// Takes the result of an operation that already reported a compile-time
  /// error, so `var<float, b, d> y = <mistake>;` gives that one error, not a
  /// second one about the conversion (as tensor's assignment does).
  var(invalid_expression) : var() {}
  /// A var of other dims or another value type, as users write it
  /// (`var<float, batch, posn> y = v * 2.0f;` for a v with more dims): the
  /// compile error a tensor's assignment gives, naming both dim lists (or
  /// both value types), instead of the compiler's "no conversion".
  /// The same dims in another order are refused too (a tensor's assignment
  /// transposes; a var's would have to record it): `a_var_keeps_the_order_of_its_dims`.
  template <class U, dimension... Es>
    requires(!std::is_same_v<dim_list<Ds...>, dim_list<Es...>> || !std::is_same_v<T, U>)
  var(const var<U, Es...>&) : var() {
    using dimsum::detail::report;
    if constexpr (!same_name_set_v<dim_list<Ds...>, dim_list<Es...>>)
      report<assignment_between_different_dims<diagnostic_dims_t<dim_list<Ds...>>, diagnostic_dims_t<dim_list<Es...>>>>();
    else if constexpr (!std::is_same_v<T, U>)
      report<value_type_mismatch<T, U>>();
    else
      report<a_var_keeps_the_order_of_its_dims<diagnostic_dims_t<dim_list<Ds...>>, diagnostic_dims_t<dim_list<Es...>>>>();
  }
  var(tape* t, std::shared_ptr<node_type> n);

  /// `tensor<...> y = v;` (a PyTorch habit: a tensor that requires grad is
  /// still a tensor): a compile error naming the var's dims and the
  /// tensor's, instead of the compiler's "no conversion".
  template <class U, dimension... Es>
  operator tensor<U, Es...>() const {
    dimsum::detail::report<a_var_is_not_a_tensor<diagnostic_dims_t<dim_list<Ds...>>, diagnostic_dims_t<dim_list<Es...>>>>();
    return {};
  }

  /// The materialised value.
  const tensor_type& value() const { return node_->value(); }
  std::array<std::size_t, rank> extents() const { return value().extents(); }
  /// The extent of dim D (by name).
  template <dimension D>
  std::size_t extent() const {
    return value().template extent<D>();
  }
  /// The single value of a rank-0 var (a loss).
  T item() const
    requires(rank == 0)
  {
    return value().item();
  }
  /// Whether a gradient flows into this var (it depends on a watched leaf).
  bool requires_grad() const { return node_->requires_grad; }
  /// Keeps this var's gradient after backward, to be read with
  /// `gradient(v)` (PyTorch's `retain_grad()`): an operation's result
  /// otherwise frees its gradient once sent on. Call it before backward.
  /// A var without gradient throws `grad::tape_error`.
  void retain_grad() const {
    if (!node_->requires_grad)
      throw tape_error("retain_grad: this var has no gradient (it depends on no watched parameter or tensor)");
    node_->keep_grad = true;
  }
  /// Calls `f(g)` with this var's gradient `g` (a `tensor<T, Ds...>&`, which
  /// `f` may change: clip, scale, log) once backward has summed it, before
  /// it is sent on to the inputs (PyTorch's `register_hook`). For a watched
  /// parameter's var, before `p.grad` is increased. Hooks run in the order
  /// registered. A var without gradient throws `grad::tape_error`.
  template <class F>
  void register_hook(F f) const {
    if constexpr (!std::is_invocable_v<F&, tensor_type&>) {
      dimsum::detail::report<a_gradient_hook_takes_the_var_gradient<diagnostic_dims_t<dim_list<Ds...>>>>();
    } else {
      if (!node_->requires_grad)
        throw tape_error("register_hook: this var has no gradient (it depends on no watched parameter or tensor)");
      node_->hooks.emplace_back(std::move(f));
    }
  }
  /// The tape this var is recorded on (null for a constant). A var that
  /// needs a gradient and outlived its tape throws `grad::tape_error`: it
  /// can no longer be recorded on (a constant of a gone tape is a constant).
  grad::tape* owner() const;
  const std::shared_ptr<node_type>& node() const { return node_; }

 private:
  std::shared_ptr<node_type> node_;
  // The tape's handle: it points at the tape while the tape lives, null after.
  std::shared_ptr<grad::tape* const> tape_;
};

namespace detail {
template <class T, dimension... Ds>
inline constexpr bool is_var_v<var<T, Ds...>> = true;
template <class X>
concept var_like = is_var_v<std::remove_cvref_t<X>>;
template <class... X>
inline constexpr bool any_var_v = (var_like<X> || ...);

template <class T, class L>
struct var_for;
template <class T, dimension... Ds>
struct var_for<T, dim_list<Ds...>> {
  using type = var<T, Ds...>;
};
}  // namespace detail

/// The var `tape.watch(p)` gives for a `frozen_parameter` `p`: a constant
/// var reading `p.value` in place, a `var<T, Ds...>` in every operation,
/// whose type says it has no gradient: `gradient(v)`, `v.retain_grad()` and
/// `v.register_hook(f)` are the compile error
/// `gradient_of_the_var_of_a_frozen_parameter`.
template <class T, dimension... Ds>
class frozen_var : public var<T, Ds...> {
 public:
  using var_type = var<T, Ds...>;
  explicit frozen_var(var_type v) : var_type(std::move(v)) {}
  constexpr void retain_grad() const {
    dimsum::detail::report<gradient_of_the_var_of_a_frozen_parameter<diagnostic_dims_t<dim_list<Ds...>>>>();
  }
  template <class F>
  constexpr void register_hook(const F&) const {
    dimsum::detail::report<gradient_of_the_var_of_a_frozen_parameter<diagnostic_dims_t<dim_list<Ds...>>>>();
  }
};

namespace detail {
template <class T, dimension... Ds>
inline constexpr bool is_var_v<frozen_var<T, Ds...>> = true;
template <class X>
inline constexpr bool is_frozen_var_v = false;
template <class T, dimension... Ds>
inline constexpr bool is_frozen_var_v<frozen_var<T, Ds...>> = true;
}  // namespace detail

/// The var type with value type T and the dims of list L.
template <class T, class L>
using var_for_t = typename detail::var_for<T, L>::type;

namespace detail {
/// A var without gradient holding the evaluated e, on tape t (or none).
template <class E>
auto constant_var(tape* t, E&& e) {
  using V = var_for_t<value_type_of_t<E>, dims_of_t<E>>;
  auto n = std::make_shared<typename V::node_type>();
  n->own = std::forward<E>(e);
  return V(t, std::move(n));
}
}  // namespace detail

/// Records operations on vars and runs them backwards. One tape is one
/// forward and backward pass (a training step): make a new one per step.
/// Not copyable or movable (vars point at it); watched parameters must
/// outlive it and keep their values until backward has run. A var that
/// needs a gradient and outlives its tape cannot be used in an operation
/// (`tape_error`), as PyTorch refuses to backward through a freed graph.
class tape {
 public:
  tape() { dimsum::detail::keep_freed_memory_for_reuse(); }
  tape(const tape&) = delete;
  tape& operator=(const tape&) = delete;
  ~tape() {
    *handle_ = nullptr;
    // Each node's rule holds its inputs. Dropping the rules first means a
    // var kept after the step holds its own value, not the whole graph
    // (which would then be freed by one recursion as deep as the graph);
    // newest first, so no release frees more than the one node.
    while (!nodes_.empty()) {
      nodes_.back()->release_rule();
      nodes_.pop_back();
    }
  }

  /// What the vars of this tape hold to find it: the tape while it lives,
  /// null once it is destroyed.
  const std::shared_ptr<tape*>& handle() const { return handle_; }

  /// A var whose gradient is accumulated into `p.grad` by backward
  /// (PyTorch's leaf semantics: `p.grad += d loss / d p`). The var reads
  /// `p.value` in place. A frozen parameter (`p.requires_grad == false`),
  /// or any parameter watched while a `frozen_scope` of this tape lives,
  /// gives a constant var instead: no gradient, `p.grad` left alone.
  template <class T, dimension... Ds>
  var<T, Ds...> watch(parameter<T, Ds...>& p) {
    auto n = std::make_shared<detail::var_node<T, Ds...>>();
    n->value_ptr = &p.value;
    n->watched_param = true;
    n->watched_extents = p.value.extents();
    if (!p.requires_grad || frozen_depth_ > 0) {
      n->frozen = true;
      push(n);
      watched_.push_back(n.get());
      return var<T, Ds...>(this, std::move(n));
    }
    n->param_grad = &p.grad;
    n->requires_grad = true;
    parameter<T, Ds...>* pp = &p;
    n->rule = [pp](const tensor<T, Ds...>& g, const tensor<T, Ds...>&) {
      if (pp->grad.extents() != pp->value.extents()) pp->zero_grad();
      if constexpr (is_bf16_v<T>) {  // a bf16 parameter's grad is bf16: each step's sum rounds once
        T* out = pp->grad.data();
        for (std::size_t i = 0, n = g.size(); i < n; ++i) out[i] = T(static_cast<float>(out[i]) + static_cast<float>(g.data()[i]));
      } else {
        kernels::detail::add_contiguous(pp->grad.data(), g.data(), g.size());
      }
    };
    push(n);
    watched_.push_back(n.get());
    return var<T, Ds...>(this, std::move(n));
  }

  /// A frozen parameter (`frozen_parameter<T, Ds...>`) on the tape: a
  /// constant var reading `p.value` in place, as `watch` of a parameter
  /// whose `requires_grad` is false, typed `frozen_var` (its type says so:
  /// `gradient(p)` and `gradient(v)` are compile errors).
  template <class T, dimension... Ds>
  frozen_var<T, Ds...> watch(frozen_parameter<T, Ds...>& p) {
    auto n = std::make_shared<detail::var_node<T, Ds...>>();
    n->value_ptr = &p.value;
    n->watched_param = true;
    n->watched_extents = p.value.extents();
    n->frozen = true;
    push(n);
    watched_.push_back(n.get());
    return frozen_var<T, Ds...>(var<T, Ds...>(this, std::move(n)));
  }

  /// A leaf var of value `t` whose gradient backward keeps on the tape,
  /// read with `gradient(v)` (an input you want d loss / d input of). `t`
  /// is copied: `tape.watch(W.value)` of a parameter W watches a copy of
  /// its value and leaves `W.grad` alone; watch the parameter, `tape.watch(W)`.
  template <class T, dimension... Ds>
  var<T, Ds...> watch(tensor<T, Ds...> t) {
    auto n = std::make_shared<detail::var_node<T, Ds...>>();
    n->own = std::move(t);
    n->requires_grad = true;
    n->keep_grad = true;
    push(n);
    return var<T, Ds...>(this, std::move(n));
  }
  /// The same for a lazy expression or a view, evaluated now (PyTorch's
  /// `(x * 2).requires_grad_()`): a leaf var of its value.
  template <named_expression E>
    requires(!requires(std::remove_cvref_t<E>& e) { e.storage(); })
  auto watch(E&& e) {
    if constexpr (is_invalid_v<E>)
      return invalid_expression{};
    else
      return watch(dimsum::eval(std::forward<E>(e)));
  }

  /// Several at once, in order, as a `std::tuple` of their vars:
  /// `auto [q, k] = tape.watch(W_Q, W_K);`. (`auto q = tape.watch(a), k =
  /// tape.watch(b);` does not compile when the vars' dims differ: one
  /// `auto` declaration deduces one type for all its declarators.)
  template <class A, class B, class... R>
  auto watch(A&& a, B&& b, R&&... r) {
    return std::tuple{watch(std::forward<A>(a)), watch(std::forward<B>(b)), watch(std::forward<R>(r))...};
  }

  /// While it lives, every parameter watched on the tape is read as a
  /// constant (a frozen scope: modules called on vars watch their
  /// parameters, so `{ auto f = tape.freeze_parameters(); y = embed(tape, ids); }`
  /// uses the embedding without training it). Scopes nest.
  class frozen_scope {
   public:
    explicit frozen_scope(tape& t) : t_(&t) { ++t_->frozen_depth_; }
    frozen_scope(const frozen_scope&) = delete;
    frozen_scope& operator=(const frozen_scope&) = delete;
    ~frozen_scope() { --t_->frozen_depth_; }

   private:
    tape* t_;
  };
  /// A `frozen_scope` of this tape.
  [[nodiscard]] frozen_scope freeze_parameters() { return frozen_scope(*this); }

  /// A var without gradient (an input or a constant): evaluates e.
  template <named_expression E>
  auto constant(E&& e) {
    if constexpr (is_invalid_v<E>) {
      return invalid_expression{};
    } else {
      return detail::constant_var(this, std::forward<E>(e));
    }
  }

  /// Runs the tape backwards from `loss`, a rank-0 var recorded on this
  /// tape: every watched parameter's `grad` is increased by
  /// d loss / d parameter. A tape runs backward once.
  template <class V>
  void backward(const V& loss) {
    if constexpr (is_invalid_v<V>) {
      return;
    } else if constexpr (!detail::var_like<V>) {
      if constexpr (named_expression<V>)
        dimsum::detail::report<backward_needs_a_var<diagnostic_dims_t<dims_of_t<V>>>>();
      else
        dimsum::detail::report<backward_needs_a_var<V>>();
    } else if constexpr (V::rank != 0) {
      dimsum::detail::report<backward_needs_a_rank_0_loss<diagnostic_dims_t<typename V::dims>>>();
    } else {
      if (done_) throw tape_error("tape.backward: this tape has run backward already; record a new tape per step");
      if (loss.owner() != this && loss.owner() != nullptr)
        throw tape_error("tape.backward: the loss was recorded on another tape");
      // Before anything runs: a parameter reassigned with other extents
      // since it was watched is refused, and no gradient has changed.
      for (const detail::node_base* w : watched_) w->check_watched_extents();
      done_ = true;
      if (!loss.requires_grad()) return;  // nothing watched reaches the loss
      auto& n = *loss.node();
      n.ensure_grad();
      n.grad.fill(typename V::value_type(1));
      const std::size_t start = index_of_node(loss.node().get());
      // How many nodes watch each parameter that backward reaches: its
      // gradient is final once the last of them has run.
      std::vector<std::pair<const void*, std::size_t>> pending;
      if (!parameter_ready_.empty())
        for (std::size_t i = 0; i <= start; ++i)
          if (const void* g = nodes_[i]->parameter_grad_address()) {
            auto it = std::find_if(pending.begin(), pending.end(), [g](const auto& e) { return e.first == g; });
            if (it == pending.end()) pending.emplace_back(g, 1);
            else ++it->second;
          }
      // Each gradient is freed once sent on: the step's extra memory is the
      // saved values plus the gradients still in flight, not every gradient.
      for (std::size_t i = start + 1; i-- > 0;) {
        nodes_[i]->propagate();
        nodes_[i]->release_grad();
        if (pending.empty()) continue;
        if (const void* g = nodes_[i]->parameter_grad_address()) {
          auto it = std::find_if(pending.begin(), pending.end(), [g](const auto& e) { return e.first == g; });
          if (--it->second == 0)
            for (auto& f : parameter_ready_) f(g);
        }
      }
    }
  }

  /// Calls `f(&p.grad)` during `backward`, once for each parameter `p`
  /// watched on this tape (and reached from the loss), as soon as backward
  /// has added its last contribution to `p.grad`: what lets a data-parallel
  /// step start reducing a gradient while backward computes the rest
  /// (`dist::gradient_reducer`). `f` receives the address of the
  /// parameter's `grad` member. Parameters in the order backward finishes
  /// them; nothing for frozen parameters or if the loss needs no gradient.
  void on_parameter_gradient(std::function<void(const void*)> f) { parameter_ready_.push_back(std::move(f)); }

  /// Number of operations recorded (watched leaves included).
  std::size_t size() const { return nodes_.size(); }

  /// Records a node (used by the operations on vars).
  void push(std::shared_ptr<detail::node_base> n) {
    if (done_) throw tape_error("tape: recording on a tape that has run backward; record a new tape per step");
    nodes_.push_back(std::move(n));
  }

 private:
  std::size_t index_of_node(const detail::node_base* p) const {
    for (std::size_t i = nodes_.size(); i-- > 0;)
      if (nodes_[i].get() == p) return i;
    throw tape_error("tape.backward: the loss is not recorded on this tape");
  }

  std::vector<std::shared_ptr<detail::node_base>> nodes_;
  std::vector<const detail::node_base*> watched_;  // the watched parameters' nodes (kept alive by nodes_)
  std::vector<std::function<void(const void*)>> parameter_ready_;  // on_parameter_gradient's callbacks
  int frozen_depth_ = 0;                           // live frozen_scopes
  bool done_ = false;
  std::shared_ptr<tape*> handle_ = std::make_shared<tape*>(this);
};

template <class T, dimension... Ds>
var<T, Ds...>::var(tape* t, std::shared_ptr<node_type> n) : node_(std::move(n)) {
  if (t) tape_ = t->handle();
}

template <class T, dimension... Ds>
grad::tape* var<T, Ds...>::owner() const {
  if (!tape_) return nullptr;
  if (*tape_ || !node_->requires_grad) return *tape_;
  throw tape_error(
      "this var needs a gradient but its tape no longer exists (a tape is one step); use its value() in later "
      "steps, or compute it again on the new tape");
}

namespace detail {

/// The tape shared by the vars of one operation (null when all are
/// constants); vars of two different tapes are a tape_error.
inline tape* common_tape(std::initializer_list<tape*> ts) {
  tape* t = nullptr;
  for (tape* x : ts) {
    if (!x) continue;
    if (t && t != x) throw tape_error("an operation mixes vars of two different tapes");
    t = x;
  }
  return t;
}

template <class X>
tape* tape_of(const X& x) {
  if constexpr (var_like<X>)
    return x.owner();
  else
    return nullptr;
}
template <class X>
bool needs_grad(const X& x) {
  if constexpr (var_like<X>)
    return x.requires_grad();
  else
    return false;
}

/// A var of any operand: a var as it is, a named expression evaluated as a
/// constant var. Scalars pass through.
template <class X>
decltype(auto) lift(X&& x) {
  if constexpr (var_like<X> || !named_expression<X>) {
    return std::forward<X>(x);
  } else {
    return constant_var(nullptr, std::forward<X>(x));
  }
}

/// The value of an operand: a var's tensor, or the scalar itself.
template <class X>
decltype(auto) value_of(const X& x) {
  if constexpr (var_like<X>)
    return x.value();
  else
    return (x);
}

/// Records the result of an operation: `value` (a tensor) becomes a var on
/// tape t; when `requires_grad`, `rule(grad, value)` will send its
/// gradient to the inputs during backward.
template <class T, dimension... Ds, class Rule>
var<T, Ds...> record(tape* t, tensor<T, Ds...>&& value, bool requires_grad, Rule&& rule) {
  auto n = std::make_shared<var_node<T, Ds...>>();
  n->own = std::move(value);
  if (requires_grad && t) {
    n->requires_grad = true;
    n->rule = std::forward<Rule>(rule);
    t->push(n);
  }
  return var<T, Ds...>(t, std::move(n));
}

}  // namespace detail
}  // namespace grad

/// A var is already materialised: `eval(v)` is v, so code written for
/// tensors (which evaluates lazy expressions before returning them) runs on
/// vars unchanged.
template <class V>
  requires grad::detail::var_like<V>
std::remove_cvref_t<V> eval(V&& v) {
  return std::forward<V>(v);
}

/// The gradient of a parameter (its `grad`; of a `frozen_parameter`, the
/// compile error `gradient_of_a_frozen_parameter`), of the var `tape.watch(p)`
/// gave (the same `p.grad`) or of a watched tensor's var (what the last
/// backward accumulated; zeros if nothing reached it), as a tensor with
/// exactly its dims. A var an operation returned has no gradient to read
/// (backward frees it once sent on: `grad::tape_error`) unless
/// `v.retain_grad()` was called before backward. `gradient<Ds...>(x)` also states the dims, in
/// order: a compile error naming both lists when they differ.
template <dimension... Ask, class X>
decltype(auto) gradient(const X& x) {
  using P = std::remove_cvref_t<X>;
  if constexpr (is_frozen_parameter_v<P>) {
    detail::report<gradient_of_a_frozen_parameter<diagnostic_dims_t<typename P::dims>>>();
    return invalid_expression{};
  } else if constexpr (grad::detail::is_frozen_var_v<P>) {
    detail::report<gradient_of_the_var_of_a_frozen_parameter<diagnostic_dims_t<typename P::dims>>>();
    return invalid_expression{};
  } else if constexpr (is_parameter_v<P> || grad::detail::var_like<P>) {
    using L = typename P::dims;
    if constexpr (sizeof...(Ask) > 0 && !(L::size == sizeof...(Ask) && [] {
                                           constexpr std::array<std::string_view, sizeof...(Ask)> a{Ask::name.view()...};
                                           for (std::size_t i = 0; i < a.size(); ++i)
                                             if (a[i] != L::names[i]) return false;
                                           return true;
                                         }())) {
      detail::report<gradient_dims_differ_from_the_variable_dims<dims<diagnostic_name_t<Ask>...>, diagnostic_dims_t<L>>>();
      return invalid_expression{};
    } else if constexpr (is_parameter_v<P>) {
      if (!x.requires_grad)
        throw grad::tape_error(
            "gradient(p): the parameter is frozen (requires_grad is false), so it gets no gradient; set "
            "p.requires_grad = true before the forward pass to train it");
      return static_cast<const typename P::tensor_type&>(x.grad);
    } else {
      auto& n = *x.node();
      if (n.frozen)
        throw grad::tape_error(
            "gradient(v): v is a frozen parameter watched as a constant (requires_grad false, or a frozen_scope), "
            "so it gets no gradient");
      if (n.param_grad) return static_cast<const typename P::tensor_type&>(*n.param_grad);
      if (n.requires_grad && !n.keep_grad)
        throw grad::tape_error(
            "gradient(v): v is the result of an operation, whose gradient backward frees once it has sent it on (as "
            "PyTorch keeps .grad for leaves only); call v.retain_grad() before backward, or watch a tensor "
            "(tape.watch(t)) to read d loss / d t");
      n.ensure_grad();
      return static_cast<const typename P::tensor_type&>(n.grad);
    }
  } else {
    if constexpr (named_expression<P>)
      detail::report<gradient_of_something_that_is_not_a_parameter_or_var<diagnostic_dims_t<dims_of_t<P>>>>();
    else
      detail::report<gradient_of_something_that_is_not_a_parameter_or_var<P>>();
    return invalid_expression{};
  }
}

}  // namespace dimsum
