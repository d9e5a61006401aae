#pragma once
/// \file
/// The string spelling of einsum and rearrange: parses the string at compile
/// time, checks each term against its operand's dims, resolves grouped axes
/// (splits of input dims, named merges in the output) and hands a flat
/// contraction to make_einsum. Included by ops/einsum.hpp.

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <dimsum/core/einsum_string.hpp>
#include <dimsum/ops/detail/einsum_ellipsis.hpp>
#include <dimsum/ops/detail/list_operand.hpp>
#include <dimsum/ops/detail/pattern_checks.hpp>
#include <dimsum/ops/einsum.hpp>  // make_einsum; einsum.hpp includes this header back at its end
#include <dimsum/ops/regroup.hpp>

namespace dimsum::detail {

template <fixed_string S>
inline constexpr parsed_einsum parsed_v = parse_einsum(S.view());

// Term T of S; T == n_inputs is the output term.
template <fixed_string S, std::size_t T>
constexpr const einsum_term& term_of() {
  if constexpr (T == parsed_v<S>.n_inputs)
    return parsed_v<S>.output;
  else
    return parsed_v<S>.inputs[T];
}

// Flat label I of term T, and the name of item I of term T.
template <fixed_string S, std::size_t T, std::size_t I>
struct label_getter {
  constexpr std::string_view operator()() const { return term_of<S, T>().labels[I]; }
};
template <fixed_string S, std::size_t T, std::size_t I>
struct item_name_getter {
  constexpr std::string_view operator()() const { return term_of<S, T>().items[I].name; }
};
template <fixed_string S, std::size_t T, std::size_t I>
using label_name_t = to_label_t<label_getter<S, T, I>>;

template <fixed_string S, std::size_t T, class Seq = std::make_index_sequence<term_of<S, T>().n_items>>
struct term_items;
template <fixed_string S, std::size_t T, std::size_t... I>
struct term_items<S, T, std::index_sequence<I...>> {
  using type = labels<to_label_t<item_name_getter<S, T, I>>...>;
};
template <fixed_string S, std::size_t T, std::size_t First, class Seq>
struct group_labels;
template <fixed_string S, std::size_t T, std::size_t First, std::size_t... I>
struct group_labels<S, T, First, std::index_sequence<I...>> {
  using type = labels<label_name_t<S, T, First + I>...>;
};

/// Reports the syntax error of the string S (call it only when there is one:
/// the condition is the pure `parsed_v<S>.error != einsum_parse_error::none`,
/// so that clang does not count the report twice).
template <fixed_string S>
constexpr void report_einsum_syntax() {
  constexpr parsed_einsum p = parsed_v<S>;
  using E = einsum_parse_error;
  using Pos = position_c<p.error_pos>;
  if constexpr (p.error == E::no_arrow)
    report<einsum_string_has_no_arrow<Pos>>();
  else if constexpr (p.error == E::more_than_one_arrow)
    report<einsum_string_has_more_than_one_arrow<Pos>>();
  else if constexpr (p.error == E::empty_input_term)
    report<einsum_string_has_an_empty_input_term<Pos, count_c<p.error_term>>>();
  else if constexpr (p.error == E::invalid_character)
    report<einsum_string_has_an_invalid_character<Pos, count_c<p.error_term>, character<S.data[p.error_pos]>>>();
  else if constexpr (p.error == E::unbalanced_parentheses)
    report<einsum_string_has_unbalanced_parentheses<Pos, count_c<p.error_term>>>();
  else if constexpr (p.error == E::number_other_than_1)
    report<einsum_string_has_a_number_other_than_1<Pos, count_c<p.error_term>>>();
  else if constexpr (p.error == E::too_many_labels)
    report<einsum_string_has_too_many_labels<Pos>>();
  else if constexpr (p.error == E::label_twice_in_a_term) {
    struct get {
      constexpr std::string_view operator()() const { return parsed_v<S>.error_label; }
    };
    report<einsum_term_names_a_label_twice<to_label_t<get>, count_c<p.error_term>>>();
  }
}

// How term J of S lists operand J's dims L: item i stands for dim i, by its
// name (a label, or a group's name) or, for an unnamed group, by position.
template <fixed_string S, std::size_t J, class L>
struct einsum_term_match {
  static constexpr const einsum_term& t = parsed_v<S>.inputs[J];
  static constexpr std::size_t foreign = [] {
    for (std::size_t i = 0; i < t.n_items; ++i)
      if (!t.items[i].name.empty() && find_name(L::names, t.items[i].name) == npos) return i;
    return npos;
  }();
  static constexpr std::size_t unlisted = [] {
    if (t.n_items >= L::size) return npos;
    for (std::size_t d = 0; d < L::size; ++d) {
      bool found = false;
      for (std::size_t i = 0; i < t.n_items; ++i) found = found || t.items[i].name == L::names[d];
      if (!found) return d;
    }
    return t.n_items;
  }();
  static constexpr bool in_order = [] {
    for (std::size_t i = 0; i < t.n_items && i < L::size; ++i)
      if (!t.items[i].name.empty() && t.items[i].name != L::names[i]) return false;
    return true;
  }();
  static constexpr bool ok = foreign == npos && unlisted == npos && t.n_items <= L::size && in_order;
  // A dim of L that the term leaves out (neither named nor standing at an
  // unnamed group's position), preferring the foreign label's position: the
  // dim a rename to the foreign label would bring in.
  static constexpr std::size_t left_out = [] {
    auto left = [](std::size_t d) {
      if (d < t.n_items && t.items[d].name.empty()) return false;
      for (std::size_t i = 0; i < t.n_items; ++i)
        if (t.items[i].name == L::names[d]) return false;
      return true;
    };
    if (foreign < L::size && left(foreign)) return foreign;
    for (std::size_t d = 0; d < L::size; ++d)
      if (left(d)) return d;
    return npos;
  }();
};

/// Reports the first way term J of S fails to list operand J's dims L in
/// order (call it only when `einsum_term_match<S, J, L>::ok` is false).
template <fixed_string S, std::size_t J, class L>
constexpr void report_einsum_term() {
  using M = einsum_term_match<S, J, L>;
  using D = diagnostic_dims_t<L>;
  using Label = to_label_t<item_name_getter<S, J, (M::foreign == npos ? 0 : M::foreign)>>;
  if constexpr (M::foreign != npos && M::left_out != npos) {
    report<einsum_label_is_not_a_dim_of_its_operand_did_you_mean_rename<
        Label, operand<J>, D, fix::rename<diagnostic_name_t<at_t<L, M::left_out>>, Label>(operand<J>)>>();
  } else if constexpr (M::foreign != npos) {
    report<einsum_label_is_not_a_dim_of_its_operand<Label, operand<J>, D>>();
  } else if constexpr (M::unlisted != npos) {
    report<einsum_term_does_not_list_every_dim_of_its_operand<diagnostic_name_t<at_t<L, M::unlisted>>, operand<J>,
                                                              D>>();
  } else if constexpr (M::t.n_items > L::size) {
    report<einsum_term_lists_more_dims_than_its_operand_has<operand<J>, typename term_items<S, J>::type, D>>();
  } else {
    report<einsum_term_lists_dims_in_a_different_order_than_its_operand<operand<J>, typename term_items<S, J>::type,
                                                                        D>>();
  }
}

/// The first term of S that does not list its operand's dims Ls in order,
/// or npos: a pure condition (report_einsum_term reports it).
template <fixed_string S, class... Ls>
constexpr std::size_t first_bad_einsum_term() {
  return []<std::size_t... J>(std::index_sequence<J...>) {
    std::size_t bad = npos;
    ((bad = (bad == npos && !einsum_term_match<S, J, Ls>::ok) ? J : bad), ...);
    return bad;
  }(std::index_sequence_for<Ls...>{});
}

/// The dim named by Get{}() in Pool, or a new dynamic dim of that name.
template <class Pool, class Get>
struct resolve_dim {
  static constexpr std::size_t idx = find_name(Pool::names, Get{}());
  static auto pick() {
    if constexpr (idx != npos)
      return std::type_identity<at_t<Pool, idx>>{};
    else
      return std::type_identity<dim<to_fixed_string_v<Get>>>{};
  }
  using type = typename decltype(pick())::type;
};

/// The dims of operand J once its groups are split: its own dim for a plain
/// item, a resolved dim for each label of a group.
template <fixed_string S, std::size_t J, class L, class Pool,
          class Seq = std::make_index_sequence<parsed_v<S>.inputs[J].n_labels>>
struct flat_operand_dims;
template <fixed_string S, std::size_t J, class L, class Pool, std::size_t... K>
struct flat_operand_dims<S, J, L, Pool, std::index_sequence<K...>> {
  static constexpr const einsum_term& t = parsed_v<S>.inputs[J];
  static constexpr auto item_of = [] {
    std::array<std::size_t, einsum_max_labels> a{};
    for (std::size_t i = 0; i < t.n_items; ++i)
      for (std::size_t c = 0; c < t.items[i].count; ++c) a[t.items[i].first + c] = i;
    return a;
  }();
  template <std::size_t Kk>
  static auto pick() {
    constexpr std::size_t i = item_of[Kk];
    if constexpr (!t.items[i].is_group)
      return std::type_identity<at_t<L, i>>{};
    else
      return std::type_identity<typename resolve_dim<Pool, label_getter<S, J, Kk>>::type>{};
  }
  using type = dim_list<typename decltype(pick<K>())::type...>;
};

template <std::size_t First, std::size_t Count>
inline constexpr auto range_v = [] {
  std::array<std::size_t, Count> a{};
  for (std::size_t i = 0; i < Count; ++i) a[i] = First + i;
  return a;
}();

/// Whether dim I of operand J stands at a group of its term (a dim the
/// pattern splits, or drops as a size-1 axis): it does not exist past the
/// split, so a group label of the same name is a new dim.
template <fixed_string S, std::size_t J>
constexpr bool split_by_pattern(std::size_t i) {
  constexpr const einsum_term& t = parsed_v<S>.inputs[J];
  return i < t.n_items && t.items[i].is_group;
}

/// The dims of L that term J of S does not split.
template <fixed_string S, std::size_t J, class L>
constexpr auto unsplit_positions() {
  constexpr std::size_t n = [] {
    std::size_t c = 0;
    for (std::size_t i = 0; i < L::size; ++i) c += split_by_pattern<S, J>(i) ? 0 : 1;
    return c;
  }();
  std::array<std::size_t, n> a{};
  std::size_t c = 0;
  for (std::size_t i = 0; i < L::size; ++i)
    if (!split_by_pattern<S, J>(i)) a[c++] = i;
  return a;
}

/// Where group labels find their dims: the operands' dims that the pattern
/// does not split, then the dims passed after the operands (XL).
template <fixed_string S, class XL, class... Ls>
struct label_pool {
  template <std::size_t... J>
  static auto make(std::index_sequence<J...>)
      -> union_all<select_t<Ls, unsplit_positions<S, J, Ls>()>..., XL>;
  using type = typename decltype(make(std::index_sequence_for<Ls...>{}))::type;
};
template <fixed_string S, class XL, class... Ls>
using label_pool_t = typename label_pool<S, XL, Ls...>::type;

// The run-time extent of dim D from the operands that have it (and do not
// split it), from a dim passed after the operands, or from its static
// extent; false if none.
template <fixed_string S, class D, std::size_t Q, class OpsTuple>
bool extent_from_operand(const OpsTuple& ops, std::size_t& out) {
  using LQ = dims_of_t<std::tuple_element_t<Q, OpsTuple>>;
  constexpr std::size_t p = find_name(LQ::names, D::name.view());
  if constexpr (p == npos || split_by_pattern<S, Q>(p)) {
    return false;
  } else {
    out = std::get<Q>(ops).extents()[p];
    return true;
  }
}
template <fixed_string S, class D, class OpsTuple, std::size_t... Q>
bool extent_from_operands(const OpsTuple& ops, std::size_t& out, std::index_sequence<Q...>) {
  bool found = false;
  ((found = found || extent_from_operand<S, D, Q>(ops, out)), ...);
  return found;
}
template <class D, class X>
bool extent_from_extra(const X& x, std::size_t& out) {
  if (X::name.view() != D::name.view()) return false;
  out = x.value;
  return true;
}
template <class D, class... XS>
bool extent_from_extras(const std::tuple<XS...>& extras, std::size_t& out) {
  return std::apply([&](const auto&... x) { return (extent_from_extra<D>(x, out) || ... || false); }, extras);
}
template <fixed_string S, class D, class OpsTuple, class Extras>
bool label_extent(const OpsTuple& ops, const Extras& extras, std::size_t& out) {
  if constexpr (D::is_static) {
    out = D::static_extent;
    std::size_t given = 0;
    if (std::apply([&](const auto&... x) { return (extent_from_extra<D>(x, given) || ... || false); }, extras) &&
        given != D::static_extent)
      throw shape_error("einsum: dim '" + std::string(D::name.view()) + "' is static with extent " +
                        std::to_string(D::static_extent) + " but was given extent " + std::to_string(given));
    return true;
  } else {
    if (extent_from_operands<S, D>(ops, out, std::make_index_sequence<std::tuple_size_v<OpsTuple>>{})) return true;
    return std::apply([&](const auto&... x) { return (extent_from_extra<D>(x, out) || ... || false); }, extras);
  }
}

/// The run-time extents of the labels of group item I of operand J: from a
/// static extent, another operand's dim of that name, a dim passed after
/// the operands, or (for one label at most) the rest of the whole extent.
template <fixed_string S, std::size_t J, std::size_t I, class Flat, class OpsTuple, class Extras>
std::array<std::size_t, parsed_v<S>.inputs[J].items[I].count> group_extents(const OpsTuple& ops,
                                                                            const Extras& extras,
                                                                            std::size_t whole) {
  constexpr einsum_item item = parsed_v<S>.inputs[J].items[I];
  constexpr std::size_t n = item.count;
  std::array<std::size_t, n> ext{};
  std::array<bool, n> known{};
  [&]<std::size_t... C>(std::index_sequence<C...>) {
    ((known[C] = label_extent<S, at_t<Flat, item.first + C>>(ops, extras, ext[C])), ...);
  }(std::make_index_sequence<n>{});
  std::size_t unknown = npos, product = 1;
  for (std::size_t c = 0; c < n; ++c) {
    if (known[c])
      product *= ext[c];
    else
      unknown = c;
  }
  if (unknown != npos) {
    if (product == 0 || whole % product != 0) {
      using L = dims_of_t<std::tuple_element_t<J, OpsTuple>>;
      std::string known_list;
      for (std::size_t c = 0; c < n; ++c)
        if (known[c])
          known_list += (known_list.empty() ? "" : " x ") + std::string(Flat::names[item.first + c]) + "=" +
                        std::to_string(ext[c]);
      throw shape_error("einsum: dim '" + std::string(L::names[I]) + "' of extent " + std::to_string(whole) +
                        " does not split into a group with " + known_list + " (" + std::to_string(whole) +
                        " is not a multiple of " + std::to_string(product) + ")");
    }
    ext[unknown] = whole / product;
  }
  return ext;
}

// Whether each group label of S has a source for its extent (at most one per
// group may be inferred). Checked at compile time.
template <fixed_string S, std::size_t J, class Flat, class Pool, class... Extras>
constexpr std::size_t first_underdetermined_group() {
  constexpr const einsum_term& t = parsed_v<S>.inputs[J];
  for (std::size_t i = 0; i < t.n_items; ++i) {
    if (!t.items[i].is_group) continue;
    std::size_t unknown = 0;
    for (std::size_t c = 0; c < t.items[i].count; ++c) {
      const std::string_view name = t.labels[t.items[i].first + c];
      const std::size_t k = find_name(Flat::names, name);
      const bool has = Flat::static_extents[k] != dynamic || find_name(Pool::names, name) != npos;
      if (!has) ++unknown;
    }
    if (unknown > 1) return i;
  }
  return npos;
}

using group_extent_table = std::array<std::array<std::size_t, einsum_max_labels>, einsum_max_labels>;

// The extents of every group of operand J, read before any operand is split
// (a split of an rvalue operand moves its storage).
template <fixed_string S, std::size_t J, class Flat, class OpsTuple, class Extras>
group_extent_table all_group_extents(const OpsTuple& ops, const Extras& extras) {
  group_extent_table table{};
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (
        [&] {
          if constexpr (parsed_v<S>.inputs[J].items[I].is_group) {
            const auto e = group_extents<S, J, I, Flat>(ops, extras, std::get<J>(ops).extents()[I]);
            for (std::size_t c = 0; c < e.size(); ++c) table[I][c] = e[c];
          }
        }(),
        ...);
  }(std::make_index_sequence<parsed_v<S>.inputs[J].n_items>{});
  return table;
}

