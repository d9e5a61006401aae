#pragma once
/// \file
/// `fixed_string`: a string usable as a template argument (C++20 class NTTP),
/// used for dim names and einsum strings.

#include <algorithm>
#include <cstddef>
#include <string_view>
#include <utility>

namespace dimsum {

/// A compile-time string literal; `fixed_string{"posn"}` holds "posn".
template <std::size_t N>
struct fixed_string {
  char data[N]{};

  constexpr fixed_string() = default;
  constexpr fixed_string(const char (&s)[N]) { std::copy_n(s, N, data); }

  /// The characters without the terminating NUL.
  constexpr std::string_view view() const { return {data, N - 1}; }
  static constexpr std::size_t size() { return N - 1; }
};

/// A name spelled as a character pack, `chars<'q'>`; prints as characters.
/// Diagnostics carry longer names as `label<...>`, which reads as a word.
template <char... Cs>
struct chars {
  static constexpr char data[sizeof...(Cs) + 1] = {Cs..., '\0'};
  static constexpr std::string_view view() { return {data, sizeof...(Cs)}; }
};

namespace detail {
// Turns a constexpr string_view (given through a lambda so it stays a
// constant expression) into a `chars<...>` pack.
template <class Get, std::size_t... I>
constexpr auto to_chars_impl(std::index_sequence<I...>) {
  return chars<Get{}()[I]...>{};
}
template <class Get>
using to_chars_t = decltype(to_chars_impl<Get>(std::make_index_sequence<Get{}().size()>{}));

// A fixed_string holding the constexpr string_view that Get returns.
template <class Get>
inline constexpr auto to_fixed_string_v = [] {
  constexpr std::string_view sv = Get{}();
  fixed_string<sv.size() + 1> f{};
  for (std::size_t i = 0; i < sv.size(); ++i) f.data[i] = sv[i];
  return f;
}();
}  // namespace detail

/// A name in a diagnostic where no dim type is at hand (an einsum label, a
/// dim declared as a bare `dim<"...">`): `label<"posn">`. g++ 12 and clang
/// 16 both print it with the name as a string, `label<fixed_string<5>{"posn"}>`.
template <fixed_string Name>
struct label {
  static constexpr std::string_view view() { return Name.view(); }
};

namespace detail {
// The label spelling the constexpr string_view that Get returns.
template <class Get>
using to_label_t = label<to_fixed_string_v<Get>>;
}  // namespace detail

}  // namespace dimsum
