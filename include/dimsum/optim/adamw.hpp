#pragma once
/// \file
/// `optim::adamw`: Adam with decoupled weight decay (Loshchilov & Hutter),
/// with PyTorch 1.13's update (`torch.optim.AdamW`, `_single_tensor_adamw`)
/// and its defaults, AMSGrad optional. The moments of each parameter have
/// that parameter's dims. See tests/unit/optim_optimizers.cpp.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>

#include <dimsum/kernels/reduce.hpp>
#include <dimsum/kernels/simd.hpp>
#include <dimsum/nn/module.hpp>
#include <dimsum/optim/parameter_states.hpp>

namespace dimsum::optim {

/// AdamW's hyper-parameters with `torch.optim.AdamW`'s defaults.
struct adamw_options {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
  bool maximize = false;
};

/// The state AdamW keeps per parameter `P`: its step count and the first
/// and second moments (and their running maximum with AMSGrad), each with
/// the parameter's dims; zeros when created, as in PyTorch.
template <class P>
struct adamw_state {
  explicit adamw_state(const P& p)
      : exp_avg(P::tensor_type::from_extents(p.value.extents())),
        exp_avg_sq(P::tensor_type::from_extents(p.value.extents())) {}
  std::int64_t step = 0;
  typename P::tensor_type exp_avg;
  typename P::tensor_type exp_avg_sq;
  typename P::tensor_type max_exp_avg_sq;  // used with amsgrad only
};

/// AdamW, PyTorch 1.13's formula: for each element, with g the gradient
/// (negated if `maximize`), p the value and t the parameter's step count
/// after incrementing it,
///
///     p = p * (1 - lr * weight_decay)
///     m = beta1 * m + (1 - beta1) * g
///     v = beta2 * v + (1 - beta2) * g * g
///     v_hat = amsgrad ? (v_max = max(v_max, v)) : v
///     p = p - lr / (1 - beta1^t) * m / (sqrt(v_hat) / sqrt(1 - beta2^t) + eps)
///
///     optim::adamw opt({.lr = 3e-4});
///     opt.step(model);
class adamw : public optimizer_base<adamw, adamw_state, adamw_options> {
 public:
  /// Checks the options as PyTorch does (lr, eps, weight_decay not negative,
  /// 0 <= beta < 1); otherwise throws `optimizer_error`.
  explicit adamw(adamw_options o = {}) : options(o) { check_options(o); }

  /// Throws `optimizer_error` for options PyTorch refuses (see the
  /// constructor); `add_group` and every step check each group's options so.
  static void check_options(const adamw_options& o) {
    if (!(o.lr >= 0.0)) throw optimizer_error(nn::detail::cat("adamw: invalid learning rate ", std::to_string(o.lr)));
    if (!(o.eps >= 0.0)) throw optimizer_error(nn::detail::cat("adamw: invalid epsilon ", std::to_string(o.eps)));
    if (!(o.beta1 >= 0.0 && o.beta1 < 1.0)) throw optimizer_error(nn::detail::cat("adamw: invalid beta1 ", std::to_string(o.beta1)));
    if (!(o.beta2 >= 0.0 && o.beta2 < 1.0)) throw optimizer_error(nn::detail::cat("adamw: invalid beta2 ", std::to_string(o.beta2)));
    if (!(o.weight_decay >= 0.0))
      throw optimizer_error(nn::detail::cat("adamw: invalid weight_decay ", std::to_string(o.weight_decay)));
  }

  /// The hyper-parameters of group 0 (every parameter no added group
  /// takes); `options.lr` may be changed between steps.
  adamw_options options;

  /// The optimizer's name in a checkpoint of its state.
  static constexpr std::string_view name = "adamw";

  /// Calls `f(name, value)` for every option of `o` (a possibly const
  /// `adamw_options`): what a checkpoint of the optimizer stores
  /// (io/optimizer_state.hpp), with PyTorch's `param_groups` names except
  /// that the betas are two.
  template <class O, class F>
  static void for_each_option(O& o, F&& f) {
    f("lr", o.lr), f("beta1", o.beta1), f("beta2", o.beta2), f("eps", o.eps), f("weight_decay", o.weight_decay);
    f("amsgrad", o.amsgrad), f("maximize", o.maximize);
  }