// Splits the group items of operand J from item I - 1 down to 0 (so the
// positions of the items still to split do not move). An lvalue operand
// without groups passes through as the same reference.
template <fixed_string S, std::size_t J, std::size_t I, class Flat, class Op>
decltype(auto) split_groups(Op&& op, const group_extent_table& table) {
  if constexpr (I == 0) {
    if constexpr (std::is_lvalue_reference_v<Op>)
      return static_cast<Op>(op);
    else
      return std::remove_cvref_t<Op>(std::move(op));
  } else {
    constexpr einsum_item item = parsed_v<S>.inputs[J].items[I - 1];
    if constexpr (!item.is_group) {
      return split_groups<S, J, I - 1, Flat>(std::forward<Op>(op), table);
    } else {
      using G = select_t<Flat, range_v<item.first, item.count>>;
      std::array<std::size_t, item.count> ext{};
      for (std::size_t c = 0; c < item.count; ++c) ext[c] = table[I - 1][c];
      return split_groups<S, J, I - 1, Flat>(split_dim<I - 1, G>(std::forward<Op>(op), ext), table);
    }
  }
}

// Merges the named groups of the output and inserts its size-1 axes, from
// item I - 1 down to 0 (so the positions of the items still to do do not
// move).
template <fixed_string S, std::size_t I, class Pool, class E>
auto merge_groups(E&& e) {
  if constexpr (I == 0) {
    return std::forward<E>(e);
  } else {
    constexpr std::size_t out = parsed_v<S>.n_inputs;
    constexpr einsum_item item = parsed_v<S>.output.items[I - 1];
    if constexpr (!item.is_group) {
      return merge_groups<S, I - 1, Pool>(std::forward<E>(e));
    } else if constexpr (is_unit_item(item)) {
      return merge_groups<S, I - 1, Pool>(insert_unit_axis<item.first, unit_axis<I - 1>>(std::forward<E>(e)));
    } else {
      using New = typename resolve_dim<Pool, item_name_getter<S, out, I - 1>>::type;
      // A named size-1 axis `h()` keeps the dim type of that name unless it
      // is static with another extent (a reduced h of 224: then dim<"h", 1>).
      using Unit = std::conditional_t<New::is_static && New::static_extent != 1, dim<New::name, 1>, New>;
      if constexpr (item.count == 0)
        return merge_groups<S, I - 1, Pool>(insert_unit_axis<item.first, Unit>(std::forward<E>(e)));
      else
        return merge_groups<S, I - 1, Pool>(
            merge_expr<item.first, item.count, New, std::remove_cvref_t<E>>(std::forward<E>(e)));
    }
  }
}

