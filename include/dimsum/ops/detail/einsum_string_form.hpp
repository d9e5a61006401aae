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

#include <dimsum/core/einsum_string.hpp>
#include <dimsum/ops/detail/einsum_ellipsis.hpp>
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
  else if constexpr (p.error == E::empty_group)
    report<einsum_string_has_an_empty_group<Pos, count_c<p.error_term>>>();
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

// The run-time extent of dim D from the operands that have it, from a dim
// passed after the operands, or from its static extent; false if none.
template <class D, std::size_t Q, class OpsTuple>
bool extent_from_operand(const OpsTuple& ops, std::size_t& out) {
  using LQ = dims_of_t<std::tuple_element_t<Q, OpsTuple>>;
  constexpr std::size_t p = find_name(LQ::names, D::name.view());
  if constexpr (p == npos) {
    return false;
  } else {
    out = std::get<Q>(ops).extents()[p];
    return true;
  }
}
template <class D, class OpsTuple, std::size_t... Q>
bool extent_from_operands(const OpsTuple& ops, std::size_t& out, std::index_sequence<Q...>) {
  bool found = false;
  ((found = found || extent_from_operand<D, Q>(ops, out)), ...);
  return found;
}
template <class D, class X>
bool extent_from_extra(const X& x, std::size_t& out) {
  if (X::name.view() != D::name.view()) return false;
  out = x.value;
  return true;
}
template <class D, class OpsTuple, class Extras>
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
    if (extent_from_operands<D>(ops, out, std::make_index_sequence<std::tuple_size_v<OpsTuple>>{})) return true;
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
    ((known[C] = label_extent<at_t<Flat, item.first + C>>(ops, extras, ext[C])), ...);
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

// Merges the named groups of the output from item I - 1 down to 0.
template <fixed_string S, std::size_t I, class Pool, class E>
auto merge_groups(E&& e) {
  if constexpr (I == 0) {
    return std::forward<E>(e);
  } else {
    constexpr std::size_t out = parsed_v<S>.n_inputs;
    constexpr einsum_item item = parsed_v<S>.output.items[I - 1];
    if constexpr (!item.is_group) {
      return merge_groups<S, I - 1, Pool>(std::forward<E>(e));
    } else {
      using New = typename resolve_dim<Pool, item_name_getter<S, out, I - 1>>::type;
      return merge_groups<S, I - 1, Pool>(
          merge_expr<item.first, item.count, New, std::remove_cvref_t<E>>(std::forward<E>(e)));
    }
  }
}