  /// Calls `f(key, value)` for every entry of a parameter's state `s` that
  /// a checkpoint holds, with PyTorch's keys, for a parameter of a group
  /// with options `o`: "step" (an `std::int64_t`), "exp_avg", "exp_avg_sq",
  /// and with amsgrad "max_exp_avg_sq" (tensors with the parameter's dims;
  /// the last may not be allocated yet, when amsgrad was switched on after
  /// the last step: it then stands for zeros, as the next step would
  /// create it).
  template <class S, class F>
  static void for_each_state_entry(S& s, const adamw_options& o, F&& f) {
    f("step", s.step), f("exp_avg", s.exp_avg), f("exp_avg_sq", s.exp_avg_sq);
    if (o.amsgrad) f("max_exp_avg_sq", s.max_exp_avg_sq);
  }

  /// Throws `shape_error` (naming the parameter, the buffer and both
  /// extents) unless the moments of parameter `name`'s state `s` have the
  /// parameter's extents: a parameter rebuilt with other dynamic extents
  /// since the first step; and `optimizer_error` unless its step count is
  /// at least 0 and below INT64_MAX (a step from -1 divides by a bias
  /// correction of 0, one from INT64_MAX overflows the count).
  /// `step`, `save_optimizer_state` and `load_optimizer_state` call it.
  template <class P>
  static void check_state(const std::string& name, const P& p, const adamw_state<P>& s, const adamw_options&) {
    if (s.step < 0 || s.step == std::numeric_limits<std::int64_t>::max())
      throw optimizer_error(nn::detail::cat("adamw: parameter '", name, "' has step count ", std::to_string(s.step),
                                            "; a step count is at least 0 and below 2^63 - 1"));
    detail::check_state_extents(name, p, "exp_avg", s.exp_avg);
    detail::check_state_extents(name, p, "exp_avg_sq", s.exp_avg_sq);
    if (s.max_exp_avg_sq.size() != 0) detail::check_state_extents(name, p, "max_exp_avg_sq", s.max_exp_avg_sq);
  }

 private:
  friend optimizer_base<adamw, adamw_state, adamw_options>;

  // One update of p with the options of its group and learning rate lr.
  template <class P>
  static void update(P& p, adamw_state<P>& s, const adamw_options& options, double lr) {
    using T = typename P::value_type;
    s.step += 1;
    // The scalars are Python floats in PyTorch: computed in double, then
    // used in the parameter's type.
    const double t = double(s.step);
    const double bias_correction1 = 1.0 - std::pow(options.beta1, t);
    const double bias_correction2 = 1.0 - std::pow(options.beta2, t);
    const T step_size = T(lr / bias_correction1);
    const T bc2_sqrt = T(std::sqrt(bias_correction2));
    const T decay = T(1.0 - lr * options.weight_decay);
    const T b1 = T(options.beta1), b2 = T(options.beta2), one_b1 = T(1.0 - options.beta1),
            one_b2 = T(1.0 - options.beta2), eps = T(options.eps);
    if (options.amsgrad && s.max_exp_avg_sq.size() != p.value.size())
      s.max_exp_avg_sq = P::tensor_type::from_extents(p.value.extents());
    const std::size_t n = p.value.size();
    T* v = p.value.data();
    const T* g = p.grad.data();
    T* m = s.exp_avg.data();
    T* q = s.exp_avg_sq.data();
    T* qmax = options.amsgrad ? s.max_exp_avg_sq.data() : nullptr;
    std::size_t k = 0;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      // Whole vectors (the loop below's operations in its order; square
      // root and division are exact in both), the rest and AMSGrad or
      // maximize by the loop.
      using ops = kernels::detail::simd_ops<T, kernels::detail::sum_arch<T>>;
      if constexpr (ops::width > 1) {
        using B = typename ops::vec;
        if (!options.amsgrad && !options.maximize) {
          for (; k + ops::width <= n; k += ops::width) {
            const B gk = ops::loadu(g + k);
            const B mk = ops::loadu(m + k) * B(b1) + B(one_b1) * gk;
            const B qk = ops::loadu(q + k) * B(b2) + B(one_b2) * (gk * gk);
            const B denom = xsimd::sqrt(qk) / B(bc2_sqrt) + B(eps);
            ops::storeu(v + k, ops::loadu(v + k) * B(decay) - B(step_size) * (mk / denom));
            ops::storeu(m + k, mk);
            ops::storeu(q + k, qk);
          }
        }
      }
    }
    for (; k < n; ++k) {
      const T gk = options.maximize ? -g[k] : g[k];
      v[k] = v[k] * decay;
      m[k] = m[k] * b1 + one_b1 * gk;
      q[k] = q[k] * b2 + one_b2 * (gk * gk);
      T second = q[k];
      if (qmax) second = qmax[k] = std::max(qmax[k], q[k]);
      const T denom = std::sqrt(second) / bc2_sqrt + eps;
      v[k] = v[k] - step_size * (m[k] / denom);
    }
  }
};

}  // namespace dimsum::optim
