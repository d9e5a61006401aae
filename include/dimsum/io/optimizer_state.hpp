#pragma once
/// \file
/// Optimizer checkpoints, to resume training: `save_optimizer_state` /
/// `load_optimizer_state` write and read the state of an optimizer
/// (`optim::adamw`, `optim::sgd`, or any `optimizer_base` that lists its
/// options and state entries) for the parameters of one module, as one
/// `.safetensors` file beside the model's (PyTorch's
/// `torch.save(optimizer.state_dict())`). Each tensor is keyed by the
/// parameter's dotted name and PyTorch's state key
/// ("blocks.0.ln1.weight.exp_avg", "blocks.0.ln1.weight.step"); the
/// `__metadata__` holds the optimizer's name ("dimsum.optimizer"), its
/// options ("dimsum.optimizer.lr", ... written so that they read back
/// exactly) and how many parameters have a state ("dimsum.optimizer.states",
/// 0 before the first step). A save is atomic (a failed one leaves the old
/// file intact). A load restores the options and every state, as PyTorch's
/// `load_state_dict` restores `param_groups` and `state`, after checking all
/// of it: the optimizer's name, the options, the keys (a `state_dict_error`
/// naming every missing and unexpected key), each dtype, and each extent (a
/// `shape_error` naming the key, its dims, the dim and both extents); a
/// failed load leaves the optimizer as it was. See
/// tests/unit/optim_optimizers.cpp.

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include <dimsum/io/npy_dir.hpp>
#include <dimsum/io/safetensors.hpp>
#include <dimsum/nn/module.hpp>
#include <dimsum/optim/parameter_states.hpp>

