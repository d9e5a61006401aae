#pragma once
/// \file
/// Module checkpoints (state dicts), keyed by the parameters' dotted member
/// names as `nn::for_each_parameter` gives them: `save_safetensors` /
/// `load_safetensors` for one `.safetensors` file, `save_npy_dir` /
/// `load_npy_dir` for a directory of `.npy` files (one per name). A save
/// stores each parameter's dims by name (in the safetensors
/// `__metadata__`, key "dimsum.dims.<name>", value "d_model d_head"), so the
/// checkpoint carries the names. A load checks everything before it
/// changes anything: the set of names (missing and unexpected keys are a
/// `state_dict_error` naming them), each dtype, the dim names when the file
/// has them, and every extent (a `shape_error` naming the parameter, its
/// dims, the dim and both extents); a failed load leaves the module as it
/// was. See tests/unit/io_safetensors.cpp.

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <dimsum/core/diagnostics.hpp>
#include <dimsum/io/npy.hpp>
#include <dimsum/io/safetensors.hpp>
#include <dimsum/nn/module.hpp>

namespace dimsum {

/// A checkpoint does not fit the module: missing or unexpected keys, or a
/// tensor of another dtype. Dims and extents that disagree are a
/// `shape_error`; a malformed file is a `safetensors_error` or `npy_error`.
struct state_dict_error : error {
  using error::error;
};

/// Compile-time error: a parameter's value type has no `.safetensors` dtype
/// (the format names float, double and the fixed-width integers).
template <class T>
struct parameter_type_has_no_safetensors_dtype {
  static_assert(dimsum::detail::always_false<T>,
                "dimsum: a .safetensors checkpoint holds parameters of float, double or std::int8_t ... "
                "std::uint64_t only");
};

/// The `__metadata__` key under which a checkpoint stores the dim names of
/// parameter `name`: "dimsum.dims." + name.
inline std::string state_dict_dims_key(const std::string& name) { return nn::detail::cat("dimsum.dims.", name); }

namespace io::detail {

// Missing and unexpected keys, all of them in one message.
inline void check_keys(const std::string& source, const std::set<std::string>& module_keys,
                       const std::set<std::string>& file_keys) {
  std::string missing, unexpected;
  for (const auto& k : module_keys)
    if (!file_keys.count(k)) missing += nn::detail::cat(missing.empty() ? "" : ", ", "'", k, "'");
  for (const auto& k : file_keys)
    if (!module_keys.count(k)) unexpected += nn::detail::cat(unexpected.empty() ? "" : ", ", "'", k, "'");
  if (missing.empty() && unexpected.empty()) return;
  std::string message = nn::detail::cat("state dict '", source, "' does not fit the module:");
  if (!missing.empty()) message += nn::detail::cat(" missing keys ", missing, ";");
  if (!unexpected.empty()) message += nn::detail::cat(" unexpected keys ", unexpected, ";");
  message.pop_back();
  throw state_dict_error(message);
}

// Checks the extents `file` (from the checkpoint) against the parameter's
// current extents, dim by dim.
template <class P>
void check_extents(const std::string& source, const std::string& name, const P& p,
                   const std::vector<std::size_t>& file) {
  using L = typename P::dims;
  const auto have = p.value.extents();
  const std::string dims = nn::parameter_dim_names<P>(", ");
  if (file.size() != L::size)
    throw shape_error(nn::detail::cat("state dict '", source, "': parameter '", name, "' (", dims, ") has ",
                                      std::to_string(L::size), " dims but the checkpoint's tensor has ",
                                      std::to_string(file.size()), " axes"));
  for (std::size_t i = 0; i < L::size; ++i)
    if (file[i] != have[i])
      throw shape_error(nn::detail::cat("state dict '", source, "': parameter '", name, "' (", dims, "): dim '",
                                        L::names[i], "' has extent ", std::to_string(have[i]),
                                        " in the module but ", std::to_string(file[i]), " in the checkpoint"));
}

template <class M>
std::set<std::string> parameter_names(const M& m) {
  std::set<std::string> names;
  nn::for_each_parameter(m, [&](const std::string& name, const auto&) { names.insert(name); });
  return names;
}

}  // namespace io::detail

/// Saves the parameters of module `m` to `path` as a `.safetensors` file,
/// atomically; each tensor is keyed by its dotted name, and `metadata`
/// (strings) is stored in `__metadata__` beside the dim names. Throws
/// `safetensors_error` if the file cannot be written (the old file, if
/// any, is then intact) and `state_dict_error` if `metadata` uses a key
/// starting with "dimsum.dims.".
///
///     save_safetensors("model.safetensors", model);
template <class M>
void save_safetensors(const std::string& path, const M& m, const std::map<std::string, std::string>& metadata = {}) {
  safetensors_contents c;
  for (const auto& [k, v] : metadata) {
    if (k.rfind("dimsum.dims.", 0) == 0)
      throw state_dict_error(nn::detail::cat("metadata key '", k, "' is reserved for the dim names"));
    c.metadata[k] = v;
  }
  nn::for_each_parameter(m, [&](const std::string& name, const auto& p) {
    using P = std::remove_cvref_t<decltype(p)>;
    using T = typename P::value_type;
    if constexpr (safetensors_dtype_v<T>.empty()) {
      detail::report<parameter_type_has_no_safetensors_dtype<T>>();
      return;
    }
    safetensors_tensor t;
    t.dtype = std::string(safetensors_dtype_v<T>);
    const auto ext = p.value.extents();
    t.shape.assign(ext.begin(), ext.end());
    t.data.resize(p.value.size() * sizeof(T));
    io::detail::copy_le_bytes(reinterpret_cast<const std::byte*>(p.value.data()), reinterpret_cast<T*>(t.data.data()),
                              p.value.size());
    c.metadata[state_dict_dims_key(name)] = nn::parameter_dim_names<P>();
    c.tensors.emplace(name, std::move(t));
  });
  write_safetensors(path, c);
}

/// Loads the parameters of module `m` from the `.safetensors` file `path`:
/// the file's names must be exactly the module's, each dtype the
/// parameter's value type, the dim names (if the file stores them) the
/// parameter's, and each extent the parameter's current extent. Checks
/// all of it before it changes any parameter.
///
///     load_safetensors("model.safetensors", model);
template <class M>
void load_safetensors(const std::string& path, M& m) {
  const safetensors_contents c = read_safetensors(path);
  std::set<std::string> file_keys;
  for (const auto& [k, t] : c.tensors) file_keys.insert(k);
  io::detail::check_keys(path, io::detail::parameter_names(m), file_keys);
  nn::for_each_parameter(std::as_const(m), [&](const std::string& name, const auto& p) {
    using P = std::remove_cvref_t<decltype(p)>;
    using T = typename P::value_type;
    if constexpr (safetensors_dtype_v<T>.empty()) {
      detail::report<parameter_type_has_no_safetensors_dtype<T>>();
      return;
    }
    const auto& t = c.tensors.at(name);
    if (t.dtype != safetensors_dtype_v<T>)
      throw state_dict_error(nn::detail::cat("state dict '", path, "': parameter '", name, "' is ",
                                             safetensors_dtype_v<T>, " in the module but ", t.dtype,
                                             " in the checkpoint"));
    if (auto it = c.metadata.find(state_dict_dims_key(name)); it != c.metadata.end() &&
                                                               it->second != nn::parameter_dim_names<P>())
      throw shape_error(nn::detail::cat("state dict '", path, "': parameter '", name, "' has dims (",
                                        nn::parameter_dim_names<P>(), ") in the module but (", it->second,
                                        ") in the checkpoint"));
    io::detail::check_extents(path, name, p, t.shape);
  });
  nn::for_each_parameter(m, [&](const std::string& name, auto& p) {
    const auto& t = c.tensors.at(name);
    io::detail::copy_le_bytes(t.data.data(), p.value.data(), p.value.size());
  });
}

/// Saves each parameter of `m` as `<dir>/<dotted name>.npy` (creating
/// `dir`), readable by `numpy.load`. Files are written one by one, not
/// atomically as a set.
///
///     save_npy_dir("checkpoint", model);  // checkpoint/blocks.0.attn.W_Q.npy, ...
template <class M>
void save_npy_dir(const std::string& dir, const M& m) {
  std::filesystem::create_directories(dir);
  nn::for_each_parameter(m, [&](const std::string& name, const auto& p) {
    save_npy((std::filesystem::path(dir) / (name + ".npy")).string(), p.value);
  });
}

/// Loads each parameter of `m` from `<dir>/<dotted name>.npy`: the `.npy`
/// files of `dir` must be exactly the module's names (missing and
/// unexpected keys are a `state_dict_error`), and each file must fit its
/// parameter (`npy_error` for the dtype or rank, `shape_error` for an
/// extent). Checks all files before it changes any parameter.
template <class M>
void load_npy_dir(const std::string& dir, M& m) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw state_dict_error(nn::detail::cat("state dict '", dir, "' is not a directory"));
  std::set<std::string> file_keys;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().extension() == ".npy") file_keys.insert(entry.path().stem().string());
  io::detail::check_keys(dir, io::detail::parameter_names(m), file_keys);
  std::vector<std::function<void()>> commits;
  nn::for_each_parameter(m, [&](const std::string& name, auto& p) {
    using P = std::remove_cvref_t<decltype(p)>;
    auto loaded = load_npy<typename P::tensor_type>((fs::path(dir) / (name + ".npy")).string());
    const auto e = loaded.extents();
    io::detail::check_extents(dir, name, p, std::vector<std::size_t>(e.begin(), e.end()));
    commits.push_back([&p, t = std::move(loaded)]() mutable { p.value = std::move(t); });
  });
  for (auto& commit : commits) commit();
}

}  // namespace dimsum
