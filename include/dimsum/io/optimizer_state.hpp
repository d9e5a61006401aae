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
/// parameter groups in PyTorch's `param_groups` layout (their count,
/// "dimsum.optimizer.param_groups", and for each group g its options,
/// "dimsum.optimizer.param_groups.<g>.lr", ... written so that they read
/// back exactly, and its parameters' dotted names, comma-separated, in
/// "dimsum.optimizer.param_groups.<g>.params") and how many parameters have
/// a state ("dimsum.optimizer.states", 0 before the first step). A file
/// written before optimizers had groups (options in
/// "dimsum.optimizer.<option>") loads as one group. A save is atomic (a failed one leaves the old
/// file intact). A load restores the options and every state, as PyTorch's
/// `load_state_dict` restores `param_groups` and `state`, after checking all
/// of it: the optimizer's name, the options, the state count (0, or the
/// module's number of parameters), the keys (a `state_dict_error`
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
// state of every parameter p of `m` that is not frozen (a frozen
// parameter's state is neither saved nor loaded), the state of the
// index-th parameter being what `with_state(index, name, p, k)` passes to
// `k`. The entries are those of the parameter's group's options.
template <class Opt, class M, class WithState, class F>
void for_each_optimizer_entry(const Opt& opt, M& m, WithState&& with_state, F&& f) {
  std::size_t i = 0;
  nn::for_each_parameter(m, [&](const std::string& name, auto& p) {
    const std::size_t index = i++;
    if constexpr (!is_frozen_parameter_v<decltype(p)>) {
      if (!p.requires_grad) return;
      with_state(index, name, p, [&](auto& s) {
        Opt::for_each_state_entry(s, opt.group_options(opt.group_of(name, p)),
                                  [&](const char* entry, auto& value) { f(nn::detail::cat(name, ".", entry), value, p); });
      });
    }
  });
}

// The number of parameters of `m` that are not frozen.
template <class M>
std::size_t trainable_count(const M& m) {
  std::size_t n = 0;
  nn::for_each_parameter(m, [&](const std::string&, const auto& p) { n += bool(p.requires_grad) ? 1 : 0; });
  return n;
}

inline const std::string optimizer_groups_key = "dimsum.optimizer.param_groups";

// "dimsum.optimizer.param_groups.<g>.<what>".
inline std::string group_key(std::size_t g, std::string_view what) {
  return nn::detail::cat(optimizer_groups_key, ".", std::to_string(g), ".", what);
}

// The dotted names of the parameters of `m` in each group of `opt`, each
// list comma-separated in visiting order (PyTorch's param_groups[g]["params"]).
template <class Opt, class M>
std::vector<std::string> group_params(const Opt& opt, const M& m) {
  std::vector<std::string> lists(opt.group_count());
  nn::for_each_parameter(m, [&](const std::string& name, const auto& p) {
    auto& l = lists[opt.group_of(name, p)];
    if (!l.empty()) l += ',';
    l += name;
  });
  return lists;
}

}  // namespace io::detail