/// How a pattern maps its flat operands (groups split, size-1 axes
/// dropped) to its flat output (before the output's groups are merged and
/// its size-1 axes inserted). einsum sums the dims the output lacks.
struct einsum_mode {
  static constexpr bool single_operand = false;
  static constexpr bool keeps_every_dim = false;  // a dim the output lacks is an error
  static constexpr bool adds_dims = false;        // output labels no operand has, extents given as dims
  static constexpr bool ellipsis_on_the_left_only = false;
  template <class FlatOut, class Extras, class... Flat>
  auto apply(const Extras&, Flat&&... flat) const {
    return make_einsum<FlatOut>(std::forward<Flat>(flat)...);
  }
};
/// rearrange: one operand, every dim kept.
struct rearrange_mode : einsum_mode {
  static constexpr bool single_operand = true;
  static constexpr bool keeps_every_dim = true;
  template <class Label>
  static void report_dropped() {
    report<rearrange_drops_a_dim<Label>>();
  }
};

/// The first input item `1`, `()` or `h()` of term J standing for a dim of
/// L whose static extent is not 1, or npos.
template <fixed_string S, std::size_t J, class L>
constexpr std::size_t first_unit_of_another_extent() {
  constexpr const einsum_term& t = parsed_v<S>.inputs[J];
  for (std::size_t i = 0; i < t.n_items && i < L::size; ++i)
    if (t.items[i].is_group && t.items[i].count == 0 && L::static_extents[i] != dynamic && L::static_extents[i] != 1)
      return i;
  return npos;
}

