#pragma once
/// \file
/// `.npy` files with named shapes, for exchanging tensors with PyTorch and
/// NumPy: `load_npy<tensor<float, batch, posn, d_model>>("x.npy")` checks
/// the dtype, the rank and every static extent (and any dynamic extents
/// passed by name) and fills the dynamic ones; `save_npy("x.npy", expr)`
/// writes any named expression in C order. Every problem is a
/// `dimsum::npy_error` naming the file, the dim and both extents.
///
/// NumPy has no bfloat16 dtype: a `bf16` expression is saved as float32
/// (`<f4`; every bf16 is exactly a float, so nothing is lost and NumPy and
/// PyTorch read it as they read any float32 file), and a `bf16` tensor is
/// loaded from a float32 file, each value rounded to the nearest bf16 (ties
/// to even), as `torch.from_numpy(a).bfloat16()` rounds.

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <filesystem>
#include <random>
#include <system_error>
#include <dimsum/core/bf16.hpp>
#include <dimsum/io/detail/file_sync.hpp>
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
    // bf16 files are float32 (see the file comment).
    auto a = io::detail::read_npy<std::conditional_t<is_bf16_v<T>, float, T>>(path);
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
    if constexpr (is_bf16_v<T>)
      std::transform(a.data.begin(), a.data.end(), t.data(), [](float x) { return T(x); });
    else
      std::copy(a.data.begin(), a.data.end(), t.data());
    return t;
  }
}

namespace detail {
/// A name for a temporary file next to `path` (same directory, so a rename
/// replaces `path` atomically), not yet taken.
inline std::filesystem::path temporary_path_beside(const std::filesystem::path& path) {
  static std::atomic<unsigned> counter{0};
  std::random_device entropy;
  for (int attempt = 0;; ++attempt) {
    auto name = path;
    name += ".tmp-" + std::to_string(entropy()) + "-" + std::to_string(counter++);
    std::error_code ec;
    if (!std::filesystem::exists(name, ec) || attempt == 100) return name;
  }
}
}  // namespace detail

namespace io::detail {
/// Writes e as a .npy file to a new temporary file beside `path` and
/// returns its name; a failed write removes it and throws npy_error naming
/// `path` ("not saved, an existing file is unchanged").
template <named_expression E>
std::filesystem::path write_npy_beside(const std::string& path, const E& e) {
  auto t = eval(e);
  const auto ext = t.extents();
  const std::vector<std::size_t> shape(ext.begin(), ext.end());
  const std::filesystem::path tmp = dimsum::detail::temporary_path_beside(path);
  const auto remove_tmp = [&] {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
  };
  try {
    if constexpr (is_bf16_v<value_type_of_t<E>>) {  // as float32 (see the file comment)
      std::vector<float> f(t.size());
      std::transform(t.data(), t.data() + t.size(), f.begin(), [](bf16 x) { return static_cast<float>(x); });
      write_npy(tmp.string(), f.data(), shape);
    } else {
      write_npy(tmp.string(), t.data(), shape);
    }
  } catch (const npy_error& err) {
    remove_tmp();
    constexpr std::string_view prefix = "dimsum: ";
    throw_npy_error(path, "not saved, an existing file is unchanged: " +
                              std::string(std::string_view(err.what()).substr(prefix.size())));
  } catch (...) {
    remove_tmp();
    throw;
  }
  return tmp;
}
/// Renames the complete (synced) temporary file `tmp` over `path`
/// (atomically) and syncs the directory; on failure removes tmp and throws
/// npy_error naming `path`.
inline void replace_with(const std::filesystem::path& tmp, const std::string& path) {
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw_npy_error(path, "not saved, cannot replace the file: " + ec.message());
  }
  fsync_directory(std::filesystem::path(path).parent_path());
}
}  // namespace io::detail

/// Writes a named expression to a `.npy` file in C order of its dims. The
/// data goes to a temporary file in the same directory, renamed over `path`
/// only once it is complete and synced to the disk (the directory is synced
/// after the rename): a save that fails (a write error, a full disk, an
/// exception) leaves an existing file at `path` as it was, and removes the
/// temporary file; a save that returned survives a crash. The new file gets
/// the default permissions.
template <named_expression E>
void save_npy(const std::string& path, const E& e) {
  io::detail::replace_with(io::detail::write_npy_beside(path, e), path);
}

}  // namespace dimsum
