#pragma once
/// \file
/// `optim::clip_grad_norm`: scales every gradient of a module so that their
/// global norm is at most `max_norm`, as `torch.nn.utils.clip_grad_norm_`
/// (PyTorch 1.13) does, and returns the norm before clipping. See
/// tests/unit/optim_optimizers.cpp.

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include <dimsum/nn/module.hpp>
#include <dimsum/optim/parameter_states.hpp>

namespace dimsum::optim {

/// Clips the gradients of every parameter of `m` by their global norm:
/// with `total` the `norm_type`-norm of all gradient elements together
/// (`norm_type` = infinity: the largest magnitude), every gradient is
/// multiplied by `min(1, max_norm / (total + 1e-6))`. Returns `total`, the
/// norm before clipping. A non-finite total is returned, not thrown, as
/// PyTorch's default `error_if_nonfinite=False` does. Frozen parameters
/// (`requires_grad == false`, and every `frozen_parameter`) are left out, as PyTorch leaves out a
/// parameter without grad. Throws
/// `optimizer_error` if `norm_type` is not positive.
///
///     double norm = optim::clip_grad_norm(model, 1.0);
template <class M>
double clip_grad_norm(M& m, double max_norm, double norm_type = 2.0) {
  if (!(norm_type > 0.0)) throw optimizer_error(nn::detail::cat("clip_grad_norm: invalid norm_type ", std::to_string(norm_type)));
  const bool inf = std::isinf(norm_type);
  double acc = 0.0;
  nn::for_each_parameter(m, [&](const std::string&, const auto& p) {
    if constexpr (!is_frozen_parameter_v<decltype(p)>) {
      if (!p.requires_grad) return;
      const auto* g = p.grad.data();
      for (std::size_t k = 0; k < p.grad.size(); ++k) {
        const double a = std::abs(double(g[k]));
        if (inf)
          acc = std::isnan(a) || std::isnan(acc) ? std::numeric_limits<double>::quiet_NaN() : std::max(acc, a);
        else
          acc += norm_type == 2.0 ? a * a : std::pow(a, norm_type);
      }
    }
  });
  const double total = inf ? acc : (norm_type == 2.0 ? std::sqrt(acc) : std::pow(acc, 1.0 / norm_type));
  const double coef = std::min(max_norm / (total + 1e-6), 1.0);
  nn::for_each_parameter(m, [&](const std::string&, auto& p) {
    if constexpr (!is_frozen_parameter_v<decltype(p)>) {
      if (!p.requires_grad) return;
      using T = typename std::remove_cvref_t<decltype(p)>::value_type;
      auto* g = p.grad.data();
      for (std::size_t k = 0; k < p.grad.size(); ++k) g[k] = g[k] * T(coef);
    }
  });
  return total;
}

}  // namespace dimsum::optim