// Whether the dim named n is named by a group of S (a group's name or one
// of its labels, in any term).
template <fixed_string S>
constexpr bool names_a_group_label(std::string_view n) {
  constexpr const parsed_einsum& p = parsed_v<S>;
  bool used = false;
  auto scan = [&](const einsum_term& t) {
    for (std::size_t i = 0; i < t.n_items; ++i) {
      if (!t.items[i].is_group) continue;
      used = used || t.items[i].name == n;
      for (std::size_t c = 0; c < t.items[i].count; ++c) used = used || t.labels[t.items[i].first + c] == n;
    }
  };
  for (std::size_t j = 0; j < p.n_inputs; ++j) scan(p.inputs[j]);
  scan(p.output);
  return used;
}

/// The output's flat dims: each output label's dim from the operands' flat
/// dims, or (when the mode adds dims) from the dims passed after them.
template <fixed_string S, class OutPool>
constexpr auto flat_output_positions() {
  constexpr const einsum_term& o = parsed_v<S>.output;
  std::array<std::size_t, o.n_labels> a{};
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = find_name(OutPool::names, o.labels[i]);
  return a;
}
template <fixed_string S, class OutPool>
using flat_output_t = select_t<OutPool, flat_output_positions<S, OutPool>()>;

/// A pattern S (`...` expanded) on operands of dims Ls, with dims XL
/// passed after them, seen flat: each operand's dims with its groups split
/// and size-1 axes dropped (`flat<J>`), their union, and the output's flat
/// dims (`out<AddsDims>`, new dims from XL when the mode adds dims). The
/// gradient rules of patterns on vars work on these (a flat view of a
/// row-major tensor is the same memory).
template <fixed_string S, class XL, class... Ls>
struct pattern_flat_dims {
  using labels = label_pool_t<S, XL, Ls...>;
  template <std::size_t... J>
  static auto make(std::index_sequence<J...>) -> std::tuple<typename flat_operand_dims<S, J, Ls, labels>::type...>;
  using flats = decltype(make(std::index_sequence_for<Ls...>{}));
  template <std::size_t J>
  using flat = std::tuple_element_t<J, flats>;
  template <std::size_t... J>
  static auto pool(std::index_sequence<J...>) -> union_all<flat<J>...>;
  using flat_pool = typename decltype(pool(std::index_sequence_for<Ls...>{}))::type;
  template <bool AddsDims>
  using out = flat_output_t<S, std::conditional_t<AddsDims, union_t<flat_pool, XL>, flat_pool>>;
};

