#pragma once
/// \file
/// `.npy` files with named shapes, for exchanging tensors with PyTorch and
/// NumPy: `load_npy<tensor<float, batch, posn, d_model>>("x.npy")` checks
/// the dtype, the rank and every static extent (and any dynamic extents
/// passed by name) and fills the dynamic ones; `save_npy("x.npy", expr)`
/// writes any named expression in C order. Every problem is a
/// `dimsum::npy_error` naming the file, the dim and both extents.

#include <array>
#include <cstddef>
#include <dimsum/io/detail/npy_format.hpp>
#include <dimsum/io/print.hpp>
#include <dimsum/tensor/tensor.hpp>
#include <string>
#include <vector>

namespace dimsum {

namespace detail {
template <class Tensor>
std::string dims_description() {
  using L = dims_of_t<Tensor>;
  std::string s = std::string("tensor<") + dtype_name<value_type_of_t<Tensor>>() + ">[";
  for (std::size_t i = 0; i < L::size; ++i) {
    if (i) s += ", ";
    s += std::string(L::names[i]);
    if (L::static_extents[i] != dynamic) {
      // Appended piecewise: `"=" + std::to_string(...)` trips g++ 12's
      // false -Wrestrict (GCC PR 105329) at -O2.
      s += '=';
      s += std::to_string(L::static_extents[i]);
    }
  }
  return s + "]";
}
}  // namespace detail

/// Loads a `.npy` file into the tensor type `Tensor` (e.g. `tensor<float,
/// batch, posn, d_model>`). The file's dtype must be the tensor's value
/// type, its rank the number of dims, its extents the static extents; dims
/// given as arguments (`batch{12}`) must have those extents too.
template <class Tensor, dimension... Given>
Tensor load_npy(const std::string& path, const Given&... given) {
  using T = value_type_of_t<Tensor>;
  using L = dims_of_t<Tensor>;
  if constexpr (!detail::named_args_ok_v<L, Given...>) {
    detail::report_named_args<L, Given...>();
    return Tensor{};
  } else {
    auto a = io::detail::read_npy<T>(path);
    if (a.shape.size() != L::size)
      io::detail::throw_npy_error(
          path, "has " + std::to_string(a.shape.size()) + " axes (shape " + io::detail::npy_shape_string(a.shape) +
                    ") but " + detail::dims_description<Tensor>() + " has " + std::to_string(L::size) + " dims");
    std::array<std::size_t, L::size> ext{};
    for (std::size_t i = 0; i < L::size; ++i) {
      ext[i] = a.shape[i];
      if (L::static_extents[i] != dynamic && L::static_extents[i] != ext[i])
        io::detail::throw_npy_error(path, "axis " + std::to_string(i) + " (dim '" + std::string(L::names[i]) +
                                              "') has extent " + std::to_string(ext[i]) +
                                              " but the dim is static with extent " +
                                              std::to_string(L::static_extents[i]));
    }
    (
        [&] {
          constexpr std::size_t p = index_of<L>(Given::name.view());
          if (ext[p] != given.value)
            io::detail::throw_npy_error(
                path, "axis " + std::to_string(p) + " (dim '" + std::string(Given::name.view()) + "') has extent " +
                          std::to_string(ext[p]) + " but " + std::to_string(given.value) + " was required");
        }(),
        ...);
    auto t = Tensor::from_extents(ext);
    std::copy(a.data.begin(), a.data.end(), t.data());
    return t;
  }
}

/// Writes a named expression to a `.npy` file in C order of its dims.
template <named_expression E>
void save_npy(const std::string& path, const E& e) {
  auto t = eval(e);
  const auto ext = t.extents();
  const std::vector<std::size_t> shape(ext.begin(), ext.end());
  io::detail::write_npy(path, t.data(), shape);
}

}  // namespace dimsum
