#pragma once
/// \file
/// Module checkpoints (state dicts), keyed by the parameters' dotted member
/// names as `nn::for_each_parameter` gives them: `save_safetensors` /
/// `load_safetensors` for one `.safetensors` file, and (from
/// io/npy_dir.hpp) `save_npy_dir` / `load_npy_dir` for a directory of
/// `.npy` files (one per name). A save
/// stores each parameter's dims by name (in the safetensors
/// `__metadata__`, key "dimsum.dims.<name>", value "d_model d_head"), so the
/// checkpoint carries the names. A load checks everything before it
/// changes anything: the set of names (missing and unexpected keys are a
/// `state_dict_error` naming them), each dtype, the dim names when the file
/// has them, and every extent (a `shape_error` naming the parameter, its
/// dims, the dim and both extents); a failed load leaves the module as it
/// was. A load is strict by default (the checkpoint holds exactly the
/// module's names); `non_strict` lets it hold more, which are not read
/// (reading a module's weights out of a directory of fixtures). See
/// tests/unit/io_safetensors.cpp and tests/unit/io_npy_dir.cpp.

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
#include <dimsum/io/npy_dir.hpp>
#include <dimsum/io/safetensors.hpp>
#include <dimsum/nn/module.hpp>

namespace dimsum {

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
/// all of it before it changes any parameter. With `non_strict` the file
/// may hold other tensors, which are not read; their names are returned
/// (sorted; empty for a strict load).
///
///     load_safetensors("model.safetensors", model);
template <class M>
std::vector<std::string> load_safetensors(const std::string& path, M& m, key_match mode = strict) {
  const safetensors_contents c = read_safetensors(path);
  std::set<std::string> file_keys;
  for (const auto& [k, t] : c.tensors) file_keys.insert(k);
  std::vector<std::string> unread = io::detail::check_keys(path, io::detail::parameter_keys(m), file_keys, mode);
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
    io::detail::check_extents(path, nn::detail::cat("'", name, "'"), p, t.shape);
  });
  nn::for_each_parameter(m, [&](const std::string& name, auto& p) {
    const auto& t = c.tensors.at(name);
    io::detail::copy_le_bytes(t.data.data(), p.value.data(), p.value.size());
  });
  return unread;
}

}  // namespace dimsum