/// The flat extents of operand J of pattern S (the values, `...`
/// expanded), its groups split with the extents the forward pass used.
template <fixed_string S, std::size_t J, class Flat, class Values, class ExtraValues>
std::array<std::size_t, Flat::size> flat_extents(const Values& values, const ExtraValues& extras) {
  return split_groups<S, J, parsed_v<S>.inputs[J].n_items, Flat>(std::get<J>(values),
                                                                  all_group_extents<S, J, Flat>(values, extras))
      .extents();
}

/// The flat output's extents: each dim's from the flat operand that has
/// it, or from the dims passed after the operands (a repeat's new dims).
template <class FlatOut, class... Flats, class... XS>
std::array<std::size_t, FlatOut::size> flat_output_extents(const std::tuple<std::array<std::size_t, Flats::size>...>& exts,
                                                           const std::tuple<XS...>& extras) {
  std::array<std::size_t, FlatOut::size> out{};
  std::array<bool, FlatOut::size> found{};
  [&]<std::size_t... J>(std::index_sequence<J...>) {
    (
        [&] {
          using FJ = std::tuple_element_t<J, std::tuple<Flats...>>;
          for (std::size_t i = 0; i < FlatOut::size; ++i) {
            const std::size_t k = find_name(FJ::names, FlatOut::names[i]);
            if (k != npos && !found[i]) out[i] = std::get<J>(exts)[k], found[i] = true;
          }
        }(),
        ...);
  }(std::index_sequence_for<Flats...>{});
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((found[I] = found[I] || extent_from_extras<at_t<FlatOut, I>>(extras, out[I])), ...);
  }(std::make_index_sequence<FlatOut::size>{});
  return out;
}

