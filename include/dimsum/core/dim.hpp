#pragma once
/// \file
/// `dim`: a named dimension whose extent is static (part of the type) or
/// dynamic (stored in the tensor). See examples/attention.cpp.

#include <cstddef>
#include <limits>
#include <string_view>
#include <type_traits>

#include <dimsum/core/fixed_string.hpp>

namespace dimsum {

/// The extent of a dim whose size is known only at run time.
inline constexpr std::size_t dynamic = std::numeric_limits<std::size_t>::max();

namespace detail {
struct dim_tag {};
}  // namespace detail

/// A dimension named `Name` with a static extent, or `dynamic`.
///
/// Identity is the name: two dims with the same name are the same dim, and
/// their extents must agree (both static and different: compile error;
/// otherwise checked at run time). Declare one as a tag type so diagnostics
/// print its name on every compiler:
///
///     struct posn : dimsum::dim<"posn"> {};          // dynamic extent
///     struct d_head : dimsum::dim<"d_head", 64> {};  // static extent
///
/// or with DIMSUM_DIM(posn) / DIMSUM_DIM(d_head, 64). A value of a dim type
/// carries a number: an extent when constructing a tensor (`posn{20}`), an
/// index when reading an element (`x(posn{3}, ...)`).
template <fixed_string Name, std::size_t Extent = dynamic>
struct dim : detail::dim_tag {
  static_assert(Name.size() > 0, "dimsum: a dim name cannot be empty");

  static constexpr auto name = Name;
  static constexpr std::size_t static_extent = Extent;
  static constexpr bool is_static = Extent != dynamic;

  std::size_t value;

  constexpr dim(std::size_t v = (Extent == dynamic ? 0 : Extent)) : value(v) {}

  static constexpr std::string_view name_view() { return Name.view(); }
};

/// True for `dim<...>` and every type derived from one.
template <class D>
inline constexpr bool is_dim_v = std::is_base_of_v<detail::dim_tag, D>;

/// A dim type; what every list of dims in dimsum is made of.
template <class D>
concept dimension = is_dim_v<D>;

/// The name of dim `D` as a string_view.
template <dimension D>
inline constexpr std::string_view name_of = D::name.view();

namespace detail {
template <class D>
struct name_getter {
  constexpr std::string_view operator()() const { return D::name.view(); }
};
template <class D>
inline constexpr bool is_plain_dim = std::is_same_v<D, dim<D::name, D::static_extent>>;
}  // namespace detail

/// How a dim appears in a diagnostic: the user's tag type when there is one
/// (it prints as its own name), otherwise its name as a `label<"...">`.
template <dimension D>
using diagnostic_name_t = std::conditional_t<detail::is_plain_dim<D>, label<D::name>, D>;

}  // namespace dimsum

namespace dimsum::detail {
/// The members every dim has: a tag of one of these names would hide the
/// member it inherits (a class's own name wins inside it), so DIMSUM_DIM
/// refuses them.
consteval bool is_dim_member_name(std::string_view n) {
  return n == "name" || n == "value" || n == "static_extent" || n == "is_static" || n == "name_view";
}
}  // namespace dimsum::detail

/// Declares a dim tag type: DIMSUM_DIM(posn) or DIMSUM_DIM(d_head, 64).
///
/// Any identifier is a valid name, library functions' included (`index`,
/// `time`, `exp`, `log`, `sum`: tests/static/dim_names.cpp), except the
/// members every dim has (`name`, `value`, `static_extent`, `is_static`,
/// `name_view`). Declare dims in a namespace (or a function): at global
/// scope a C function of the same name, such as `index` from <strings.h>,
/// hides the struct (C++'s rule for a class and a function of one name).
#define DIMSUM_DIM(...) DIMSUM_DIM_SELECT_(__VA_ARGS__, DIMSUM_DIM_STATIC_, DIMSUM_DIM_DYNAMIC_, )(__VA_ARGS__)
#define DIMSUM_DIM_SELECT_(a, b, macro, ...) macro
#define DIMSUM_DIM_DYNAMIC_(id) DIMSUM_DIM_TAG_(id, ::dimsum::dim<#id>)
#define DIMSUM_DIM_STATIC_(id, extent) DIMSUM_DIM_TAG_(id, ::dimsum::dim<#id, extent>)
#define DIMSUM_DIM_TAG_(id, ...)                                                                    \
  struct id : __VA_ARGS__ {                                                                                \
    static_assert(!::dimsum::detail::is_dim_member_name(#id),                                       \
                  "dimsum: a dim cannot be named name, value, static_extent, is_static or "       \
                  "name_view (every dim has a member of that name); choose another name");        \
  }