namespace dimsum {

namespace io::detail {

inline const std::string optimizer_key = "dimsum.optimizer";
inline const std::string optimizer_states_key = "dimsum.optimizer.states";

// An option as a metadata string that reads back to the same value:
// shortest round-trip digits for a double, "true"/"false" for a bool.
inline std::string option_string(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}
inline std::string option_string(bool v) { return v ? "true" : "false"; }

// Reads an option written by option_string; false if `s` is not one.
inline bool parse_option(const std::string& s, double& v) {
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}
inline bool parse_option(const std::string& s, bool& v) {
  if (s != "true" && s != "false") return false;
  v = s == "true";
  return true;
}

// Calls f("<dotted name>.<state key>", value, p) for every entry of the
// state of every parameter p of `m`, the state of the index-th parameter
// being `state_of(index, name, p)`.
template <class Opt, class M, class StateOf, class F>
void for_each_optimizer_entry(const Opt& opt, M& m, StateOf&& state_of, F&& f) {
  std::size_t i = 0;
  nn::for_each_parameter(m, [&](const std::string& name, auto& p) {
    auto& s = state_of(i++, name, p);
    opt.for_each_state_entry(s, [&](const char* entry, auto& value) { f(nn::detail::cat(name, ".", entry), value, p); });
  });
}

}  // namespace io::detail

/// Saves the state of optimizer `opt` for the parameters of module `m` to
/// `path` as a `.safetensors` file, atomically: per parameter the tensors
/// and step count of its state keyed "<dotted name>.<state key>", and the
/// optimizer's name, options and state count in `__metadata__` (see the
/// file comment). Throws `safetensors_error` if the file cannot be written
/// (the old file, if any, is then intact) and `optimizer_error` if `m`'s
/// parameters are not the ones the state was made for.
///
///     save_safetensors("model.safetensors", model);
///     save_optimizer_state("optimizer.safetensors", model, opt);
template <class M, class Opt>
void save_optimizer_state(const std::string& path, const M& m, const Opt& opt) {
  safetensors_contents c;
  c.metadata[io::detail::optimizer_key] = std::string(Opt::name);
  Opt::for_each_option(opt.options, [&](const char* name, const auto& v) {
    c.metadata[nn::detail::cat(io::detail::optimizer_key, ".", name)] = io::detail::option_string(v);
  });
  const auto& states = opt.states();
  c.metadata[io::detail::optimizer_states_key] = std::to_string(states.size());
  if (states.size() != 0) {
    std::size_t visited = 0;
    nn::for_each_parameter(m, [&](const std::string&, const auto&) { ++visited; });
    if (visited != states.size())
      throw optim::optimizer_error(nn::detail::cat("optimizer state: the module has ", std::to_string(visited),
                                                   " parameters but the state was created for ",
                                                   std::to_string(states.size())));
    io::detail::for_each_optimizer_entry(
        opt, m, [&](std::size_t i, const std::string& name, const auto& p) -> const auto& { return states.at(i, name, p); },
        [&](const std::string& key, const auto& value, const auto& p) {
          using V = std::remove_cvref_t<decltype(value)>;
          safetensors_tensor t;
          if constexpr (std::is_integral_v<V>) {
            t.dtype = std::string(safetensors_dtype_v<V>);
            t.data.resize(sizeof(V));
            io::detail::copy_le_bytes(reinterpret_cast<const std::byte*>(&value), reinterpret_cast<V*>(t.data.data()),
                                      1);
          } else {
            using T = typename V::value_type;
            t.dtype = std::string(safetensors_dtype_v<T>);
            const auto ext = p.value.extents();
            t.shape.assign(ext.begin(), ext.end());
            t.data.resize(p.value.size() * sizeof(T));  // zeros: a buffer not allocated yet stands for zeros
            if (value.extents() == ext)
              io::detail::copy_le_bytes(reinterpret_cast<const std::byte*>(value.data()),
                                        reinterpret_cast<T*>(t.data.data()), value.size());
          }
          c.tensors.emplace(key, std::move(t));
        });
  }
  write_safetensors(path, c);
}

/// Loads the state of optimizer `opt` for the parameters of module `m` from
/// the `.safetensors` file `path` written by `save_optimizer_state`: the
/// file's optimizer must be `opt`'s kind, its options valid (they replace
/// `opt.options`, as PyTorch's `load_state_dict` restores `param_groups`),
/// and, unless it was saved before the first step, its keys exactly the
/// entries of every parameter of `m` (`state_dict_error` naming every
/// missing and unexpected key), each dtype the parameter's
/// (`state_dict_error`), each extent the parameter's (`shape_error` naming
/// the key, its dims, the dim and both extents). Checks all of it before
/// it changes `opt`; a failed load leaves `opt` as it was.
///
///     load_safetensors("model.safetensors", model);
///     load_optimizer_state("optimizer.safetensors", model, opt);
template <class M, class Opt>
void load_optimizer_state(const std::string& path, const M& m, Opt& opt) {
  const safetensors_contents c = read_safetensors(path);
  auto meta = [&](const std::string& key) -> const std::string& {
    const auto it = c.metadata.find(key);
    if (it == c.metadata.end())
      throw state_dict_error(nn::detail::cat("optimizer state '", path, "' has no metadata '", key,
                                             "'; it was not written by save_optimizer_state"));
    return it->second;
  };
  if (meta(io::detail::optimizer_key) != Opt::name)
    throw state_dict_error(nn::detail::cat("optimizer state '", path, "' is the state of ",
                                           meta(io::detail::optimizer_key), ", not of ", Opt::name));
  auto options = opt.options;
  Opt::for_each_option(options, [&](const char* name, auto& v) {
    const std::string key = nn::detail::cat(io::detail::optimizer_key, ".", name);
    if (!io::detail::parse_option(meta(key), v))
      throw state_dict_error(nn::detail::cat("optimizer state '", path, "': option ", name, " is '", meta(key),
                                             "', not a ", std::is_same_v<decltype(v), bool&> ? "bool" : "number"));
  });
  Opt loaded(options);  // checks the options as the constructor does
  const std::string& count = meta(io::detail::optimizer_states_key);
  if (count != "0") {
    // Fresh states for every parameter (made by the first pass); their
    // entries are the keys the file must hold.
    auto entry_of = [&](std::size_t i, const std::string& name, const auto& p) -> auto& {
      return loaded.states().get(i, name, p);
    };
    std::map<std::string, std::string> keys;
    io::detail::for_each_optimizer_entry(loaded, m, entry_of, [&](const std::string& key, const auto&, const auto&) {
      keys.emplace(key, nn::detail::cat("'", key, "'"));
    });
    std::set<std::string> file_keys;
    for (const auto& [k, t] : c.tensors) file_keys.insert(k);
    io::detail::check_keys(path, keys, file_keys, strict);
    io::detail::for_each_optimizer_entry(loaded, m, entry_of, [&](const std::string& key, auto& value, const auto& p) {
      using V = std::remove_cvref_t<decltype(value)>;
      const auto& t = c.tensors.at(key);
      using T = typename std::remove_cvref_t<decltype(p)>::value_type;
      const std::string_view want = [] {
        if constexpr (std::is_integral_v<V>) return safetensors_dtype_v<V>;
        else return safetensors_dtype_v<T>;
      }();
      if (t.dtype != want)
        throw state_dict_error(nn::detail::cat("optimizer state '", path, "': '", key, "' is ", want,
                                               " in the optimizer but ", t.dtype, " in the checkpoint"));
      if constexpr (std::is_integral_v<V>) {
        if (!t.shape.empty())
          throw shape_error(nn::detail::cat("optimizer state '", path, "': '", key,
                                            "' is a scalar in the optimizer but has ", std::to_string(t.shape.size()),
                                            " axes in the checkpoint"));
      } else {
        io::detail::check_extents(path, nn::detail::cat("'", key, "'"), p, t.shape);
      }
    });
    io::detail::for_each_optimizer_entry(loaded, m, entry_of, [&](const std::string& key, auto& value, const auto& p) {
      using V = std::remove_cvref_t<decltype(value)>;
      const auto& t = c.tensors.at(key);
      if constexpr (std::is_integral_v<V>) {
        io::detail::copy_le_bytes(t.data.data(), &value, 1);
      } else {
        if (value.extents() != p.value.extents()) value = V::from_extents(p.value.extents());
        io::detail::copy_le_bytes(t.data.data(), value.data(), value.size());
      }
    });
  } else if (!c.tensors.empty()) {
    throw state_dict_error(nn::detail::cat("optimizer state '", path, "' was saved before the first step but holds '",
                                           c.tensors.begin()->first, "'"));
  }
  opt = std::move(loaded);
}

}  // namespace dimsum
