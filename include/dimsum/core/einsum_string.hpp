#pragma once
/// \file
/// The einsum string grammar and its constexpr parser. The same parser runs
/// at compile time (on `einsum<"...">`'s template argument) and at run time
/// (in tests/unit/einsum_string.cpp).
///
///     spec  := term (',' term)* '->' term
///     term  := item*                    (separated by spaces)
///     item  := label | group | label group | '1'
///     group := '(' (label | '1')* ')'   (a label right before '(' names the group)
///     label := [A-Za-z_][A-Za-z0-9_]*
///
/// Input terms may not be empty; the output term may (full contraction).
/// A size-1 axis is a group without labels: `()` or `1` (einops' spelling;
/// a `1` inside a group with labels is ignored, as in einops). In an input
/// term it stands for an operand dim of extent 1, which the pattern drops;
/// in the output it adds a dim of extent 1. A named empty group `h()` is a
/// size-1 axis with a name. Other numbers are an error (name the axis and
/// give its extent as a dim). `...` is rewritten before this parser runs
/// (ops/detail/einsum_ellipsis.hpp).

#include <array>
#include <cstddef>
#include <string_view>

namespace dimsum::detail {

enum class einsum_parse_error {
  none,
  no_arrow,
  more_than_one_arrow,
  empty_input_term,
  invalid_character,
  unbalanced_parentheses,
  number_other_than_1,
  too_many_labels,
  label_twice_in_a_term,
};

inline constexpr std::size_t einsum_max_terms = 16;
inline constexpr std::size_t einsum_max_labels = 16;

/// One dim position of a term: a label, or a group of labels (split/merged
/// dim); a group of no labels is a size-1 axis (`()`, `1`, or named `h()`).
struct einsum_item {
  std::string_view name;  // the label; for a group, its optional name
  bool is_group = false;
  std::size_t first = 0;  // for a group: its labels are term.labels[first, first + count)
  std::size_t count = 1;
};

/// Whether an item is an anonymous size-1 axis: `()` or `1`.
constexpr bool is_unit_item(const einsum_item& i) { return i.is_group && i.count == 0 && i.name.empty(); }

struct einsum_term {
  std::size_t n_items = 0;
  std::array<einsum_item, einsum_max_labels> items{};
  // Every label of the term with groups flattened, in order.
  std::size_t n_labels = 0;
  std::array<std::string_view, einsum_max_labels> labels{};
  bool has_group = false;
};

struct parsed_einsum {
  einsum_parse_error error = einsum_parse_error::none;
  std::size_t error_pos = 0;   // character offset of the error
  std::size_t error_term = 0;  // term index for term-level errors
  std::string_view error_label{};
  std::size_t n_inputs = 0;
  std::array<einsum_term, einsum_max_terms> inputs{};
  einsum_term output{};
};

// string_view::find compares pointers into the string with null, which g++
// cannot evaluate at compile time under -fsanitize=undefined when the string
// is a template argument; plain indexing can.
constexpr std::size_t find_in(std::string_view s, std::string_view pat, std::size_t from = 0) {
  for (std::size_t i = from; i + pat.size() <= s.size(); ++i) {
    bool match = true;
    for (std::size_t k = 0; k < pat.size() && match; ++k) match = s[i + k] == pat[k];
    if (match) return i;
  }
  return std::string_view::npos;
}

constexpr bool is_label_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
constexpr bool is_label_char(char c) { return is_label_start(c) || (c >= '0' && c <= '9'); }
constexpr bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n'; }
constexpr bool is_digit(char c) { return c >= '0' && c <= '9'; }

// The end of the token starting with a digit at s[i] (digits, then any
// label characters), and the error it makes: none for `1`, a number other
// than 1, or an invalid character (a label cannot start with a digit).
struct digit_token {
  std::size_t end = 0;
  einsum_parse_error error = einsum_parse_error::none;
};
constexpr digit_token scan_digit_token(std::string_view s, std::size_t i, std::size_t end) {
  const std::size_t b = i;
  while (i < end && is_digit(s[i])) ++i;
  const std::size_t digits_end = i;
  while (i < end && is_label_char(s[i])) ++i;
  if (i != digits_end) return {i, einsum_parse_error::invalid_character};
  if (s.substr(b, i - b) != "1") return {i, einsum_parse_error::number_other_than_1};
  return {i, einsum_parse_error::none};
}

// Parses one term s[begin, end) into t; returns false and sets the error in p.
constexpr bool parse_einsum_term(std::string_view s, std::size_t begin, std::size_t end, einsum_term& t,
                                 parsed_einsum& p) {
  auto fail = [&](einsum_parse_error e, std::size_t pos) {
    p.error = e;
    p.error_pos = pos;
    return false;
  };
  auto add_label = [&](std::string_view l, std::size_t pos) {
    if (t.n_labels == einsum_max_labels) return fail(einsum_parse_error::too_many_labels, pos);
    for (std::size_t i = 0; i < t.n_labels; ++i)
      if (t.labels[i] == l) {
        p.error_label = l;
        return fail(einsum_parse_error::label_twice_in_a_term, pos);
      }
    t.labels[t.n_labels++] = l;
    return true;
  };
  std::size_t i = begin;
  while (i < end) {
    char c = s[i];
    if (is_space(c)) {
      ++i;
      continue;
    }
    std::string_view name{};
    std::size_t name_pos = i;
    if (is_digit(c)) {
      const digit_token d = scan_digit_token(s, i, end);
      if (d.error != einsum_parse_error::none) return fail(d.error, i);
      if (t.n_items == einsum_max_labels) return fail(einsum_parse_error::too_many_labels, i);
      t.items[t.n_items++] = einsum_item{{}, true, t.n_labels, 0};
      i = d.end;
      continue;
    }
    if (is_label_start(c)) {
      std::size_t j = i;
      while (j < end && is_label_char(s[j])) ++j;
      name = s.substr(i, j - i);
      i = j;
      if (i >= end || s[i] != '(') {
        if (t.n_items == einsum_max_labels) return fail(einsum_parse_error::too_many_labels, name_pos);
        if (!add_label(name, name_pos)) return false;
        t.items[t.n_items++] = einsum_item{name, false, t.n_labels - 1, 1};
        continue;
      }
      c = s[i];
    }
    if (c == '(') {
      std::size_t open = i++;
      einsum_item g{name, true, t.n_labels, 0};
      bool closed = false;
      while (i < end) {
        char d = s[i];
        if (is_space(d)) {
          ++i;
        } else if (d == ')') {
          ++i;
          closed = true;
          break;
        } else if (is_label_start(d)) {
          std::size_t j = i;
          while (j < end && is_label_char(s[j])) ++j;
          if (!add_label(s.substr(i, j - i), i)) return false;
          ++g.count;
          i = j;
        } else if (is_digit(d)) {
          // A `1` inside a group multiplies by one: einops ignores it.
          const digit_token dt = scan_digit_token(s, i, end);
          if (dt.error != einsum_parse_error::none) return fail(dt.error, i);
          i = dt.end;
        } else if (d == '(') {
          return fail(einsum_parse_error::unbalanced_parentheses, i);
        } else {
          return fail(einsum_parse_error::invalid_character, i);
        }
      }
      if (!closed) return fail(einsum_parse_error::unbalanced_parentheses, open);
      if (t.n_items == einsum_max_labels) return fail(einsum_parse_error::too_many_labels, open);
      t.items[t.n_items++] = g;
      t.has_group = true;
      continue;
    }
    if (c == ')') return fail(einsum_parse_error::unbalanced_parentheses, i);
    return fail(einsum_parse_error::invalid_character, i);
  }
  return true;
}

/// Parses an einsum string; on error, `error` says what and `error_pos` where.
constexpr parsed_einsum parse_einsum(std::string_view s) {
  parsed_einsum p{};
  std::size_t arrow = find_in(s, "->");
  if (arrow == std::string_view::npos) {
    // A stray character (`=>` for `->`) is the mistake to report, at its own
    // position, before the arrow that is missing because of it.
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (s[i] == ',') ++p.error_term;
      if (!is_label_char(s[i]) && !is_space(s[i]) && s[i] != ',' && s[i] != '(' && s[i] != ')') {
        p.error = einsum_parse_error::invalid_character;
        p.error_pos = i;
        return p;
      }
    }
    p.error = einsum_parse_error::no_arrow;
    p.error_pos = s.size();
    p.error_term = 0;
    return p;
  }
  if (std::size_t second = find_in(s, "->", arrow + 2); second != std::string_view::npos) {
    p.error = einsum_parse_error::more_than_one_arrow;
    p.error_pos = second;
    return p;
  }
  std::size_t begin = 0;
  while (true) {
    std::size_t comma = find_in(s, ",", begin);
    std::size_t end = (comma == std::string_view::npos || comma > arrow) ? arrow : comma;
    if (p.n_inputs == einsum_max_terms) {
      p.error = einsum_parse_error::too_many_labels;
      p.error_pos = begin;
      return p;
    }
    einsum_term& t = p.inputs[p.n_inputs];
    if (!parse_einsum_term(s, begin, end, t, p)) {
      p.error_term = p.n_inputs;
      return p;
    }
    if (t.n_items == 0) {
      p.error = einsum_parse_error::empty_input_term;
      p.error_pos = begin;
      p.error_term = p.n_inputs;
      return p;
    }
    ++p.n_inputs;
    if (end == arrow) break;
    begin = end + 1;
  }
  if (std::size_t comma = find_in(s, ",", arrow); comma != std::string_view::npos) {
    p.error = einsum_parse_error::invalid_character;
    p.error_pos = comma;
    p.error_term = p.n_inputs;  // the output term
    return p;
  }
  if (!parse_einsum_term(s, arrow + 2, s.size(), p.output, p)) p.error_term = p.n_inputs;
  return p;
}

}  // namespace dimsum::detail
