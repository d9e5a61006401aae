#pragma once
/// \file
/// `optim::warmup_cosine_schedule`: the learning rate rises linearly from 0
/// over `warmup_steps`, then decays along a half cosine to `min_lr` at
/// `total_steps`, and stays there. See tests/unit/optim_optimizers.cpp.

#include <cmath>
#include <cstddef>
#include <limits>
#include <numbers>
#include <string>

#include <dimsum/optim/parameter_states.hpp>

namespace dimsum::optim {

/// Linear warmup then cosine decay. For step s (0-based: the s-th call of
/// `step`, as PyTorch's `LambdaLR` counts), with W = warmup_steps and
/// N = total_steps:
///
///     s < W:        lr = base_lr * s / W
///     W <= s < N:   lr = min_lr + (base_lr - min_lr) * (1 + cos(pi * (s - W) / (N - W))) / 2
///     s >= N:       lr = min_lr
///
/// With min_lr = 0 this is Hugging Face's `get_cosine_schedule_with_warmup`
/// (num_cycles = 0.5), except that it stays at min_lr after N instead of
/// rising again.
///
///     optim::warmup_cosine_schedule schedule{.base_lr = 3e-4, .warmup_steps = 100, .total_steps = 5000};
///     opt.options.lr = schedule(step);              // one group
///     opt.set_lr_factor(schedule.factor(step));      // every group, each from its own lr
struct warmup_cosine_schedule {
  double base_lr = std::numeric_limits<double>::quiet_NaN();  // required
  std::size_t warmup_steps = 0;
  std::size_t total_steps = 0;  // required
  double min_lr = 0.0;

  /// The learning rate for step `s`; throws `optimizer_error` if base_lr
  /// or total_steps was left out (a schedule that would give min_lr at
  /// every step, or NaN), or if `warmup_steps > total_steps`.
  double operator()(std::size_t s) const {
    if (std::isnan(base_lr)) throw optimizer_error("warmup_cosine_schedule: base_lr is required");
    if (total_steps == 0)
      throw optimizer_error("warmup_cosine_schedule: total_steps is required (0 would give min_lr at every step)");
    if (warmup_steps > total_steps)
      throw optimizer_error(nn::detail::cat("warmup_cosine_schedule: warmup_steps (", std::to_string(warmup_steps),
                                            ") exceeds total_steps (", std::to_string(total_steps), ")"));
    if (s < warmup_steps) return base_lr * double(s) / double(warmup_steps);
    if (s >= total_steps) return min_lr;
    const double progress = double(s - warmup_steps) / double(total_steps - warmup_steps);
    return min_lr + (base_lr - min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
  }

  /// The schedule as a factor of the base rate, `(*this)(s) / base_lr`
  /// (PyTorch's `LambdaLR` lambda): with parameter groups,
  /// `opt.set_lr_factor(schedule.factor(s))` gives each group its own
  /// `lr` times the factor. Throws as `operator()` does, and if base_lr is
  /// not above 0.
  double factor(std::size_t s) const {
    const double lr = (*this)(s);
    if (!(base_lr > 0.0)) throw optimizer_error("warmup_cosine_schedule: factor() needs a base_lr above 0");
    return lr / base_lr;
  }
};

}  // namespace dimsum::optim