/// A one-operand pattern seen flat: the operand's flat dims `in` and the
/// output's `out`, with their extents.
template <class In, class Out>
struct single_operand_flats {
  using in = In;
  using out = Out;
  std::array<std::size_t, In::size> in_extents;
  std::array<std::size_t, Out::size> out_extents;
};

/// The flats of the one-operand pattern S (`...` expanded as the mode does:
/// LeftOnly for reduce; AddsDims for repeat) on the value x with the dims
/// passed after it, as the forward pass resolved them.
template <fixed_string S, bool LeftOnly, bool AddsDims, class X, class... Dims>
auto flats_of(const X& x, const Dims&... dims) {
  using L = dims_of_t<X>;
  static constexpr auto SE = pattern_string_v<S, LeftOnly, L>;
  using P = pattern_flat_dims<SE, dim_list<Dims...>, L>;
  using In = typename P::template flat<0>;
  using Out = typename P::template out<AddsDims>;
  const auto values = std::forward_as_tuple(x);
  const std::tuple<Dims...> extras{dims...};
  const std::tuple<std::array<std::size_t, In::size>> exts{flat_extents<SE, 0, In>(values, extras)};
  return single_operand_flats<In, Out>{std::get<0>(exts), flat_output_extents<Out, In>(exts, extras)};
}