template <fixed_string S, bool Rearrange, class OpsTuple, class Extras, std::size_t... J>
auto einsum_string_impl(OpsTuple&& ops, const Extras& extras, std::index_sequence<J...>) {
  using Ts = std::remove_cvref_t<OpsTuple>;
  static constexpr const parsed_einsum& p = parsed_v<S>;
  using XL = typename Extras::dims;
  using Pool = typename union_all<dims_of_t<std::tuple_element_t<J, Ts>>..., XL>::type;
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
                                typename flat_operand_dims<S, J, dims_of_t<std::tuple_element_t<J, Ts>>, Pool>::type,
                                Pool>() != npos
                             ? J
                             : npos)),
       ...);
      return r;
    }();
    if constexpr (underdetermined != npos) {
      using L = dims_of_t<std::tuple_element_t<underdetermined, Ts>>;
      using Flat = typename flat_operand_dims<S, underdetermined, L, Pool>::type;
      constexpr std::size_t i = first_underdetermined_group<S, underdetermined, Flat, Pool>();
      constexpr einsum_item item = p.inputs[underdetermined].items[i];
      report<einsum_group_has_more_than_one_unknown_extent<
          typename group_labels<S, underdetermined, item.first, std::make_index_sequence<item.count>>::type,
          operand<underdetermined>>>();
      return invalid_expression{};
    } else {
      using FlatPool =
          typename union_all<typename flat_operand_dims<S, J, dims_of_t<std::tuple_element_t<J, Ts>>, Pool>::type...>::type;
      constexpr std::size_t missing = [] {
        for (std::size_t i = 0; i < p.output.n_labels; ++i)
          if (find_name(FlatPool::names, p.output.labels[i]) == npos) return i;
        return npos;
      }();
      constexpr std::size_t unnamed_group = [] {
        for (std::size_t i = 0; i < p.output.n_items; ++i)
          if (p.output.items[i].is_group && p.output.items[i].name.empty()) return i;
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
      constexpr std::size_t unused_extra = [] {
        for (std::size_t x = 0; x < XL::size; ++x) {
          bool used = false;
          auto scan = [&](const einsum_term& t) {
            for (std::size_t i = 0; i < t.n_items; ++i) {
              if (!t.items[i].is_group) continue;
              used = used || t.items[i].name == XL::names[x];
              for (std::size_t c = 0; c < t.items[i].count; ++c)
                used = used || t.labels[t.items[i].first + c] == XL::names[x];
            }
          };
          for (std::size_t j = 0; j < p.n_inputs; ++j) scan(p.inputs[j]);
          scan(p.output);
          if (!used) return x;
        }
        return npos;
      }();
      if constexpr (missing != npos) {
        report<einsum_output_label_is_not_in_any_operand<label_name_t<S, p.n_inputs, missing>>>();
        return invalid_expression{};
      } else if constexpr (unnamed_group != npos) {
        constexpr einsum_item item = p.output.items[unnamed_group];
        report<einsum_output_group_needs_a_name<
            typename group_labels<S, p.n_inputs, item.first, std::make_index_sequence<item.count>>::type>>();
        return invalid_expression{};
      } else if constexpr (Rearrange && dropped != npos) {
        report<rearrange_drops_a_dim<diagnostic_name_t<at_t<FlatPool, dropped>>>>();
        return invalid_expression{};
      } else if constexpr (unused_extra != npos) {
        report<einsum_extra_dim_is_not_a_group_label<diagnostic_name_t<at_t<XL, unused_extra>>>>();
        return invalid_expression{};
      } else {
        constexpr auto pos = [] {
          std::array<std::size_t, p.output.n_labels> a{};
          for (std::size_t i = 0; i < a.size(); ++i) a[i] = find_name(FlatPool::names, p.output.labels[i]);
          return a;
        }();
        using FlatOut = select_t<FlatPool, pos>;
        const std::array<group_extent_table, sizeof...(J)> tables{
            all_group_extents<S, J, typename flat_operand_dims<S, J, dims_of_t<std::tuple_element_t<J, Ts>>, Pool>::type>(
                ops, extras.values)...};
        auto flat = make_einsum<FlatOut>(
            split_groups<S, J, p.inputs[J].n_items,
                         typename flat_operand_dims<S, J, dims_of_t<std::tuple_element_t<J, Ts>>, Pool>::type>(
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

template <fixed_string S, bool Rearrange, class... Args>
auto einsum_string_args(Args&&... args) {
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
  if constexpr (has_ellipsis(S.view()) && foreign == npos && ordered && n_ops > 0) {
    // `...`: rewrite the string with the operands' dim names, then go on.
    using All = std::tuple<std::remove_cvref_t<Args>...>;
    return [&]<std::size_t... J>(std::index_sequence<J...>) {
      if constexpr ((is_invalid_v<std::tuple_element_t<J, All>> || ...)) {
        return invalid_expression{};
      } else if constexpr (ellipsis_expansion_v<S, dims_of_t<std::tuple_element_t<J, All>>...>.error !=
                           ellipsis_error::none) {
        report_ellipsis<S, dims_of_t<std::tuple_element_t<J, All>>...>();
        return invalid_expression{};
      } else {
        return einsum_string_args<expanded_einsum_v<S, dims_of_t<std::tuple_element_t<J, All>>...>, Rearrange>(
            std::forward<Args>(args)...);
      }
    }(std::make_index_sequence<n_ops>{});
  } else {
  static constexpr const parsed_einsum& p = parsed_v<S>;
  if constexpr (p.error != einsum_parse_error::none) {
    report_einsum_syntax<S>();
    return invalid_expression{};
  } else if constexpr (foreign != npos) {
    report<einsum_operand_is_not_a_named_tensor<operand<foreign>,
                                                std::remove_cvref_t<std::tuple_element_t<foreign, std::tuple<Args...>>>>>();
    return invalid_expression{};
  } else if constexpr (!ordered) {
    report<einsum_dims_must_follow_the_operands<count_c<n_ops>>>();
    return invalid_expression{};
  } else if constexpr (p.n_inputs != n_ops) {
    report<einsum_term_count_does_not_match_operand_count<count_c<p.n_inputs>, count_c<n_ops>>>();
    return invalid_expression{};
  } else if constexpr (Rearrange && n_ops != 1) {
    report<einsum_term_count_does_not_match_operand_count<count_c<p.n_inputs>, count_c<1>>>();
    return invalid_expression{};
  } else {
    auto all = std::forward_as_tuple(std::forward<Args>(args)...);
    using All = std::tuple<Args&&...>;
    return [&]<std::size_t... J, std::size_t... X>(std::index_sequence<J...>, std::index_sequence<X...>) {
      if constexpr ((is_invalid_v<std::tuple_element_t<J, All>> || ...)) {
        return invalid_expression{};
      } else {
        std::tuple<std::tuple_element_t<J, All>...> ops(std::get<J>(std::move(all))...);
        extra_dims<std::remove_cvref_t<std::tuple_element_t<n_ops + X, All>>...> extras{
            {std::get<n_ops + X>(all)...}};
        return einsum_string_impl<S, Rearrange>(std::move(ops), extras, std::index_sequence<J...>{});
      }
    }(std::make_index_sequence<n_ops>{}, std::make_index_sequence<sizeof...(Args) - n_ops>{});
  }
  }
}

}  // namespace dimsum::detail
