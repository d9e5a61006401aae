#pragma once
/// \file
/// The order in which einsum contracts three or more operands, and the dims
/// it sums out of a single operand first. Compile time, names only: these
/// choose *which* contractions run; ops/einsum.hpp runs them (each pair on
/// the GEMM kernel, into an intermediate tensor of the kept dims).
///
///     einsum<"a b, b c, c d -> a d">(x, y, z)
///       step 1: the pair whose intermediate keeps the fewest dims: (x, y) -> (a, c)
///       step 2: (a c), (c d) -> (a d)
///
/// Extents are unknown at compile time, so fewer dims is the proxy for a
/// smaller intermediate; ties go to the leftmost pair.

#include <array>
#include <cstddef>
#include <string_view>
#include <tuple>

#include <dimsum/core/dim_list.hpp>

namespace dimsum::plan {

/// Whether a dim named `name` is needed outside operands ex1 and ex2 of a
/// contraction into Out of operands with dims Ls: by the output or by
/// another operand.
template <class Out, class... Ls>
constexpr bool needed_outside(std::string_view name, std::size_t ex1, std::size_t ex2) {
  using detail::find_name;
  using detail::npos;
  bool found = find_name(Out::names, name) != npos;
  std::size_t k = 0;
  ((found = found || (k != ex1 && k != ex2 && find_name(Ls::names, name) != npos), ++k), ...);
  return found;
}

/// The positions in U of the dims needed outside operands Ex1 and Ex2.
template <class U, class Out, std::size_t Ex1, std::size_t Ex2, class... Ls>
constexpr auto kept_positions() {
  constexpr std::size_t n = [] {
    std::size_t c = 0;
    for (auto name : U::names) c += needed_outside<Out, Ls...>(name, Ex1, Ex2) ? 1 : 0;
    return c;
  }();
  std::array<std::size_t, n> idx{};
  std::size_t c = 0;
  for (std::size_t i = 0; i < U::size; ++i)
    if (needed_outside<Out, Ls...>(U::names[i], Ex1, Ex2)) idx[c++] = i;
  return idx;
}

/// The dims of U (a dim_list) needed outside operands Ex1 and Ex2 of a
/// contraction into Out of operands with dims Ls: the intermediate of
/// contracting Ex1 with Ex2 (U their union), or, with Ex1 == Ex2 == K,
/// operand K with the dims no one else needs summed out.
template <class U, class Out, std::size_t Ex1, std::size_t Ex2, class... Ls>
using kept_t = detail::select_t<U, kept_positions<U, Out, Ex1, Ex2, Ls...>()>;

/// The pair of operands whose contraction leaves the fewest dims (ties: the
/// leftmost pair).
template <class Out, class... Ls>
constexpr std::array<std::size_t, 2> cheapest_pair() {
  using detail::npos;
  constexpr std::size_t N = sizeof...(Ls);
  const std::array<const std::string_view*, N> names{Ls::names.data()...};
  const std::array<std::size_t, N> sizes{Ls::size...};
  std::array<std::size_t, 2> best{0, 1};
  std::size_t best_rank = npos;
  for (std::size_t i = 0; i < N; ++i)
    for (std::size_t j = i + 1; j < N; ++j) {
      std::size_t rank = 0;
      for (std::size_t x = 0; x < sizes[i]; ++x) rank += needed_outside<Out, Ls...>(names[i][x], i, j) ? 1 : 0;
      for (std::size_t x = 0; x < sizes[j]; ++x) {
        bool in_i = false;
        for (std::size_t y = 0; y < sizes[i]; ++y) in_i = in_i || names[i][y] == names[j][x];
        rank += !in_i && needed_outside<Out, Ls...>(names[j][x], i, j) ? 1 : 0;
      }
      if (rank < best_rank) {
        best_rank = rank;
        best = {i, j};
      }
    }
  return best;
}

/// One pairwise step of a contraction into Out of N >= 3 operands with dims
/// Ls: contract operands `first` and `second` into an intermediate with the
/// dims `kept`, then contract it with the `others` (in their order) into Out.
template <class Out, class... Ls>
struct pairwise_step {
  static constexpr std::size_t n = sizeof...(Ls);
  static_assert(n >= 3, "dimsum: a pairwise step needs three or more operands");
  static constexpr std::array<std::size_t, 2> pair = cheapest_pair<Out, Ls...>();
  static constexpr std::size_t first = pair[0], second = pair[1];
  static constexpr std::array<std::size_t, n - 2> others = [] {
    std::array<std::size_t, n - 2> o{};
    for (std::size_t k = 0, c = 0; k < n; ++k)
      if (k != first && k != second) o[c++] = k;
    return o;
  }();
  using kept = kept_t<union_t<std::tuple_element_t<first, std::tuple<Ls...>>,
                              std::tuple_element_t<second, std::tuple<Ls...>>>,
                      Out, first, second, Ls...>;
};

}  // namespace dimsum::plan
