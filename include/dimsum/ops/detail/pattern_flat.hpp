#pragma once
/// \file
/// A pattern's operands seen flat: each operand's dims with its groups
/// split and its size-1 axes dropped, the extents of group labels (from a
/// static extent, another operand, a dim passed after the operands, or
/// inferred), the split itself (a view where the operand is a tensor or
/// view), and the way back: the output's groups merged and its size-1 axes
/// inserted. The gradient rules of patterns on vars use the same
/// resolution (`pattern_flat_dims`, `flats_of`). Included by
/// ops/detail/einsum_string_form.hpp.

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include <dimsum/core/einsum_string.hpp>
#include <dimsum/ops/detail/einsum_ellipsis.hpp>
#include <dimsum/ops/elementwise.hpp>
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
  // The static extent of label Kk when nothing names it but the dim its
  // group splits is static and every other label of the group has a static
  // dim: that extent divided by their product (4 heads in (kv_heads group)
  // with kv_heads of 2: group is 2); otherwise dynamic. A product that does
  // not divide leaves it dynamic, and pattern_group_does_not_divide_its_dim
  // reports it.
  static constexpr std::size_t inferred_extent(std::size_t i, std::size_t kk) {
    if (i >= L::size || L::static_extents[i] == dynamic) return dynamic;
    std::size_t product = 1;
    for (std::size_t c = 0; c < t.items[i].count; ++c) {
      if (t.items[i].first + c == kk) continue;
      const std::size_t p = find_name(Pool::names, t.labels[t.items[i].first + c]);
      if (p == npos || Pool::static_extents[p] == dynamic) return dynamic;
      product *= Pool::static_extents[p];
    }
    if (product == 0 || L::static_extents[i] % product != 0) return dynamic;
    return L::static_extents[i] / product;
  }
  template <std::size_t Kk>
  static auto pick() {
    constexpr std::size_t i = item_of[Kk];
    using R = resolve_dim<Pool, label_getter<S, J, Kk>>;
    if constexpr (!t.items[i].is_group)
      return std::type_identity<at_t<L, i>>{};
    else if constexpr (R::idx == npos && inferred_extent(i, Kk) != dynamic)
      return std::type_identity<dim<to_fixed_string_v<label_getter<S, J, Kk>>, inferred_extent(i, Kk)>>{};
    else
      return std::type_identity<typename R::type>{};
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

/// Checks a dim x passed after the operands against its static extent and
/// against every operand's dim of its name that the pattern does not split
/// (a group's labels are new dims): a length that differs is a shape_error,
/// never silently ignored.
template <fixed_string S, class OpsTuple, class X>
void check_passed_length(const OpsTuple& ops, const X& x) {
  check_static_extent<X>(x.value, "einsum");
  [&]<std::size_t... Q>(std::index_sequence<Q...>) {
    (
        [&] {
          std::size_t e = 0;
          if (extent_from_operand<S, X, Q>(ops, e) && e != x.value)
            throw shape_error("einsum: dim '" + std::string(X::name.view()) + "' was passed with extent " +
                              std::to_string(x.value) + " but operand " + std::to_string(Q) + " has extent " +
                              std::to_string(e));
        }(),
        ...);
  }(std::make_index_sequence<std::tuple_size_v<OpsTuple>>{});
}
template <fixed_string S, class OpsTuple, class... XS>
void check_passed_lengths(const OpsTuple& ops, const std::tuple<XS...>& extras) {
  std::apply([&](const auto&... x) { (check_passed_length<S>(ops, x), ...); }, extras);
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
// Without UnitAxes (reduce), an anonymous `1` or `()` adds no dim.
template <fixed_string S, std::size_t I, class Pool, bool UnitAxes = true, class E>
auto merge_groups(E&& e) {
  if constexpr (I == 0) {
    return std::forward<E>(e);
  } else {
    constexpr std::size_t out = parsed_v<S>.n_inputs;
    constexpr einsum_item item = parsed_v<S>.output.items[I - 1];
    if constexpr (!item.is_group || (is_unit_item(item) && !UnitAxes)) {
      return merge_groups<S, I - 1, Pool, UnitAxes>(std::forward<E>(e));
    } else if constexpr (is_unit_item(item)) {
      return merge_groups<S, I - 1, Pool, UnitAxes>(insert_unit_axis<item.first, unit_axis<I - 1>>(std::forward<E>(e)));
    } else {
      using New = typename resolve_dim<Pool, item_name_getter<S, out, I - 1>>::type;
      // A named size-1 axis `h()` keeps the dim type of that name unless it
      // is static with another extent (a reduced h of 224: then dim<"h", 1>).
      using Unit = std::conditional_t<New::is_static && New::static_extent != 1, dim<New::name, 1>, New>;
      if constexpr (item.count == 0)
        return merge_groups<S, I - 1, Pool, UnitAxes>(insert_unit_axis<item.first, Unit>(std::forward<E>(e)));
      else
        return merge_groups<S, I - 1, Pool, UnitAxes>(
            merge_expr<item.first, item.count, New, std::remove_cvref_t<E>>(std::forward<E>(e)));
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

}  // namespace dimsum::detail
