#pragma once
/// \file
/// `optim::sgd`: stochastic gradient descent with momentum, dampening,
/// Nesterov momentum and L2 weight decay, with PyTorch 1.13's update
/// (`torch.optim.SGD`, `_single_tensor_sgd`) and its defaults. Works on any
/// module whose parameters `for_each_parameter` finds; the momentum buffer
/// of each parameter has that parameter's dims. See tests/unit/optim_optimizers.cpp.

#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>

#include <dimsum/nn/module.hpp>
#include <dimsum/optim/parameter_states.hpp>

namespace dimsum::optim {

/// SGD's hyper-parameters, as `torch.optim.SGD` names them. `lr` has no
/// default (PyTorch requires it): left out, it is NaN and `sgd` throws.
struct sgd_options {
  double lr = std::numeric_limits<double>::quiet_NaN();
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  bool maximize = false;
};

/// The state SGD keeps per parameter `P`: the momentum buffer (same dims as
/// the parameter), created from the first gradient when momentum is used.
template <class P>
struct sgd_state {
  explicit sgd_state(const P&) {}
  typename P::tensor_type momentum_buffer;
  bool has_momentum_buffer = false;
};

/// Stochastic gradient descent, PyTorch 1.13's formula: for each element,
/// with g the gradient (negated if `maximize`) and p the value,
///
///     g = g + weight_decay * p                     (if weight_decay != 0)
///     b = g on the first step, else momentum * b + (1 - dampening) * g
///     g = nesterov ? g + momentum * b : b          (if momentum != 0)
///     p = p - lr * g
///
///     optim::sgd opt({.lr = 0.1, .momentum = 0.9});
///     opt.step(model);  // reads every p.grad, updates every p.value
class sgd : public optimizer_base<sgd, sgd_state, sgd_options> {
 public:
  /// Checks the options as PyTorch does: lr given, lr, momentum and
  /// weight_decay not negative, and nesterov only with momentum > 0 and
  /// dampening == 0; otherwise throws `optimizer_error`.
  explicit sgd(sgd_options o) : options(o) { check_options(o); }

  /// Throws `optimizer_error` for options PyTorch refuses (see the
  /// constructor); `add_group` and every step check each group's options so.
  static void check_options(const sgd_options& o) {
    if (std::isnan(o.lr)) throw optimizer_error("sgd: lr is required (torch.optim.SGD has no default learning rate)");
    if (!(o.lr >= 0.0)) throw optimizer_error(nn::detail::cat("sgd: invalid learning rate ", std::to_string(o.lr)));
    if (!(o.momentum >= 0.0)) throw optimizer_error(nn::detail::cat("sgd: invalid momentum ", std::to_string(o.momentum)));
    if (!(o.weight_decay >= 0.0))
      throw optimizer_error(nn::detail::cat("sgd: invalid weight_decay ", std::to_string(o.weight_decay)));
    if (o.nesterov && (o.momentum <= 0.0 || o.dampening != 0.0))
      throw optimizer_error("sgd: nesterov momentum requires a momentum and zero dampening");
  }

  /// The hyper-parameters of group 0 (every parameter no added group
  /// takes); `options.lr` may be changed between steps (as a schedule does).
  sgd_options options;

  /// The optimizer's name in a checkpoint of its state.
  static constexpr std::string_view name = "sgd";

  /// Calls `f(name, value)` for every option of `o` (a possibly const
  /// `sgd_options`): what a checkpoint of the optimizer stores
  /// (io/optimizer_state.hpp), with PyTorch's `param_groups` names.
  template <class O, class F>
  static void for_each_option(O& o, F&& f) {
    f("lr", o.lr), f("momentum", o.momentum), f("dampening", o.dampening), f("weight_decay", o.weight_decay);
    f("nesterov", o.nesterov), f("maximize", o.maximize);
  }

  /// Calls `f(key, value)` for every entry of a parameter's state `s` that
  /// a checkpoint holds, for a parameter of a group with options
  /// `options`: with momentum, "momentum_buffer" (PyTorch's key; a
  /// tensor with the parameter's dims); without, nothing. Reading (a const
  /// `s`) a state that has no buffer although momentum is set (momentum
  /// switched on after the last step) throws `optimizer_error`: its next
  /// step would start the buffer afresh, which no tensor can say; writing
  /// (a non-const `s`) marks the buffer as present.
  template <class S, class F>
  static void for_each_state_entry(S& s, const sgd_options& options, F&& f) {
    if (options.momentum == 0.0) return;
    if constexpr (std::is_const_v<S>) {
      if (!s.has_momentum_buffer)
        throw optimizer_error(
            "sgd: a parameter has no momentum buffer yet (momentum was switched on after the last step); "
            "take a step before saving the optimizer's state");
    } else {
      s.has_momentum_buffer = true;
    }
    f("momentum_buffer", s.momentum_buffer);
  }

  /// Throws `shape_error` (naming the parameter and both extents) unless
  /// the momentum buffer of parameter `name`'s state `s`, when momentum
  /// uses it, has the parameter's extents: a parameter rebuilt with other
  /// dynamic extents since the first step. `step` and
  /// `save_optimizer_state` call it.
  template <class P>
  static void check_state(const std::string& name, const P& p, const sgd_state<P>& s, const sgd_options& options) {
    if (options.momentum != 0.0 && s.has_momentum_buffer)
      detail::check_state_extents(name, p, "momentum_buffer", s.momentum_buffer);
  }

 private:
  friend optimizer_base<sgd, sgd_state, sgd_options>;

  // One update of p with the options of its group and learning rate lr_.
  template <class P>
  static void update(P& p, sgd_state<P>& s, const sgd_options& options, double lr_) {
    using T = typename P::value_type;
    const std::size_t n = p.value.size();
    T* v = p.value.data();
    const T* g = p.grad.data();
    const T wd = T(options.weight_decay), mom = T(options.momentum), damp = T(1.0 - options.dampening),
            lr = T(lr_);
    const bool first = options.momentum != 0.0 && !s.has_momentum_buffer;
    if (first) {
      s.momentum_buffer = P::tensor_type::from_extents(p.value.extents());
      s.has_momentum_buffer = true;
    }
    T* b = options.momentum != 0.0 ? s.momentum_buffer.data() : nullptr;
    for (std::size_t k = 0; k < n; ++k) {
      T d = options.maximize ? -g[k] : g[k];
      if (options.weight_decay != 0.0) d = d + wd * v[k];
      if (b) {
        b[k] = first ? d : b[k] * mom + damp * d;
        d = options.nesterov ? d + mom * b[k] : b[k];
      }
      v[k] = v[k] - lr * d;
    }
  }
};

}  // namespace dimsum::optim