template <fixed_string S, class Mode, class OpsTuple, class Extras, std::size_t... J>
auto pattern_impl(const Mode& mode, OpsTuple&& ops, const Extras& extras, std::index_sequence<J...>) {
  using Ts = std::remove_cvref_t<OpsTuple>;
  static constexpr const parsed_einsum& p = parsed_v<S>;
  using XL = typename Extras::dims;
  using Pool = typename union_all<dims_of_t<std::tuple_element_t<J, Ts>>..., XL>::type;
  using LabelPool = label_pool_t<S, XL, dims_of_t<std::tuple_element_t<J, Ts>>...>;
  constexpr std::size_t bad_term = first_bad_einsum_term<S, dims_of_t<std::tuple_element_t<J, Ts>>...>();
  if constexpr (bad_term != npos) {
    report_einsum_term<S, bad_term, dims_of_t<std::tuple_element_t<bad_term, Ts>>>();
    return invalid_expression{};
  } else {
    constexpr std::size_t underdetermined = [] {
      std::size_t r = npos;
      ((r = r != npos ? r
                      : (first_underdetermined_group<
                                S, J,
                                typename flat_operand_dims<S, J, dims_of_t<std::tuple_element_t<J, Ts>>, LabelPool>::type,
                                LabelPool>() != npos
                             ? J
                             : npos)),
       ...);
      return r;
    }();
    constexpr std::size_t unit_operand = [] {
      std::size_t r = npos;
      ((r = (r == npos && first_unit_of_another_extent<S, J, dims_of_t<std::tuple_element_t<J, Ts>>>() != npos) ? J : r),
       ...);
      return r;
    }();
    if constexpr (underdetermined != npos) {
      using L = dims_of_t<std::tuple_element_t<underdetermined, Ts>>;
      using Flat = typename flat_operand_dims<S, underdetermined, L, LabelPool>::type;
      constexpr std::size_t i = first_underdetermined_group<S, underdetermined, Flat, LabelPool>();
      constexpr einsum_item item = p.inputs[underdetermined].items[i];
      report<einsum_group_has_more_than_one_unknown_extent<
          typename group_labels<S, underdetermined, item.first, std::make_index_sequence<item.count>>::type,
          operand<underdetermined>>>();
      return invalid_expression{};
    } else if constexpr (unit_operand != npos) {
      using L = dims_of_t<std::tuple_element_t<unit_operand, Ts>>;
      constexpr std::size_t i = first_unit_of_another_extent<S, unit_operand, L>();
      report<pattern_size_1_axis_stands_for_a_dim_of_another_extent<diagnostic_name_t<at_t<L, i>>,
                                                                   extent_c<L::static_extents[i]>, operand<unit_operand>>>();
      return invalid_expression{};
    } else {
      using FlatPool =
          typename union_all<typename flat_operand_dims<S, J, dims_of_t<std::tuple_element_t<J, Ts>>, LabelPool>::type...>::type;
      using OutPool = std::conditional_t<Mode::adds_dims, union_t<FlatPool, XL>, FlatPool>;
      using L0 = dims_of_t<std::tuple_element_t<0, Ts>>;
      constexpr std::size_t missing = [] {
        for (std::size_t i = 0; i < p.output.n_labels; ++i)
          if (find_name(OutPool::names, p.output.labels[i]) == npos) return i;
        return npos;
      }();
      constexpr std::size_t unnamed_group = [] {
        for (std::size_t i = 0; i < p.output.n_items; ++i)
          if (p.output.items[i].is_group && p.output.items[i].name.empty() && p.output.items[i].count > 0) return i;
        return npos;
      }();
      constexpr std::size_t dropped = [] {
        for (std::size_t i = 0; i < FlatPool::size; ++i) {
          bool found = false;
          for (std::size_t k = 0; k < p.output.n_labels; ++k) found = found || p.output.labels[k] == FlatPool::names[i];
          if (!found) return i;
        }
        return npos;
      }();
      // A dim passed after the operand of a repeat that the operand has:
      // repeating an existing axis.
      constexpr std::size_t existing_extra = [] {
        if (!Mode::adds_dims) return npos;
        for (std::size_t x = 0; x < XL::size; ++x)
          if (find_name(L0::names, XL::names[x]) != npos) return x;
        return npos;
      }();
      constexpr std::size_t unused_extra = [] {
        for (std::size_t x = 0; x < XL::size; ++x) {
          bool used = names_a_group_label<S>(XL::names[x]);
          if (Mode::adds_dims)
            for (std::size_t k = 0; k < p.output.n_labels; ++k) used = used || p.output.labels[k] == XL::names[x];
          if (!used) return x;
        }
        return npos;
      }();
      if constexpr (missing != npos) {
        if constexpr (Mode::adds_dims)
          report<repeat_new_dim_has_no_extent<label_name_t<S, p.n_inputs, missing>>>();
        else
          report<einsum_output_label_is_not_in_any_operand<label_name_t<S, p.n_inputs, missing>>>();
        return invalid_expression{};
      } else if constexpr (unnamed_group != npos) {
        constexpr einsum_item item = p.output.items[unnamed_group];
        report<einsum_output_group_needs_a_name<
            typename group_labels<S, p.n_inputs, item.first, std::make_index_sequence<item.count>>::type>>();
        return invalid_expression{};
      } else if constexpr (Mode::keeps_every_dim && dropped != npos) {
        Mode::template report_dropped<diagnostic_name_t<at_t<FlatPool, dropped>>>();
        return invalid_expression{};
      } else if constexpr (existing_extra != npos) {
        report<repeat_adds_a_dim_the_tensor_already_has<diagnostic_name_t<at_t<XL, existing_extra>>,
                                                        diagnostic_dims_t<L0>>>();
        return invalid_expression{};
      } else if constexpr (unused_extra != npos) {
        report<einsum_extra_dim_is_not_a_group_label<diagnostic_name_t<at_t<XL, unused_extra>>>>();
        return invalid_expression{};
      } else {
        using FlatOut = flat_output_t<S, OutPool>;
        const std::array<group_extent_table, sizeof...(J)> tables{
            all_group_extents<S, J, typename flat_operand_dims<S, J, dims_of_t<std::tuple_element_t<J, Ts>>, LabelPool>::type>(
                ops, extras.values)...};
        auto flat = mode.template apply<FlatOut>(
            extras,
            split_groups<S, J, p.inputs[J].n_items,
                         typename flat_operand_dims<S, J, dims_of_t<std::tuple_element_t<J, Ts>>, LabelPool>::type>(
                std::get<J>(std::forward<OpsTuple>(ops)), tables[J])...);
        if constexpr (is_invalid_v<decltype(flat)>)
          return invalid_expression{};
        else
          return merge_groups<S, p.output.n_items, Pool>(std::move(flat));
      }
    }
  }
}

// Dims passed after the operands, with their run-time values.
template <class... Xs>
struct extra_dims {
  using dims = dim_list<Xs...>;
  std::tuple<Xs...> values;
};

/// The value of the dim passed after the operands with D's name.
template <dimension D, class... Xs>
D extra_dim_value(const extra_dims<Xs...>& extras) {
  std::size_t v = 0;
  extent_from_extras<D>(extras.values, v);
  check_static_extent<D>(v, "repeat");
  return D(v);
}

template <class X>
inline constexpr bool is_list_operand_v = false;
template <named_expression E, class A>
inline constexpr bool is_list_operand_v<std::vector<E, A>> = true;
template <named_expression E, std::size_t N>
inline constexpr bool is_list_operand_v<std::array<E, N>> = true;

template <fixed_string S, class Mode, class... Args>
auto pattern_args(const Mode& mode, Args&&... args);

