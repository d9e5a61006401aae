#pragma once
/// \file
/// The pattern spelling of einsum, rearrange, reduce and repeat: expands
/// `...`, parses the string at compile time, checks each term against its
/// operand's dims and the output against the mode (einsum, rearrange,
/// reduce, repeat), then runs the pattern on the flat operands
/// (ops/detail/pattern_flat.hpp: groups split, size-1 axes dropped) and
/// merges the output's groups back. Included by ops/einsum.hpp.

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
#include <dimsum/ops/detail/pattern_flat.hpp>
#include <dimsum/ops/detail/pattern_checks.hpp>
#include <dimsum/ops/einsum.hpp>  // make_einsum; einsum.hpp includes this header back at its end
#include <dimsum/ops/regroup.hpp>

namespace dimsum::detail {

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

/// How a pattern maps its flat operands (groups split, size-1 axes
/// dropped) to its flat output (before the output's groups are merged and
/// its size-1 axes inserted). einsum sums the dims the output lacks.
struct einsum_mode {
  static constexpr bool single_operand = false;
  static constexpr bool keeps_every_dim = false;  // a dim the output lacks is an error
  static constexpr bool adds_dims = false;        // output labels no operand has, extents given as dims
  static constexpr bool ellipsis_on_the_left_only = false;
  static constexpr bool adds_size_1_axes = true;  // an output `1` or `()` is a unit_axis
  template <class FlatOut, class Extras, class... Flat>
  auto apply(const Extras&, Flat&&... flat) const {
    return make_einsum<FlatOut>(std::forward<Flat>(flat)...);
  }
};
/// einsum with a stated result type R (`einsum<"...", float>`).
template <class R>
struct typed_einsum_mode : einsum_mode {
  template <class FlatOut, class Extras, class... Flat>
  auto apply(const Extras&, Flat&&... flat) const {
    return make_einsum_as<R, FlatOut>(std::forward<Flat>(flat)...);
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

// Whether the dim named n is a label of a group of an input term of S: a
// new dim that the split makes.
template <fixed_string S>
constexpr bool names_an_input_group_label(std::string_view n) {
  constexpr const parsed_einsum& p = parsed_v<S>;
  for (std::size_t j = 0; j < p.n_inputs; ++j)
    for (std::size_t i = 0; i < p.inputs[j].n_items; ++i)
      for (std::size_t c = 0; p.inputs[j].items[i].is_group && c < p.inputs[j].items[i].count; ++c)
        if (p.inputs[j].labels[p.inputs[j].items[i].first + c] == n) return true;
  return false;
}

/// The first dim passed after the operands (XL) whose static extent
/// differs from that of operand J's dim of its name (one the pattern does
/// not split): {x, position in L}, or {npos, npos}.
template <fixed_string S, std::size_t J, class XL, class L>
constexpr std::array<std::size_t, 2> first_static_length_conflict() {
  for (std::size_t x = 0; x < XL::size; ++x) {
    if (XL::static_extents[x] == dynamic) continue;
    const std::size_t d = find_name(L::names, XL::names[x]);
    if (d != npos && !split_by_pattern<S, J>(d) && L::static_extents[d] != dynamic &&
        L::static_extents[d] != XL::static_extents[x])
      return {x, d};
  }
  return {npos, npos};
}

/// The first group item of term J splitting a static dim of L whose labels'
/// static extents (in Flat) cannot split it: all static with another
/// product, or all but one static with a product that does not divide it.
/// {item, product of the static extents}, or {npos, 0}.
template <fixed_string S, std::size_t J, class L, class Flat>
constexpr std::array<std::size_t, 2> first_group_not_dividing() {
  constexpr const einsum_term& t = parsed_v<S>.inputs[J];
  for (std::size_t i = 0; i < t.n_items && i < L::size; ++i) {
    if (!t.items[i].is_group || t.items[i].count == 0 || L::static_extents[i] == dynamic) continue;
    std::size_t product = 1, unknown = 0;
    for (std::size_t c = 0; c < t.items[i].count; ++c) {
      const std::size_t se = Flat::static_extents[find_name(Flat::names, t.labels[t.items[i].first + c])];
      if (se == dynamic)
        ++unknown;
      else
        product *= se;
    }
    const std::size_t whole = L::static_extents[i];
    if ((unknown == 0 && product != whole) || (unknown == 1 && (product == 0 || whole % product != 0)))
      return {i, product};
  }
  return {npos, 0};
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
    using Flats = std::tuple<
        typename flat_operand_dims<S, J, dims_of_t<std::tuple_element_t<J, Ts>>, LabelPool>::type...>;
    constexpr std::array<std::size_t, 3> not_dividing = [] {
      std::array<std::size_t, 3> r{npos, npos, 0};
      (
          [&] {
            constexpr auto g =
                first_group_not_dividing<S, J, dims_of_t<std::tuple_element_t<J, Ts>>, std::tuple_element_t<J, Flats>>();
            if (r[0] == npos && g[0] != npos) r = {J, g[0], g[1]};
          }(),
          ...);
      return r;
    }();
    constexpr std::array<std::size_t, 3> length_conflict = [] {
      std::array<std::size_t, 3> r{npos, npos, npos};
      (
          [&] {
            constexpr auto c = first_static_length_conflict<S, J, XL, dims_of_t<std::tuple_element_t<J, Ts>>>();
            if (r[0] == npos && c[0] != npos) r = {J, c[0], c[1]};
          }(),
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
    } else if constexpr (length_conflict[0] != npos) {
      using L = dims_of_t<std::tuple_element_t<length_conflict[0], Ts>>;
      using X = at_t<XL, length_conflict[1]>;
      report<pattern_length_differs_from_the_operands_dim<diagnostic_name_t<X>, extent_c<X::static_extent>,
                                                          extent_c<L::static_extents[length_conflict[2]]>,
                                                          operand<length_conflict[0]>>>();
      return invalid_expression{};
    } else if constexpr (not_dividing[0] != npos) {
      using L = dims_of_t<std::tuple_element_t<not_dividing[0], Ts>>;
      constexpr einsum_item item = p.inputs[not_dividing[0]].items[not_dividing[1]];
      report<pattern_group_does_not_divide_its_dim<
          diagnostic_name_t<at_t<L, not_dividing[1]>>, extent_c<L::static_extents[not_dividing[1]]>,
          typename group_labels<S, not_dividing[0], item.first, std::make_index_sequence<item.count>>::type,
          extent_c<not_dividing[2]>, operand<not_dividing[0]>>>();
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
      // A dim passed after the operand of a repeat that the operand still
      // has once the pattern has split its groups and dropped its size-1
      // axes: repeating an existing axis. (A size-1 dim the pattern drops,
      // `b() n d -> b n d` or `1 n d -> b n d`, may come back as a new dim
      // with its extent, as torch's expand; so may a group label.)
      constexpr std::size_t existing_extra = [] {
        if (!Mode::adds_dims) return npos;
        for (std::size_t x = 0; x < XL::size; ++x)
          if (find_name(FlatPool::names, XL::names[x]) != npos && !names_an_input_group_label<S>(XL::names[x]))
            return x;
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
        check_passed_lengths<S>(ops, extras.values);
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
          return merge_groups<S, p.output.n_items, Pool, Mode::adds_size_1_axes>(std::move(flat));
      }
    }
  }
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
