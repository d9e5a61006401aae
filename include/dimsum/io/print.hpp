#pragma once
/// \file
/// Printing with names: `shape_string(x)` gives "[batch=12, posn=20,
/// d_model=30]"; `std::cout << x` prints the dtype, the named shape and the
/// values (xtensor's printer), e.g.
///
///     tensor<float>[batch=2, posn=3, d_model=5]
///     {{{...}}}

#include <cstdint>
#include <ostream>
#include <sstream>
#include <string>
#include <type_traits>

#include <xtensor/xio.hpp>

#include <dimsum/core/bf16.hpp>
#include <dimsum/tensor/tensor.hpp>

namespace dimsum {

/// The name of a value type as PyTorch users know it.
template <class T>
constexpr const char* dtype_name() {
  if constexpr (std::is_same_v<T, float>) return "float";
  else if constexpr (std::is_same_v<T, double>) return "double";
  else if constexpr (std::is_same_v<T, bool>) return "bool";
  else if constexpr (std::is_same_v<T, std::int32_t>) return "int32";
  else if constexpr (std::is_same_v<T, std::int64_t>) return "int64";
  else if constexpr (std::is_same_v<T, std::uint8_t>) return "uint8";
  else if constexpr (std::is_same_v<T, bf16>) return "bf16";
  else return "?";
}

/// "[batch=12, posn=20, d_model=30]": each dim's name and extent, in order.
template <named_expression E>
std::string shape_string(const E& e) {
  using L = dims_of_t<E>;
  const auto ext = e.extents();
  std::string s = "[";
  for (std::size_t i = 0; i < L::size; ++i) {
    if (i) s += ", ";
    s += std::string(L::names[i]) + "=" + std::to_string(ext[i]);
  }
  return s + "]";
}

/// Prints dtype, named shape and values of a tensor or view.
template <class T, class... Ds>
std::ostream& operator<<(std::ostream& os, const tensor<T, Ds...>& t) {
  return os << "tensor<" << dtype_name<T>() << ">" << shape_string(t) << "\n" << t.storage();
}
template <class T, class... Ds>
std::ostream& operator<<(std::ostream& os, const tensor_view<T, Ds...>& v) {
  return os << tensor<std::remove_const_t<T>, Ds...>(v);
}

}  // namespace dimsum