/// A list of tensors as the first operand (einops' `rearrange([t1, t2],
/// "n h w -> ...")`): its elements stacked along a new leading dim named by
/// the first label of the first term, then the pattern as usual.
template <fixed_string S, class Mode, class List, class... Rest>
auto pattern_list_args(const Mode& mode, const List& list, Rest&&... rest) {
  using E = typename List::value_type;
  using L = dims_of_t<E>;
  constexpr std::string_view first = leading_label(S.view());
  if constexpr (first.empty() || find_name(L::names, first) != npos) {
    report<pattern_list_needs_a_new_leading_label<diagnostic_dims_t<L>>>();
    return invalid_expression{};
  } else {
    struct get {
      constexpr std::string_view operator()() const { return leading_label(S.view()); }
    };
    constexpr std::size_t n = [] {
      if constexpr (requires { std::tuple_size<List>::value; })
        return std::tuple_size_v<List>;
      else
        return dynamic;
    }();
    return pattern_args<S>(mode, stack_list<dim<to_fixed_string_v<get>, n>>(list), std::forward<Rest>(rest)...);
  }
}

/// Checks and runs pattern S in the given mode on the operands, then the
/// dims that give group extents (or, for repeat, new dims' extents).
template <fixed_string S, class Mode, class... Args>
auto pattern_args(const Mode& mode, Args&&... args) {
  constexpr std::size_t n_ops = [] {
    std::size_t n = 0;
    for (bool is_op : {named_expression<Args>...}) {
      if (!is_op) break;
      ++n;
    }
    return n;
  }();
  constexpr bool ordered = [] {
    std::size_t i = 0;
    for (bool is_op : {named_expression<Args>...})
      if (is_op && i++ >= n_ops) return false;
    return true;
  }();
  constexpr std::size_t foreign = [] {
    std::size_t i = 0;
    for (bool ok : {(named_expression<Args> || dimension<std::remove_cvref_t<Args>>)...}) {
      if (!ok) return i;
      ++i;
    }
    return npos;
  }();
  using All = std::tuple<std::remove_cvref_t<Args>...>;
  if constexpr (is_list_operand_v<std::tuple_element_t<0, All>>) {
    return pattern_list_args<S>(mode, std::forward<Args>(args)...);
  } else if constexpr (has_ellipsis(S.view()) && foreign == npos && ordered && n_ops > 0) {
    // `...`: rewrite the string with the operands' dim names, then go on.
    constexpr bool left_only = Mode::ellipsis_on_the_left_only;
    return [&]<std::size_t... J>(std::index_sequence<J...>) {
      if constexpr ((is_invalid_v<std::tuple_element_t<J, All>> || ...)) {
        return invalid_expression{};
      } else if constexpr (ellipsis_expansion_v<S, left_only, dims_of_t<std::tuple_element_t<J, All>>...>.error !=
                           ellipsis_error::none) {
        report_ellipsis<S, left_only, dims_of_t<std::tuple_element_t<J, All>>...>();
        return invalid_expression{};
      } else {
        return pattern_args<expanded_einsum_v<S, left_only, dims_of_t<std::tuple_element_t<J, All>>...>>(
            mode, std::forward<Args>(args)...);
      }
    }(std::make_index_sequence<n_ops>{});
  } else {
    static constexpr const parsed_einsum& p = parsed_v<S>;
    if constexpr (p.error != einsum_parse_error::none) {
      report_einsum_syntax<S>();
      return invalid_expression{};
    } else if constexpr (foreign != npos) {
      report<einsum_operand_is_not_a_named_tensor<operand<foreign>, std::tuple_element_t<foreign, All>>>();
      return invalid_expression{};
    } else if constexpr (!ordered) {
      report<einsum_dims_must_follow_the_operands<count_c<n_ops>>>();
      return invalid_expression{};
    } else if constexpr (p.n_inputs != n_ops) {
      report<einsum_term_count_does_not_match_operand_count<count_c<p.n_inputs>, count_c<n_ops>>>();
      return invalid_expression{};
    } else if constexpr (Mode::single_operand && n_ops != 1) {
      report<einsum_term_count_does_not_match_operand_count<count_c<p.n_inputs>, count_c<1>>>();
      return invalid_expression{};
    } else {
      auto all = std::forward_as_tuple(std::forward<Args>(args)...);
      using Refs = std::tuple<Args&&...>;
      return [&]<std::size_t... J, std::size_t... X>(std::index_sequence<J...>, std::index_sequence<X...>) {
        if constexpr ((is_invalid_v<std::tuple_element_t<J, Refs>> || ...)) {
          return invalid_expression{};
        } else {
          std::tuple<std::tuple_element_t<J, Refs>...> ops(std::get<J>(std::move(all))...);
          extra_dims<std::remove_cvref_t<std::tuple_element_t<n_ops + X, Refs>>...> extras{{std::get<n_ops + X>(all)...}};
          return pattern_impl<S>(mode, std::move(ops), extras, std::index_sequence<J...>{});
        }
      }(std::make_index_sequence<n_ops>{}, std::make_index_sequence<sizeof...(Args) - n_ops>{});
    }
  }
}

/// einsum (Rearrange false) or rearrange (true), string spelling.
template <fixed_string S, bool Rearrange, class... Args>
auto einsum_string_args(Args&&... args) {
  return pattern_args<S>(std::conditional_t<Rearrange, rearrange_mode, einsum_mode>{}, std::forward<Args>(args)...);
}

}  // namespace dimsum::detail
