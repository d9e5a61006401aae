#pragma once
/// \file
/// A module's parameters as a directory of `.npy` files, one per dotted
/// member name as `nn::for_each_parameter` gives them: `save_npy_dir` and
/// `load_npy_dir`, and what every state-dict load shares (io/state_dict.hpp
/// adds `.safetensors` files): strict or `non_strict` key matching, a
/// `state_dict_error` naming missing and unexpected keys, and a
/// `shape_error` naming the parameter, its dims, the dim and both extents
/// when a file does not fit. A name map (`npy_file_name`, e.g.
/// `underscored`) reads files saved under other names. Apart from
/// io/state_dict.hpp so that reading weights does not compile the JSON
/// library. See tests/unit/io_npy_dir.cpp.

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <dimsum/io/npy.hpp>
#include <dimsum/nn/module.hpp>

namespace dimsum {

/// A checkpoint does not fit the module: missing or unexpected keys, or a
/// tensor of another dtype. Dims and extents that disagree are a
/// `shape_error`; a malformed file is a `safetensors_error` or `npy_error`.
struct state_dict_error : error {
  using error::error;
};

/// How a load matches the checkpoint's keys with the module's parameter
/// names.
enum class key_match {
  /// Exactly the module's names: a missing or an unexpected key is a
  /// `state_dict_error` naming them all (PyTorch's `strict=True`).
  strict,
  /// Every parameter must be in the checkpoint, which may hold other
  /// tensors too; they are not read. Unlike PyTorch's `strict=False`, a
  /// missing key is still an error: a module is never left half loaded.
  non_strict,
};
/// `load_npy_dir(dir, m, strict)`: the default.
inline constexpr key_match strict = key_match::strict;
/// `load_npy_dir(dir, m, non_strict)`: the checkpoint may hold more.
inline constexpr key_match non_strict = key_match::non_strict;

/// The file name (without ".npy") under which `save_npy_dir` and
/// `load_npy_dir` store a parameter, from its dotted name; an empty
/// function keeps the dotted name ("blocks.0.W_Q" -> "blocks.0.W_Q.npy").
using npy_file_name = std::function<std::string(const std::string& dotted_name)>;

/// A name map for `.npy` files saved with underscores for dots
/// (`np.save(f"{k.replace('.', '_')}.npy", v)`): "q_linear.weight" ->
/// "q_linear_weight".
inline std::string underscored(const std::string& dotted_name) {
  std::string s = dotted_name;
  std::replace(s.begin(), s.end(), '.', '_');
  return s;
}

namespace io::detail {

// Missing and unexpected keys, all of them in one message. `module_keys`
// maps each key the module needs to how a message names it (the key, or
// the parameter and its file); in non-strict mode other file keys are
// allowed. Returns the file keys that the load does not read.
inline std::vector<std::string> check_keys(const std::string& source,
                                           const std::map<std::string, std::string>& module_keys,
                                           const std::set<std::string>& file_keys, key_match mode) {
  std::string missing, unexpected;
  std::vector<std::string> unread;
  for (const auto& [k, label] : module_keys)
    if (!file_keys.count(k)) missing += nn::detail::cat(missing.empty() ? "" : ", ", label);
  for (const auto& k : file_keys)
    if (!module_keys.count(k)) {
      unread.push_back(k);
      if (mode == key_match::strict) unexpected += nn::detail::cat(unexpected.empty() ? "" : ", ", "'", k, "'");
    }
  if (missing.empty() && unexpected.empty()) return unread;
  std::string message = nn::detail::cat("state dict '", source, "' does not fit the module:");
  if (!missing.empty()) message += nn::detail::cat(" missing keys ", missing, ";");
  if (!unexpected.empty()) message += nn::detail::cat(" unexpected keys ", unexpected, ";");
  message.pop_back();
  throw state_dict_error(message);
}

// Checks the extents `file` (from the checkpoint) against the parameter's
// current extents, dim by dim; `label` names the parameter in messages
// ("'W_Q'", or "'key.weight' (file 'key_weight.npy')").
template <class P>
void check_extents(const std::string& source, const std::string& label, const P& p,
                   const std::vector<std::size_t>& file) {
  using L = typename P::dims;
  const auto have = p.value.extents();
  const std::string dims = nn::parameter_dim_names<P>(", ");
  if (file.size() != L::size)
    throw shape_error(nn::detail::cat("state dict '", source, "': parameter ", label, " (", dims, ") has ",
                                      std::to_string(L::size), " dims but the checkpoint's tensor has ",
                                      std::to_string(file.size()), " axes"));
  for (std::size_t i = 0; i < L::size; ++i)
    if (file[i] != have[i])
      throw shape_error(nn::detail::cat("state dict '", source, "': parameter ", label, " (", dims, "): dim '",
                                        L::names[i], "' has extent ", std::to_string(have[i]),
                                        " in the module but ", std::to_string(file[i]), " in the checkpoint"));
}

// The file (without ".npy") of parameter `name` under the name map `f`.
inline std::string npy_stem(const npy_file_name& f, const std::string& name) {
  if (!f) return name;
  std::string stem = f(name);
  if (stem.empty() || stem.find('/') != std::string::npos || stem == "." || stem == "..")
    throw state_dict_error(nn::detail::cat("the npy file name map gives '", stem, "' for parameter '", name,
                                           "'; a file name must be non-empty and have no '/'"));
  return stem;
}

// How messages name parameter `name` stored in file `stem`.npy.
inline std::string npy_label(const std::string& name, const std::string& stem) {
  return stem == name ? nn::detail::cat("'", name, "'") : nn::detail::cat("'", name, "' (file '", stem, ".npy')");
}

// The module's keys (file stems under the name map `f`, or the dotted
// names), each named in messages by its parameter and, when they differ,
// its file; two parameters mapped to one file are a state_dict_error.
template <class M>
std::map<std::string, std::string> parameter_keys(const M& m, const npy_file_name& f = {}) {
  std::map<std::string, std::string> keys;
  std::map<std::string, std::string> owner;
  nn::for_each_parameter(m, [&](const std::string& name, const auto&) {
    const std::string stem = npy_stem(f, name);
    if (auto [it, fresh] = owner.emplace(stem, name); !fresh)
      throw state_dict_error(nn::detail::cat("the npy file name map gives parameters '", it->second, "' and '", name,
                                             "' one file '", stem, ".npy'"));
    keys.emplace(stem, npy_label(name, stem));
  });
  return keys;
}

}  // namespace io::detail

/// Saves each parameter of `m` as `<dir>/<dotted name>.npy` (creating
/// `dir`), readable by `numpy.load`; a name map `file_name` gives other
/// file names (`underscored`: "blocks_0_W_Q.npy"). Every file is written to
/// a temporary file first and renamed over the old one only when all are
/// written, so a save that fails writing (a full disk, a target that is a
/// directory) leaves the directory's old files as they were; a directory
/// that cannot be created is a `state_dict_error` naming it and the reason.
///
///     save_npy_dir("checkpoint", model);  // checkpoint/blocks.0.attn.W_Q.npy, ...
template <class M>
void save_npy_dir(const std::string& dir, const M& m, const npy_file_name& file_name = {}) {
  namespace fs = std::filesystem;
  io::detail::parameter_keys(m, file_name);  // refuses a map that sends two parameters to one file
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    throw state_dict_error(nn::detail::cat("state dict '", dir, "': not saved, cannot create the directory: ",
                                           ec ? ec.message() : std::string("a file of that name exists")));
  std::vector<std::pair<fs::path, std::string>> written;  // (temporary file, target)
  const auto remove_written = [&] {
    std::error_code ignored;
    for (const auto& w : written) fs::remove(w.first, ignored);
  };
  try {
    nn::for_each_parameter(m, [&](const std::string& name, const auto& p) {
      const std::string target = (fs::path(dir) / (io::detail::npy_stem(file_name, name) + ".npy")).string();
      if (fs::is_directory(target, ec))
        io::detail::throw_npy_error(target, "not saved, nor any file of the directory: the target is a directory");
      written.emplace_back(io::detail::write_npy_beside(target, p.value), target);
    });
  } catch (...) {
    remove_written();
    throw;
  }
  for (const auto& [tmp, target] : written) io::detail::replace_with(tmp, target);
}

/// Loads each parameter of `m` from `<dir>/<dotted name>.npy` (or the file
/// the name map `file_name` gives). Strict (the default): the `.npy` files
/// of `dir` must be exactly the module's (missing and unexpected keys are a
/// `state_dict_error` naming them all). `non_strict`: `dir` may hold other
/// `.npy` files, which are not read; every parameter must still have its
/// file. Each file must fit its parameter: its dtype the value type
/// (`npy_error`), its rank the number of dims and each extent the
/// parameter's current extent (`shape_error` naming the parameter, its
/// dims, the dim and both extents), so a module with dynamic dims is sized
/// before the load, as in PyTorch. Checks every file before it changes any
/// parameter. Returns the names of the `.npy` files not read (sorted,
/// without ".npy"; empty for a strict load).
///
///     attention_weights<d_model, nheads, d_head> w;
///     load_npy_dir("fixtures/seed000", w, dimsum::non_strict);         // W_Q.npy ... b_O.npy
///     load_npy_dir("fixtures/seed001", head, non_strict, underscored); // key_weight.npy, ...
template <class M>
std::vector<std::string> load_npy_dir(const std::string& dir, M& m, key_match mode = strict,
                                      const npy_file_name& file_name = {}) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw state_dict_error(nn::detail::cat("state dict '", dir, "' is not a directory"));
  std::set<std::string> file_keys;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".npy") file_keys.insert(it->path().stem().string());
  if (ec) throw state_dict_error(nn::detail::cat("state dict '", dir, "': cannot list the directory: ", ec.message()));
  std::vector<std::string> unread = io::detail::check_keys(dir, io::detail::parameter_keys(m, file_name), file_keys, mode);
  std::vector<std::function<void()>> commits;
  nn::for_each_parameter(m, [&](const std::string& name, auto& p) {
    using P = std::remove_cvref_t<decltype(p)>;
    using T = typename P::value_type;
    const std::string stem = io::detail::npy_stem(file_name, name);
    auto a = io::detail::read_npy<T>((fs::path(dir) / (stem + ".npy")).string());
    io::detail::check_extents(dir, io::detail::npy_label(name, stem), p, a.shape);
    auto t = P::tensor_type::from_extents(p.value.extents());
    std::copy(a.data.begin(), a.data.end(), t.data());
    commits.push_back([&p, t = std::move(t)]() mutable { p.value = std::move(t); });
  });
  for (auto& commit : commits) commit();
  return unread;
}

}  // namespace dimsum