/// Saves the state of optimizer `opt` for the parameters of module `m` to
/// `path` as a `.safetensors` file, atomically: per parameter the tensors
/// and step count of its state keyed "<dotted name>.<state key>", and the
/// optimizer's name, options and state count in `__metadata__` (see the
/// file comment). Throws `safetensors_error` if the file cannot be written
/// (the old file, if any, is then intact), `optimizer_error` if `m`'s
/// parameters are not the ones the state was made for, and `shape_error`
/// if a parameter's extents are not its state's (`check_state`).
///
///     save_safetensors("model.safetensors", model);
///     save_optimizer_state("optimizer.safetensors", model, opt);
template <class M, class Opt>
void save_optimizer_state(const std::string& path, const M& m, const Opt& opt) {
  safetensors_contents c;
  c.metadata[io::detail::optimizer_key] = std::string(Opt::name);
  c.metadata[io::detail::optimizer_groups_key] = std::to_string(opt.group_count());
  const auto lists = io::detail::group_params(opt, m);
  for (std::size_t g = 0; g < opt.group_count(); ++g) {
    Opt::for_each_option(opt.group_options(g), [&](const char* name, const auto& v) {
      c.metadata[io::detail::group_key(g, name)] = io::detail::option_string(v);
    });
    c.metadata[io::detail::group_key(g, "params")] = lists[g];
  }
  const auto& states = opt.states();
  c.metadata[io::detail::optimizer_states_key] =
      std::to_string(states.size() != 0 ? io::detail::trainable_count(m) : std::size_t(0));
  if (states.size() != 0) {
    std::size_t visited = 0;
    nn::for_each_parameter(m, [&](const std::string& name, const auto& p) {
      if constexpr (!is_frozen_parameter_v<decltype(p)>) states.check(visited, name, p);
      ++visited;
    });
    if (visited < states.size())
      throw optim::optimizer_error(nn::detail::cat("optimizer state: the module has ", std::to_string(visited),
                                                   " parameters but the state was created for ",
                                                   std::to_string(states.size())));
    io::detail::for_each_optimizer_entry(
        opt, m,
        [&](std::size_t i, const std::string& name, const auto& p, auto&& k) {
          if (!states.has(i)) {  // frozen in every step so far: the state its first step will start from
            const typename Opt::template state_type<std::remove_cvref_t<decltype(p)>> fresh(p);
            return k(fresh);
          }
          const auto& s = states.at(i, name, p);
          Opt::check_state(name, p, s, opt.group_options(opt.group_of(name, p)));
          k(s);
        },
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
            if (value.size() != 0)  // allocated: check_state found it with the parameter's extents
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
/// file's optimizer must be `opt`'s kind, with as many groups as `opt`
/// holding the same parameters (`opt`'s selectors decide: add the same
/// groups before loading), each group's options valid (they replace
/// `opt`'s, as PyTorch's `load_state_dict` restores `param_groups`),
/// and, unless it was saved before the first step, its state count the
/// number of `m`'s parameters (`state_dict_error`), its keys exactly the
/// entries of every parameter of `m` (`state_dict_error` naming every
/// missing and unexpected key), each dtype the parameter's
/// (`state_dict_error`), each extent the parameter's (`shape_error` naming
/// the key, its dims, the dim and both extents), and each state's values
/// as the optimizer's `check_state` wants them (AdamW: a step count from 0
/// to below INT64_MAX, else `optimizer_error`). Checks all of it before it
/// changes `opt`; a failed load leaves `opt` as it was.
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
  // The groups: as many as `opt` has (its selectors say which parameter
  // is in which), each with its options and its parameters' names. A file
  // without groups (written before optimizers had them) is one group whose
  // options are "dimsum.optimizer.<option>".
  std::size_t groups = 1;
  const bool has_groups = c.metadata.count(io::detail::optimizer_groups_key) != 0;
  if (has_groups) {
    const std::string& n = meta(io::detail::optimizer_groups_key);
    if (const auto r = std::from_chars(n.data(), n.data() + n.size(), groups);
        r.ec != std::errc() || r.ptr != n.data() + n.size())
      throw state_dict_error(nn::detail::cat("optimizer state '", path, "': metadata '",
                                             io::detail::optimizer_groups_key, "' is '", n, "', not a count"));
  }
  if (groups != opt.group_count())
    throw state_dict_error(nn::detail::cat("optimizer state '", path, "' holds ", std::to_string(groups),
                                           " parameter groups but the optimizer has ", std::to_string(opt.group_count()),
                                           "; add the same groups (add_group) before loading"));
  auto read_options = [&](std::size_t g) {
    auto options = opt.group_options(g);
    Opt::for_each_option(options, [&](const char* name, auto& v) {
      const std::string key =
          has_groups ? io::detail::group_key(g, name) : nn::detail::cat(io::detail::optimizer_key, ".", name);
      if (!io::detail::parse_option(meta(key), v))
        throw state_dict_error(nn::detail::cat("optimizer state '", path, "': group ", std::to_string(g), " option ",
                                               name, " is '", meta(key), "', not a ",
                                               std::is_same_v<decltype(v), bool&> ? "bool" : "number"));
    });
    return options;
  };
  Opt loaded(read_options(0));  // checks the options as the constructor does
  for (std::size_t g = 1; g < groups; ++g) loaded.add_group(opt.added_groups()[g - 1].select, read_options(g));
  loaded.set_lr_factor(opt.lr_factor());
  // How many parameters have a state: 0 (saved before the first step) or
  // every parameter of m, as save_optimizer_state writes it. The keys alone
  // would not tell (an SGD without momentum keeps no tensor).
  const std::string& count = meta(io::detail::optimizer_states_key);
  std::size_t states = 0;
  if (const auto r = std::from_chars(count.data(), count.data() + count.size(), states);
      r.ec != std::errc() || r.ptr != count.data() + count.size())
    throw state_dict_error(nn::detail::cat("optimizer state '", path, "': metadata '",
                                           io::detail::optimizer_states_key, "' is '", count, "', not a count"));
  if (states != 0) {
    // Fresh states for every parameter (made by the first pass); their
    // entries are the keys the file must hold.
    auto entry_of = [&](std::size_t i, const std::string& name, const auto& p, auto&& k) {
      k(loaded.states().get(i, name, p));
    };
    std::map<std::string, std::string> keys;
    io::detail::for_each_optimizer_entry(loaded, m, entry_of, [&](const std::string& key, const auto&, const auto&) {
      keys.emplace(key, nn::detail::cat("'", key, "'"));
    });
    std::set<std::string> file_keys;
    for (const auto& [k, t] : c.tensors) file_keys.insert(k);
    io::detail::check_keys(path, keys, file_keys, strict);  // names what differs, where keys can
    if (const std::size_t trainable = io::detail::trainable_count(m); states != trainable)
      throw state_dict_error(nn::detail::cat("optimizer state '", path, "' holds the state of ", std::to_string(states),
                                             " parameters but the module has ", std::to_string(trainable),
                                             " (frozen ones not counted)"));
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
    // What the values say (a step count in range), checked before `opt`
    // changes, as the extents were.
    std::size_t i = 0;
    nn::for_each_parameter(m, [&](const std::string& name, const auto& p) {
      const std::size_t index = i++;
      if constexpr (!is_frozen_parameter_v<decltype(p)>)
        if (p.requires_grad)
          Opt::check_state(name, p, loaded.states().at(index, name, p), loaded.group_options(loaded.group_of(name, p)));
    });
  } else if (!c.tensors.empty()) {
    throw state_dict_error(nn::detail::cat("optimizer state '", path, "' was saved before the first step but holds '",
                                           c.tensors.begin()->first, "'"));
  }
  // Last, once the keys and the count have said whether it is the same
  // module: each group must hold the parameters it held when saved.
  if (has_groups) {
    const auto lists = io::detail::group_params(loaded, m);
    for (std::size_t g = 0; g < groups; ++g)
      if (meta(io::detail::group_key(g, "params")) != lists[g])
        throw state_dict_error(nn::detail::cat("optimizer state '", path, "': group ", std::to_string(g),
                                               " holds the parameters '", meta(io::detail::group_key(g, "params")),
                                               "' in the checkpoint but '", lists[g],
                                               "' in the optimizer; give the groups the same selectors"));
  }
  opt = std::move(loaded);
}

}  // namespace dimsum
