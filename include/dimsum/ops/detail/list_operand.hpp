#pragma once
/// \file
/// A list of same-typed named expressions (std::vector or std::array) as a
/// pattern's operand, as einops takes a list of arrays: the elements are
/// stacked along a new leading dim named by the pattern.

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <dimsum/core/einsum_string.hpp>
#include <dimsum/tensor/tensor.hpp>

namespace dimsum::detail {

/// The label that starts the first term of pattern s (the name of a list
/// operand's dim), or an empty view when it starts otherwise (`...`, a
/// group, `1`).
constexpr std::string_view leading_label(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size() && is_space(s[i])) ++i;
  if (i == s.size() || !is_label_start(s[i])) return {};
  std::size_t j = i;
  while (j < s.size() && is_label_char(s[j])) ++j;
  if (j < s.size() && s[j] == '(') return {};
  return s.substr(i, j - i);
}

/// The elements of `list` (same dims, extents checked) stacked along the
/// new leading dim N: a tensor of dims (N, the elements' dims...).
template <dimension N, class List>
auto stack_list(const List& list) {
  using E = typename List::value_type;
  using L = dims_of_t<E>;
  using R = typename concat<dim_list<N>, L>::type;
  using T = value_type_of_t<E>;
  if (list.size() == 0)
    throw shape_error("a pattern's list operand is empty: its elements' extents are unknown (einops raises here too)");
  std::array<std::size_t, R::size> ext{};
  ext[0] = list.size();
  const auto first = list[0].extents();
  for (std::size_t i = 0; i < L::size; ++i) ext[i + 1] = first[i];
  for (std::size_t k = 1; k < list.size(); ++k) {
    const auto e = list[k].extents();
    for (std::size_t i = 0; i < L::size; ++i)
      if (e[i] != first[i])
        throw shape_error("a pattern's list operand: dim '" + std::string(L::names[i]) + "' has extent " +
                          std::to_string(first[i]) + " in element 0 but " + std::to_string(e[i]) + " in element " +
                          std::to_string(k));
  }
  auto out = tensor_for_t<T, R>::from_extents(ext);
  if (out.size() == 0) return out;
  const auto st = out.strides();
  std::array<std::size_t, L::size> part_ext{};
  std::array<std::ptrdiff_t, L::size> part_st{};
  for (std::size_t i = 0; i < L::size; ++i) {
    part_ext[i] = ext[i + 1];
    part_st[i] = st[i + 1];
  }
  for (std::size_t k = 0; k < list.size(); ++k)
    list[k].eval_to(strided<T, L::size>{out.data() + static_cast<std::ptrdiff_t>(k) * st[0], part_ext, part_st});
  return out;
}

}  // namespace dimsum::detail
