#pragma once
/// \file
/// Parameter groups (PyTorch's `param_groups`): an optimizer's parameters
/// split into groups, each with its own options (learning rate, weight
/// decay, betas, momentum). A group takes the parameters its `selector`
/// accepts, by dotted name (`name_matches("*.bias")`), by dims
/// (`rank_is(1)`, `has_dim<d_model>()`) or by any predicate on
/// `parameter_info`; the optimizer's own options are group 0, which takes
/// every parameter no other group takes. See tests/unit/optim_optimizers.cpp.
///
///     optim::adamw opt({.lr = 3e-4, .weight_decay = 0.1});          // group 0: the matrices
///     opt.add_group(optim::rank_is(1) || optim::name_matches("embed.*")).options.weight_decay = 0.0;

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include <dimsum/core/dim.hpp>

namespace dimsum::optim {

/// What a group's selector sees of a parameter: its dotted name
/// ("blocks.0.attn.W_Q") and its dim names in order.
struct parameter_info {
  std::string_view name;
  std::span<const std::string_view> dims;
  /// The number of dims (1 for a bias or a norm's weight).
  std::size_t rank() const { return dims.size(); }
  /// Whether the parameter has a dim named `d`.
  bool has_dim(std::string_view d) const {
    for (auto n : dims)
      if (n == d) return true;
    return false;
  }
};

/// Which parameters a group takes: a predicate on `parameter_info`,
/// combined with `!`, `&&` and `||`.
class selector {
 public:
  /// Any callable `bool(const parameter_info&)`.
  template <class F>
    requires(std::is_invocable_r_v<bool, const F&, const parameter_info&> &&
             !std::is_same_v<std::remove_cvref_t<F>, selector>)
  selector(F f) : f_(std::move(f)) {}

  bool operator()(const parameter_info& p) const { return f_(p); }

  friend selector operator!(selector a) {
    return selector([a = std::move(a)](const parameter_info& p) { return !a(p); });
  }
  friend selector operator&&(selector a, selector b) {
    return selector([a = std::move(a), b = std::move(b)](const parameter_info& p) { return a(p) && b(p); });
  }
  friend selector operator||(selector a, selector b) {
    return selector([a = std::move(a), b = std::move(b)](const parameter_info& p) { return a(p) || b(p); });
  }

 private:
  std::function<bool(const parameter_info&)> f_;
};

namespace detail {
// Glob matching as fnmatch without special treatment of '.': '*' matches
// any run of characters (dots included), '?' any one character.
inline bool glob_match(std::string_view pattern, std::string_view s) {
  std::size_t p = 0, i = 0, star = std::string_view::npos, mark = 0;
  while (i < s.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == s[i])) {
      ++p, ++i;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++, mark = i;
    } else if (star != std::string_view::npos) {
      p = star + 1, i = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}
}  // namespace detail

/// The parameters whose dotted name matches the glob `pattern` ('*' any
/// run of characters, dots included; '?' one character): "*.bias",
/// "embed.*", "blocks.?.ln*".
inline selector name_matches(std::string pattern) {
  return selector([pattern = std::move(pattern)](const parameter_info& p) { return detail::glob_match(pattern, p.name); });
}

/// The parameters of rank `r` (`rank_is(1)`: biases and norm weights).
inline selector rank_is(std::size_t r) {
  return selector([r](const parameter_info& p) { return p.rank() == r; });
}

/// The parameters that have dim `D`.
template <dimension D>
selector has_dim() {
  return selector([](const parameter_info& p) { return p.has_dim(D::name.view()); });
}

/// One group of an optimizer after group 0: the parameters `select` takes
/// and their `options`.
template <class Options>
struct param_group {
  selector select;
  Options options;
};

}  // namespace dimsum::optim
