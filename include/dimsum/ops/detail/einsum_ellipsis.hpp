#pragma once
/// \file
/// Ellipsis in pattern strings (einsum, rearrange, reduce, repeat): `...` in
/// an input term stands for the operand's dims that the term does not name,
/// by name, in the operand's order; `...` in the output stands for every
/// input's ellipsis dims (first appearance first). The string is rewritten
/// at compile time with the names in place of `...` and then checked like
/// any other: `einsum<"... d_model, d_model d_ff -> ... d_ff">(x, W)` on x of
/// dims (batch, posn, d_model) is `einsum<"batch posn d_model, d_model d_ff
/// -> batch posn d_ff">`. An ellipsis may match no dim. Size-1 axes made by a
/// pattern (`unit_axis`, which no label can name) are written as `1`: a `1`
/// in an input term with `...` takes the operand's size-1 axes in order, and
/// the others are ellipsis dims. The same dims stand for `...` on both sides:
/// naming on the right a dim that `...` covers on the left is an error.

#include <array>
#include <cstddef>
#include <string_view>
#include <tuple>

#include <dimsum/core/diagnostics.hpp>
#include <dimsum/core/dim_list.hpp>
#include <dimsum/core/fixed_string.hpp>

namespace dimsum {

/// Checker: `...` on one side of `->` only.
template <class Side, class OperandDims>
struct einsum_ellipsis_on_one_side_of_the_arrow_only {
  static_assert(detail::always_false<Side, OperandDims>,
                "dimsum: '...' appears on one side of '->' only; write it on both sides (it stands for the same dims "
                "by name), or name the dims");
};
/// Checker: `...` twice in one term.
template <class Term>
struct einsum_term_has_two_ellipses {
  static_assert(detail::always_false<Term>, "dimsum: an einsum term has '...' twice");
};
/// Checker: an unnamed group `(h d)` in a term with `...` (which operand dim
/// it stands for would depend on positions; name it: `hd(h d)`).
template <class Term>
struct einsum_ellipsis_term_has_an_unnamed_group {
  static_assert(detail::always_false<Term>,
                "dimsum: a term with '...' splits an unnamed group; name the dim it splits, e.g. hd(h d)");
};
/// Checker: the output names a dim that `...` stands for on the left, so
/// `...` would stand for different dims on the two sides.
template <class Label, class Term, class OperandDims>
struct einsum_output_names_a_dim_that_the_ellipsis_stands_for {
  static_assert(detail::always_false<Label, Term, OperandDims>,
                "dimsum: the output names a dim that '...' stands for on the left, so '...' would stand for "
                "different dims on the two sides; name the dim on the left too (\"b ... d -> b ... d\") or leave "
                "it to '...'");
};
/// Where an ellipsis error is: `input<I>` or `output_term`.
template <std::size_t I>
struct input_term {};
struct output_term {};

namespace detail {

inline constexpr std::size_t ellipsis_max_chars = 1024;

enum class ellipsis_error {
  none,
  one_side_only_input,
  one_side_only_output,
  twice,
  unnamed_group,
  named_on_the_right,
  too_long
};

struct ellipsis_expansion {
  ellipsis_error error = ellipsis_error::none;
  std::size_t error_term = 0;
  std::string_view error_label{};  // named_on_the_right: the output's label
  std::size_t size = 0;
  std::array<char, ellipsis_max_chars> text{};
};

// "1@P", the name of a unit_axis (ops/regroup.hpp), which patterns write `1`.
constexpr bool unit_axis_named(std::string_view n) { return n.size() > 2 && n[0] == '1' && n[1] == '@'; }

constexpr bool ellipsis_label_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (c >= '0' && c <= '9');
}

constexpr bool has_ellipsis(std::string_view s) {
  for (std::size_t i = 0; i + 3 <= s.size(); ++i)
    if (s[i] == '.' && s[i + 1] == '.' && s[i + 2] == '.') return true;
  return false;
}

/// The names a term [b, e) of s gives explicitly to operand dims: plain
/// labels and the names of named groups (not the labels inside groups,
/// which are kept apart for the output's check). Counts the `...` (inside
/// groups too) and the anonymous size-1 axes (`1`, `()`); sets
/// `unnamed_group` for a group without a name that has labels or `...`.
struct term_names {
  std::array<std::string_view, 32> names{};
  std::array<std::string_view, 32> spans{};  // each name's text: the label, or the whole `hd(h d)`
  std::size_t n = 0;
  std::array<std::string_view, 32> inner{};  // the labels inside groups
  std::size_t n_inner = 0;
  std::size_t ellipses = 0;
  std::size_t units = 0;
  bool unnamed_group = false;
};
constexpr bool is_ellipsis_at(std::string_view s, std::size_t i, std::size_t e) {
  return i + 3 <= e && s[i] == '.' && s[i + 1] == '.' && s[i + 2] == '.';
}
constexpr term_names scan_term(std::string_view s, std::size_t b, std::size_t e) {
  term_names t{};
  std::size_t i = b;
  while (i < e) {
    if (is_ellipsis_at(s, i, e)) {
      ++t.ellipses;
      i += 3;
    } else if (s[i] == '1' && (i + 1 == e || !ellipsis_label_char(s[i + 1])) &&
               (i == b || !ellipsis_label_char(s[i - 1]))) {
      ++t.units;
      ++i;
    } else if (ellipsis_label_char(s[i]) || s[i] == '(') {
      const std::size_t name_begin = i;
      std::size_t j = i;
      while (j < e && ellipsis_label_char(s[j])) ++j;
      const std::string_view name = s.substr(i, j - i);
      i = j;
      bool has_content = false;
      if (i < e && s[i] == '(') {  // a group: its labels are kept apart
        ++i;
        while (i < e && s[i] != ')') {
          if (is_ellipsis_at(s, i, e)) {
            ++t.ellipses;
            has_content = true;
            i += 3;
          } else if (ellipsis_label_char(s[i])) {
            std::size_t k = i;
            while (k < e && ellipsis_label_char(s[k])) ++k;
            const std::string_view label = s.substr(i, k - i);
            if (label != "1") {
              has_content = true;
              if (t.n_inner < t.inner.size()) t.inner[t.n_inner++] = label;
            }
            i = k;
          } else {
            ++i;
          }
        }
        if (i < e) ++i;
        if (name.empty()) {
          if (has_content)
            t.unnamed_group = true;
          else
            ++t.units;
          continue;
        }
      }
      if (!name.empty() && t.n < t.names.size()) {
        t.names[t.n] = name;
        t.spans[t.n++] = s.substr(name_begin, i - name_begin);
      }
    } else {
      ++i;
    }
  }
  return t;
}

/// Rewrites s with every `...` replaced by dim names, given the operands'
/// dim lists Ls (as many as input terms; extra ones are ignored). With
/// LeftOnly (reduce), `...` may stand on the left alone: its dims are then
/// reduced. Syntax errors other than the ellipsis's are left for the parser.
template <bool LeftOnly, class... Ls>
constexpr ellipsis_expansion expand_ellipsis(std::string_view s) {
  ellipsis_expansion out{};
  constexpr std::size_t n_ops = sizeof...(Ls);
  const std::array<const std::string_view*, n_ops + 1> op_names{Ls::names.data()..., nullptr};
  const std::array<std::size_t, n_ops + 1> op_sizes{Ls::size..., 0};
  // Term boundaries.
  std::size_t arrow = s.size();
  for (std::size_t i = 0; i + 1 < s.size(); ++i)
    if (s[i] == '-' && s[i + 1] == '>') {
      arrow = i;
      break;
    }
  std::array<std::size_t, 32> starts{}, ends{};
  std::size_t n_terms = 0, b = 0;
  for (std::size_t i = 0; i <= arrow && n_terms < 31; ++i)
    if (i == arrow || s[i] == ',') {
      starts[n_terms] = b;
      ends[n_terms++] = i;
      b = i + 1;
    }
  const std::size_t out_b = arrow + 2 <= s.size() ? arrow + 2 : s.size();
  // Whether dim d of operand t is one of its ellipsis dims: not named by the
  // term, and not one of the size-1 axes that the term's `1`s take.
  auto is_ellipsis_dim = [&](std::size_t t, const term_names& tn, std::size_t d) {
    const std::string_view name = op_names[t][d];
    if (unit_axis_named(name)) {
      std::size_t before = 0;
      for (std::size_t k = 0; k < d; ++k) before += unit_axis_named(op_names[t][k]) ? 1 : 0;
      return before >= tn.units;
    }
    for (std::size_t k = 0; k < tn.n; ++k)
      if (tn.names[k] == name) return false;
    return true;
  };
  // The union of the input terms' ellipsis dims (first appearance first),
  // and the term whose ellipsis first has each.
  std::array<std::string_view, 64> all{};
  std::array<std::size_t, 64> all_term{};
  std::size_t n_all = 0;
  bool any_input = false;
  for (std::size_t t = 0; t < n_terms && t < 16; ++t) {
    const term_names tn = scan_term(s, starts[t], ends[t]);
    if (tn.ellipses > 1) return out.error = ellipsis_error::twice, out.error_term = t, out;
    if (tn.ellipses == 0) continue;
    if (tn.unnamed_group) return out.error = ellipsis_error::unnamed_group, out.error_term = t, out;
    any_input = true;
    if (t >= n_ops) continue;  // a count mismatch: the parser reports it
    for (std::size_t d = 0; d < op_sizes[t]; ++d) {
      if (!is_ellipsis_dim(t, tn, d)) continue;
      const std::string_view name = op_names[t][d];
      bool seen = false;
      for (std::size_t k = 0; k < n_all; ++k) seen = seen || all[k] == name;
      if (!seen && n_all < all.size()) {
        all_term[n_all] = t;
        all[n_all++] = name;
      }
    }
  }
  const term_names on = scan_term(s, out_b, s.size());
  if (on.ellipses > 1) return out.error = ellipsis_error::twice, out.error_term = n_terms, out;
  if (on.ellipses == 1 && on.unnamed_group) return out.error = ellipsis_error::unnamed_group, out.error_term = n_terms, out;
  if (!LeftOnly && any_input && on.ellipses == 0 && arrow < s.size())
    return out.error = ellipsis_error::one_side_only_input, out;
  if (!any_input && on.ellipses == 1) return out.error = ellipsis_error::one_side_only_output, out;
  // A dim that `...` stands for on the left, named on the right.
  auto check_named = [&](std::string_view label) {
    for (std::size_t k = 0; k < n_all; ++k)
      if (all[k] == label) {
        out.error = ellipsis_error::named_on_the_right;
        out.error_term = all_term[k];
        out.error_label = label;
        return false;
      }
    return true;
  };
  for (std::size_t k = 0; k < on.n; ++k)
    if (!check_named(on.names[k])) return out;
  for (std::size_t k = 0; k < on.n_inner; ++k)
    if (!check_named(on.inner[k])) return out;
  // Write the rewritten string.
  auto put = [&](char c) {
    if (out.size == ellipsis_max_chars) return false;
    out.text[out.size++] = c;
    return true;
  };
  auto put_text = [&](std::string_view t) {
    for (char c : t)
      if (!put(c)) return false;
    return true;
  };
  // A dim by name, or `1` for a size-1 axis that no label can name.
  auto put_dim = [&](std::string_view name) { return put_text(unit_axis_named(name) ? std::string_view("1") : name); };
  // An input term with `...` is written whole in its operand's order (the
  // ellipsis stands for the other dims by name, wherever they sit); the
  // output keeps its own order with the union in place of `...`.
  for (std::size_t t = 0; t < n_terms; ++t) {
    if (t > 0 && !put(',')) return out.error = ellipsis_error::too_long, out;
    const term_names tn = scan_term(s, starts[t], ends[t]);
    if (tn.ellipses == 0 || t >= n_ops) {
      if (!put_text(s.substr(starts[t], ends[t] - starts[t]))) return out.error = ellipsis_error::too_long, out;
      continue;
    }
    std::size_t unit_axes = 0;
    for (std::size_t d = 0; d < op_sizes[t]; ++d) {
      std::string_view text = op_names[t][d];
      unit_axes += unit_axis_named(text) ? 1 : 0;
      for (std::size_t k = 0; k < tn.n; ++k)
        if (tn.names[k] == text) text = tn.spans[k];
      if (!put(' ') || !put_dim(text)) return out.error = ellipsis_error::too_long, out;
    }
    // A named label that is not a dim of the operand (a typo), or a `1`
    // beyond the operand's size-1 axes, stays in the term, where the
    // einsum checks report it.
    for (std::size_t k = 0; k < tn.n; ++k) {
      bool is_dim = false;
      for (std::size_t d = 0; d < op_sizes[t]; ++d) is_dim = is_dim || op_names[t][d] == tn.names[k];
      if (!is_dim && (!put(' ') || !put_text(tn.spans[k]))) return out.error = ellipsis_error::too_long, out;
    }
    for (std::size_t k = unit_axes; k < tn.units; ++k)
      if (!put_text(" 1")) return out.error = ellipsis_error::too_long, out;
    if (!put(' ')) return out.error = ellipsis_error::too_long, out;
  }
  if (arrow < s.size()) {
    if (!put('-') || !put('>')) return out.error = ellipsis_error::too_long, out;
    for (std::size_t i = out_b; i < s.size();) {
      if (is_ellipsis_at(s, i, s.size())) {
        for (std::size_t k = 0; k < n_all; ++k)
          if ((k > 0 && !put(' ')) || !put_dim(all[k])) return out.error = ellipsis_error::too_long, out;
        i += 3;
      } else {
        if (!put(s[i])) return out.error = ellipsis_error::too_long, out;
        ++i;
      }
    }
  }
  return out;
}

template <fixed_string S, bool LeftOnly, class... Ls>
inline constexpr ellipsis_expansion ellipsis_expansion_v = expand_ellipsis<LeftOnly, Ls...>(S.view());

/// The rewritten string as a fixed_string (when there is no error).
template <fixed_string S, bool LeftOnly, class... Ls>
inline constexpr auto expanded_einsum_v = [] {
  constexpr const ellipsis_expansion& r = ellipsis_expansion_v<S, LeftOnly, Ls...>;
  fixed_string<r.size + 1> f{};
  for (std::size_t i = 0; i < r.size; ++i) f.data[i] = r.text[i];
  return f;
}();

/// S with `...` expanded for operands of dims Ls, or S itself when it has
/// no `...` or the expansion fails (report_ellipsis reports that).
template <fixed_string S, bool LeftOnly, class... Ls>
inline constexpr auto pattern_string_v = [] {
  if constexpr (has_ellipsis(S.view()) && ellipsis_expansion_v<S, LeftOnly, Ls...>.error == ellipsis_error::none)
    return expanded_einsum_v<S, LeftOnly, Ls...>;
  else
    return S;
}();

// output_term as a type that depends on D (a checker named with a
// non-dependent type would be instantiated where the template is defined).
template <class D>
struct output_term_of {
  using type = output_term;
};

/// Reports an ellipsis error of S on operands with dims Ls. constexpr, as
/// every report: clang 16 drops the chain back to the user's line for a
/// static_assert reached through a function that is not.
template <fixed_string S, bool LeftOnly, class... Ls>
constexpr void report_ellipsis() {
  constexpr const ellipsis_expansion& r = ellipsis_expansion_v<S, LeftOnly, Ls...>;
  using First = std::tuple_element_t<0, std::tuple<Ls...>>;
  using output_term = typename output_term_of<First>::type;
  if constexpr (r.error == ellipsis_error::twice) {
    if constexpr (r.error_term < sizeof...(Ls))
      report<einsum_term_has_two_ellipses<input_term<r.error_term>>>();
    else
      report<einsum_term_has_two_ellipses<output_term>>();
  } else if constexpr (r.error == ellipsis_error::unnamed_group) {
    if constexpr (r.error_term < sizeof...(Ls))
      report<einsum_ellipsis_term_has_an_unnamed_group<input_term<r.error_term>>>();
    else
      report<einsum_ellipsis_term_has_an_unnamed_group<output_term>>();
  } else if constexpr (r.error == ellipsis_error::one_side_only_input) {
    report<einsum_ellipsis_on_one_side_of_the_arrow_only<input_term<0>, diagnostic_dims_t<First>>>();
  } else if constexpr (r.error == ellipsis_error::one_side_only_output) {
    report<einsum_ellipsis_on_one_side_of_the_arrow_only<output_term, diagnostic_dims_t<First>>>();
  } else if constexpr (r.error == ellipsis_error::named_on_the_right) {
    struct get {
      constexpr std::string_view operator()() const { return ellipsis_expansion_v<S, LeftOnly, Ls...>.error_label; }
    };
    report<einsum_output_names_a_dim_that_the_ellipsis_stands_for<
        to_label_t<get>, input_term<r.error_term>,
        diagnostic_dims_t<std::tuple_element_t<ellipsis_expansion_v<S, LeftOnly, Ls...>.error_term, std::tuple<Ls...>>>>>();
  } else {
    static_assert(always_false<First>, "dimsum: an einsum string with '...' expands past 1024 characters");
  }
}

}  // namespace detail
}  // namespace dimsum
