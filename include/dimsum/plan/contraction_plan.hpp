#pragma once
/// \file
/// Compile-time contraction planning. Every dim of an einsum becomes a
/// *label*; the output's labels come first, then the summed ones, in order
/// of first appearance. For a two-operand contraction each label gets a
/// role: batch (both operands and the output), M (first operand and
/// output), N (second operand and output), K (both operands, not the
/// output), or pre-reduced (one operand only, not the output). Names stop
/// here: kernels receive extents and strides per label.

#include <array>
#include <cstddef>
#include <string_view>

#include <dimsum/core/dim_list.hpp>

namespace dimsum::plan {

enum class role { batch, m, n, k, reduce_a, reduce_b };

template <class Out, class... In>
struct contraction_plan {
  static constexpr std::size_t n_inputs = sizeof...(In);
  static constexpr std::size_t n_out = Out::size;

  // Every label once: the output's, then each operand's new ones in order.
  struct label_set {
    std::array<std::string_view, (Out::size + ... + In::size)> names{};
    std::size_t size = 0;
  };
  static constexpr label_set all_labels = [] {
    label_set set;
    for (std::size_t i = 0; i < Out::size; ++i) set.names[set.size++] = Out::names[i];
    auto add = [&](const auto& names) {
      for (auto name : names) {
        bool found = false;
        for (std::size_t i = 0; i < set.size; ++i) found = found || set.names[i] == name;
        if (!found) set.names[set.size++] = name;
      }
    };
    (add(In::names), ...);
    return set;
  }();

  static constexpr std::size_t n_labels = all_labels.size;

  /// Label names: the output's, then the summed ones.
  static constexpr std::array<std::string_view, n_labels> labels = [] {
    std::array<std::string_view, n_labels> out{};
    for (std::size_t i = 0; i < n_labels; ++i) out[i] = all_labels.names[i];
    return out;
  }();

  /// position[j][l]: where label l sits in operand j's dims (npos if absent).
  static constexpr std::array<std::array<std::size_t, n_labels>, n_inputs> position = [] {
    std::array<std::array<std::size_t, n_labels>, n_inputs> p{};
    std::size_t j = 0;
    auto fill = [&](const auto& names) {
      for (std::size_t l = 0; l < n_labels; ++l) p[j][l] = detail::find_name(names, labels[l]);
      ++j;
    };
    (fill(In::names), ...);
    return p;
  }();

  /// The role of each label in a two-operand contraction.
  static constexpr std::array<role, n_labels> roles = [] {
    std::array<role, n_labels> r{};
    if constexpr (n_inputs == 2) {
      for (std::size_t l = 0; l < n_labels; ++l) {
        const bool a = position[0][l] != detail::npos;
        const bool b = position[1][l] != detail::npos;
        const bool o = l < n_out;
        r[l] = a && b ? (o ? role::batch : role::k)
               : a    ? (o ? role::m : role::reduce_a)
                      : (o ? role::n : role::reduce_b);
      }
    }
    return r;
  }();

  static constexpr std::size_t count(role x) {
    std::size_t c = 0;
    for (auto r : roles) c += r == x;
    return c;
  }
};

}  // namespace dimsum::plan
