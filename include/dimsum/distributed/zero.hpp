#pragma once
/// \file
/// AdamW with its moments split over the data-parallel axis (ZeRO stage 1):
/// `dist::sharded_adamw<data> opt(options); ... opt.step(mesh, model);`
/// replaces `average_gradients<data>(mesh, model); adamw.step(model);`.
/// Each rank of the axis keeps the moments of 1/p of the parameters (their
/// elements in `for_each_parameter` order, cut in p equal blocks), so
/// AdamW's state per rank shrinks p times; the communication is a
/// reduce-scatter of the gradients and an all-gather of the updated
/// parameters, the bytes of the one all-reduce it replaces.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <boost/hana.hpp>

#include <dimsum/distributed/checkpoint.hpp>
#include <dimsum/distributed/mesh.hpp>
#include <dimsum/distributed/sharded.hpp>
#include <dimsum/grad/parameter.hpp>
#include <dimsum/nn/module.hpp>
#include <dimsum/optim/adamw.hpp>

namespace dimsum::dist {

namespace detail {
DIMSUM_DIM(zero_block);

/// This rank's block of the flattened parameters of one value type, as a
/// module of one parameter, so that optim::adamw runs its own update on it.
template <class T>
struct flat_block {
  BOOST_HANA_DEFINE_STRUCT(flat_block, (dimsum::parameter<T, zero_block>, block));
};

/// Flattened parameters and gradients of one value type, and this rank's
/// block of them with its AdamW.
template <class T>
struct zero_part {
  std::vector<T> values, grads;
  /// The flattened ranges [first, second) of the parameters frozen at run
  /// time (`requires_grad == false`) in this step: not updated.
  std::vector<std::pair<std::size_t, std::size_t>> frozen;
  flat_block<T> mine;
  optim::adamw opt;
  explicit zero_part(const optim::adamw_options& o) : opt(o) {}
};

/// The element range [lo, hi) of the flattened parameters of one value
/// type (n elements) that the rank at `coords` keeps when axis `a` has p
/// ranks: blocks of ceil(n / p) (the last one shorter or empty).
inline std::pair<std::size_t, std::size_t> zero_range(std::size_t n, std::size_t a, const std::vector<int>& sizes,
                                                      const std::vector<int>& coords) {
  const auto p = static_cast<std::size_t>(sizes[a]);
  const std::size_t chunk = (n + p - 1) / p, lo = std::min(n, chunk * static_cast<std::size_t>(coords[a]));
  return {lo, std::min(n, lo + chunk)};
}
}  // namespace detail

namespace detail {
/// What save_optimizer_state and load_optimizer_state reach of sharded_adamw.
struct zero_checkpoint;

/// nn::for_each_parameter without the parameters frozen by their type
/// (`frozen_parameter`): they have no gradient and no optimizer state, so
/// they are not part of the flattened parameters.
template <class M, class F>
void for_each_trained_parameter(M&& module, F&& f) {
  nn::for_each_parameter(std::forward<M>(module), [&](const std::string& name, auto& p) {
    if constexpr (!is_frozen_parameter_v<decltype(p)>) f(name, p);
  });
}
}  // namespace detail

namespace detail {
/// Checks, collectively over mesh m, that the ranks along every mesh axis
/// other than A hold the same parameter values (a 64-bit hash of them: two
/// all-reduces per such axis of size > 1, and one over the mesh): one
/// checkpoint of sharded_adamw<A> over m holds one copy of each block of
/// A, which the ranks at coordinate 0 of the other axes write. Ranks that
/// hold different values there (tensor-parallel blocks split over another
/// axis) throw `dist_error` on every rank, naming the axis and what to do.
template <axis A, axis... Axes, class M>
void check_copies_along_other_axes(const mesh<Axes...>& m, const std::string& what, const M& module) {
  const auto& c = *m.comms();
  std::uint64_t h = 14695981039346656037ull;  // FNV-1a of every parameter's value bytes
  for_each_trained_parameter(module, [&](const std::string&, const auto& p) {
    const auto* b = reinterpret_cast<const unsigned char*>(p.value.data());
    for (std::size_t i = 0, n = p.value.size() * sizeof(*p.value.data()); i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  });
  const auto start = clock::now();
  int differs = -1;  // the index of the first axis whose ranks hold different values
  for (std::size_t k = 0; k < c.names.size(); ++k) {
    if (c.names[k] == A::name.view() || c.sizes[k] == 1) continue;
    std::array<std::uint64_t, 2> mine{h, ~h}, most{};
    MPI_Request req = MPI_REQUEST_NULL;
    check_mpi(MPI_Iallreduce(mine.data(), most.data(), 2, MPI_UINT64_T, MPI_MAX, c.axis_comms[k], &req),
              "MPI_Iallreduce (parameter values hash)");
    finish(req, c.axis_comms[k], what, start);
    if (most[0] != ~most[1] && differs < 0) differs = static_cast<int>(k);
  }
  if (c.names.size() == 1) return;
  int first = differs < 0 ? std::numeric_limits<int>::max() : differs, any = 0;
  MPI_Request req = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallreduce(&first, &any, 1, MPI_INT, MPI_MIN, m.comm(), &req), "MPI_Iallreduce (parameter values hash)");
  finish(req, m.comm(), what, start);
  if (any == std::numeric_limits<int>::max()) return;
  const std::string axis(c.names[static_cast<std::size_t>(any)]), a(A::name.view());
  throw dist_error(what + ": the ranks along mesh axis '" + axis +
                   "' hold different parameter values (blocks split over that axis), so their optimizer states "
                   "differ and one checkpoint over this mesh would keep only one of them; save and load the state "
                   "of each coordinate of '" + axis + "' in a directory of its own, through a mesh of axis '" + a +
                   "' alone (dist::mesh<" + a + ">(m.comm<" + a + ">(), " + a + "{m.axis_size<" + a + ">()}))");
}
}  // namespace detail

/// AdamW with its state split over mesh axis A (ZeRO-1). `step(m, module)`
/// is collective over A and does what `average_gradients<A>(m, module)`
/// followed by `optim::adamw::step(module)` does (every parameter ends
/// equal on every rank), up to the order in which MPI sums the
/// gradients: a reduce-scatter of the gradients (each rank receives the
/// sum of its block, divided by A's size), AdamW's update of that block
/// with the moments this rank keeps, and an all-gather of the updated
/// blocks into every rank's parameters. float and double parameters are
/// handled separately. The module must keep its parameters and extents
/// between steps (`shape_error` naming the element count otherwise).
///
/// A parameter frozen at run time (`requires_grad == false`, the same on
/// every rank) is skipped as `optim::adamw` skips it: its value and its
/// moments stay as they are (zeros if it was never trained, saved so in a
/// checkpoint: PyTorch creates no state for it), and its gradient is not
/// read. It keeps its place in the flattened parameters, so freezing and
/// unfreezing change neither the layout nor the checkpoint's names; the
/// step count is the one of its value type's block, so a parameter trained
/// only from a later step on has its bias correction from that shared
/// count (PyTorch starts its own at 1). A type-frozen `frozen_parameter`
/// has no place and no state at all.
template <axis A>
class sharded_adamw {
 public:
  explicit sharded_adamw(optim::adamw_options o = {}) : f_(o), d_(o) {}

  /// Hyper-parameters (as optim::adamw's; `lr` may change between steps).
  void set_lr(double lr) {
    f_.opt.options.lr = lr;
    d_.opt.options.lr = lr;
  }

  /// The number of moment elements (exp_avg and exp_avg_sq) this rank keeps:
  /// 2 x ceil(parameters / p) per value type after the first step.
  std::size_t state_elements() const { return 2 * (f_.mine.block.value.size() + d_.mine.block.value.size()); }

  template <axis... Axes, class M>
  void step(const mesh<Axes...>& m, M& module) {
    f_.values.clear(), f_.grads.clear(), d_.values.clear(), d_.grads.clear();
    f_.frozen.clear(), d_.frozen.clear();
    detail::for_each_trained_parameter(module, [&](const std::string&, auto& p) {
      auto& part = this->part_of(p);
      using T = typename std::remove_cvref_t<decltype(p.value)>::value_type;
      const std::size_t at = part.values.size();
      part.values.insert(part.values.end(), p.value.data(), p.value.data() + p.value.size());
      if (p.requires_grad) {
        part.grads.insert(part.grads.end(), p.grad.data(), p.grad.data() + p.grad.size());
      } else {  // frozen at run time: its gradient (stale, or none) is not read
        part.grads.insert(part.grads.end(), p.value.size(), T(0));
        part.frozen.emplace_back(at, at + p.value.size());
      }
    });
    MPI_Comm comm = m.template comm<A>();
    const std::string what = "sharded_adamw step over mesh axis '" + std::string(A::name.view()) + "'";
    const auto start = detail::clock::now();
    const std::array<std::uint64_t, 2> counts{f_.values.size(), d_.values.size()};
    const std::array<std::string_view, 2> names{"float parameter elements", "double parameter elements"};
    detail::arrive(comm, m.comm(), what, detail::code_sharded_adamw, counts, names, start);
    run(f_, MPI_FLOAT, m.template axis_size<A>(), m.template coord<A>(), comm, what, start);
    run(d_, MPI_DOUBLE, m.template axis_size<A>(), m.template coord<A>(), comm, what, start);
    std::size_t fi = 0, di = 0;
    detail::for_each_trained_parameter(module, [&](const std::string&, auto& p) {
      using T = typename std::remove_cvref_t<decltype(p.value)>::value_type;
      const std::vector<T>& src = this->part_of(p).values;
      std::size_t& i = std::is_same_v<T, float> ? fi : di;
      std::copy(src.begin() + static_cast<std::ptrdiff_t>(i), src.begin() + static_cast<std::ptrdiff_t>(i + p.value.size()),
                p.value.data());
      i += p.value.size();
    });
  }

 private:
  friend struct detail::zero_checkpoint;

  /// The checkpoint's names of AdamW's options ("adamw.lr", ...).
  static std::string option_key(const char* name) { return std::string("adamw.") + name; }
  /// The state entries saved per parameter, with PyTorch's keys.
  static std::vector<std::string> moment_keys(const optim::adamw_options& o) {
    std::vector<std::string> k{"exp_avg", "exp_avg_sq"};
    if (o.amsgrad) k.push_back("max_exp_avg_sq");
    return k;
  }

  /// Calls f(name, p, T-tag, offset, n) for every parameter of `module`:
  /// its offset in the flattened parameters of its value type and that
  /// type's element count n.
  template <class M, class F>
  static void for_each_flat(const M& module, F&& f) {
    std::size_t nf = 0, nd = 0;
    detail::for_each_trained_parameter(module, [&](const std::string&, const auto& p) {
      using T = typename std::remove_cvref_t<decltype(p.value)>::value_type;
      (std::is_same_v<T, float> ? nf : nd) += p.value.size();
    });
    std::size_t of = 0, od = 0;
    detail::for_each_trained_parameter(module, [&](const std::string& name, const auto& p) {
      using T = typename std::remove_cvref_t<decltype(p.value)>::value_type;
      std::size_t& o = std::is_same_v<T, float> ? of : od;
      f(name, p, o, std::is_same_v<T, float> ? nf : nd);
      o += p.value.size();
    });
  }

  template <axis... Axes, class M>
  void save_to(const mesh<Axes...>& m, const std::string& dir, const M& module) const {
    detail::check_same_parameters(m.comm(), "saving checkpoint '" + dir + "'", module);
    detail::check_copies_along_other_axes<A>(m, "saving checkpoint '" + dir + "'", module);
    const auto& c = *m.comms();
    const std::size_t a = c.axis_index(A::name.view());
    detail::save_items(m, dir, [&](std::vector<detail::save_item>& items) {
      const optim::adamw_options& o = f_.opt.options;
      const auto scalar = [&](std::string name, auto v) {
        using V = decltype(v);
        detail::save_item it;
        it.name = std::move(name);
        it.dtype = it.local.dtype = std::string(safetensors_dtype_v<V>);
        it.local.data.resize(sizeof(V));
        io::detail::copy_le_bytes(reinterpret_cast<const std::byte*>(&v), reinterpret_cast<V*>(it.local.data.data()), 1);
        items.push_back(std::move(it));
      };
      optim::adamw::for_each_option(o, [&](const char* name, auto v) { scalar(option_key(name), double(v)); });
      for_each_flat(module, [&](const std::string& name, const auto& p, std::size_t off, std::size_t n) {
        using P = std::remove_cvref_t<decltype(p)>;
        using T = typename P::value_type;
        const auto& part = this->part_of_const<T>();
        const auto& block = part.mine.block;
        const auto p_count = static_cast<std::size_t>(c.sizes[a]);
        if (block.value.size() != 0 && block.value.size() != (n + p_count - 1) / p_count)
          throw shape_error("optimizer state: the module has " + std::to_string(n) +
                            " parameter elements of its type, not the count of sharded_adamw's steps");
        const auto* state = part.opt.states().has(0) ? &part.opt.template state<flat_param<T>>("block") : nullptr;
        scalar(name + ".step", std::int64_t(state ? state->step : 0));
        const std::size_t lo = detail::zero_range(n, a, c.sizes, c.coords).first;
        // written by the ranks at coordinate 0 of every other axis (the others hold copies)
        const auto block_of = [&c, a, n, off, size = p.value.size()](int r) -> std::optional<detail::box> {
          const auto coords = detail::coords_of(c, r);
          for (std::size_t k = 0; k < coords.size(); ++k)
            if (k != a && coords[k] != 0) return std::nullopt;
          const auto [l, h] = detail::zero_range(n, a, c.sizes, coords);
          const std::size_t x = std::max(l, off), y = std::min(h, off + size);
          if (x >= y) return std::nullopt;
          return detail::box{{x - off}, {y - x}};
        };
        const auto ext = p.value.extents();
        for (const std::string& key : moment_keys(o)) {
          detail::save_item it;
          it.name = name + "." + key;
          it.dtype = it.local.dtype = std::string(safetensors_dtype_v<T>);
          it.dims = {std::string(detail::zero_block::name.view())};
          it.global = {p.value.size()};
          it.axes = {-1};
          it.block_of = block_of;
          it.extra["flattened"] = {{"dims", detail::dim_names<typename P::dims>()},
                                   {"shape", std::vector<std::size_t>(ext.begin(), ext.end())}};
          if (const auto b = block_of(m.rank())) {
            it.local.shape = b->shape;
            it.local.data.resize(b->shape[0] * sizeof(T));  // zeros: no state yet stands for zeros
            const auto* buf = !state ? nullptr
                              : key == "exp_avg" ? &state->exp_avg
                              : key == "exp_avg_sq" ? &state->exp_avg_sq
                                                    : &state->max_exp_avg_sq;
            if (buf && buf->size() != 0)
              io::detail::copy_le_bytes(reinterpret_cast<const std::byte*>(buf->data() + (off + b->offset[0] - lo)),
                                        reinterpret_cast<T*>(it.local.data.data()), b->shape[0]);
          }
          items.push_back(std::move(it));
        }
      });
    });
  }

  template <axis... Axes, class M>
  void load_from(const mesh<Axes...>& m, const std::string& dir, const M& module) {
    const std::string what = "loading optimizer state from checkpoint '" + dir + "'";
    detail::check_same_parameters(m.comm(), what, module);
    detail::check_copies_along_other_axes<A>(m, what, module);
    const auto& c = *m.comms();
    const std::size_t a = c.axis_index(A::name.view());
    optim::adamw_options o = f_.opt.options;
    std::optional<detail::zero_part<float>> f;
    std::optional<detail::zero_part<double>> d;
    detail::on_every_rank(m.comm(), what, [&] {
      checkpoint_reader r(dir);
      // The names first: the options, and per parameter its step and moments.
      const std::string where = "checkpoint '" + dir + "'";
      std::set<std::string> have, want;
      for (const auto& n : r.names()) have.insert(n);
      optim::adamw::for_each_option(o, [&](const char* name, auto&) { want.insert(option_key(name)); });
      for (const auto& n : want)
        if (!have.count(n)) throw checkpoint_error(where + " holds no AdamW state (no '" + n + "')");
      optim::adamw::for_each_option(o, [&](const char* name, auto& v) {
        const double x = r.template full<tensor<double>>(option_key(name)).data()[0];
        if constexpr (std::is_same_v<std::remove_cvref_t<decltype(v)>, bool>)
          v = x != 0.0;
        else
          v = x;
      });
      optim::adamw::check_options(o);
      detail::for_each_trained_parameter(module, [&](const std::string& name, const auto&) {
        want.insert(name + ".step");
        for (const auto& k : moment_keys(o)) want.insert(name + "." + k);
      });
      detail::check_names(where + " does not fit the module's optimizer state:", want, have);
      f.emplace(o);
      d.emplace(o);
      std::map<std::string, std::int64_t> steps;  // per value type, the first parameter's
      for_each_flat(module, [&](const std::string& name, const auto& p, std::size_t off, std::size_t n) {
        using P = std::remove_cvref_t<decltype(p)>;
        using T = typename P::value_type;
        auto& part = [&]() -> detail::zero_part<T>& {
          if constexpr (std::is_same_v<T, float>) return *f;
          else return *d;
        }();
        const std::string type(safetensors_dtype_v<T>);
        const std::int64_t step = r.template full<tensor<std::int64_t>>(name + ".step").data()[0];
        if (step < 0 || step == std::numeric_limits<std::int64_t>::max())
          throw checkpoint_error(where + ": parameter '" + name + "' has step count " + std::to_string(step));
        if (!steps.count(type)) steps[type] = step;
        if (steps[type] != step)
          throw checkpoint_error(where + ": parameter '" + name + "' has step count " + std::to_string(step) + " but an " +
                                 "earlier " + type + " parameter " + std::to_string(steps[type]) +
                                 "; sharded_adamw keeps one step count per value type");
        const auto ext = p.value.extents();
        const std::vector<std::string> dims = detail::dim_names<typename P::dims>();
        const std::vector<std::size_t> shape(ext.begin(), ext.end());
        auto& block = part.mine.block;
        const auto [lo, hi] = detail::zero_range(n, a, c.sizes, c.coords);
        const auto p_count = static_cast<std::size_t>(c.sizes[a]);
        const std::size_t chunk = (n + p_count - 1) / p_count;
        if (block.value.size() != chunk) block = flat_param<T>(detail::zero_block{chunk});
        auto* state = step > 0 ? &part.opt.states().get(0, "block", block) : nullptr;
        if (state) state->step = step;
        for (const std::string& key : moment_keys(o)) {
          const std::string k = name + "." + key;
          const auto& e = r.entry_of(k);
          if (!e.contains("flattened") || !e["flattened"].is_object() || e["flattened"].value("dims", nlohmann::json()) != dims ||
              e["flattened"].value("shape", nlohmann::json()) != shape)
            throw shape_error(where + ": the optimizer state of parameter '" + name + "' is " +
                              (e.contains("flattened") ? "for (" + detail::join(e["flattened"].value("dims", std::vector<std::string>{}), ", ") +
                                                             ") with extents (" + detail::join_sizes(e["flattened"].value("shape", std::vector<std::size_t>{})) + ")"
                                                       : "not a flattened parameter's") +
                              " in the checkpoint but the parameter is (" + detail::join(dims, ", ") + ") with extents (" +
                              detail::join_sizes(shape) + ")");
          const std::size_t x = std::max(lo, off), y = std::min(hi, off + p.value.size());
          if (!state || x >= y) {  // nothing kept here; still check the tensor
            (void)detail::checked_global_shape<tensor<T, detail::zero_block>>(dir, k, e);
            continue;
          }
          auto& buf = key == "exp_avg" ? state->exp_avg : key == "exp_avg_sq" ? state->exp_avg_sq : state->max_exp_avg_sq;
          if (buf.size() != chunk) buf = tensor<T, detail::zero_block>(detail::zero_block{chunk});
          r.template read_range<T, detail::zero_block>(k, x - off, y - x, buf.data() + (x - lo));
        }
      });
    });
    f_ = std::move(*f);
    d_ = std::move(*d);
  }

  template <class T>
  using flat_param = dimsum::parameter<T, detail::zero_block>;
  template <class T>
  const detail::zero_part<T>& part_of_const() const {
    if constexpr (std::is_same_v<T, float>)
      return f_;
    else
      return d_;
  }

  template <class P>
  auto& part_of(const P&) {
    using T = typename P::value_type;
    if constexpr (std::is_same_v<T, float>)
      return f_;
    else
      return d_;
  }

  template <class T>
  static void run(detail::zero_part<T>& part, MPI_Datatype type, int ranks, int coord, MPI_Comm comm,
                  const std::string& what, detail::clock::time_point start) {
    const std::size_t n = part.values.size();
    if (n == 0) return;
    const auto p = static_cast<std::size_t>(ranks);
    const std::size_t chunk = (n + p - 1) / p;
    part.grads.resize(chunk * p, T(0));  // padding: zeros past the last element
    part.values.resize(chunk * p, T(0));
    auto& mine = part.mine.block;
    if (mine.value.size() != chunk) {
      if (mine.value.size() != 0)
        throw shape_error(what + ": the module has " + std::to_string(n) +
                          " parameter elements of this type, not the count of the first step");
      mine = dimsum::parameter<T, detail::zero_block>(detail::zero_block{chunk});
    }
    MPI_Request req = MPI_REQUEST_NULL;
    detail::check_mpi(MPI_Ireduce_scatter_block(part.grads.data(), mine.grad.data(), detail::checked_count(chunk), type,
                                                MPI_SUM, comm, &req),
                      "MPI_Ireduce_scatter_block (gradients)");
    detail::finish(req, comm, what, start);
    detail::count_traffic(detail::collective::reduce_scatter, chunk * p * sizeof(T), p);
    // the mean over the axis, as average_gradients computes it
    for (std::size_t k = 0; k < chunk; ++k) mine.grad.data()[k] = static_cast<T>(mine.grad.data()[k] / double(p));
    const std::size_t lo = chunk * static_cast<std::size_t>(coord);
    std::copy(part.values.begin() + static_cast<std::ptrdiff_t>(lo),
              part.values.begin() + static_cast<std::ptrdiff_t>(lo + chunk), mine.value.data());
    step_skipping_frozen(part, lo, chunk);
    detail::check_mpi(MPI_Iallgather(mine.value.data(), detail::checked_count(chunk), type, part.values.data(),
                                     detail::checked_count(chunk), type, comm, &req),
                      "MPI_Iallgather (parameters)");
    detail::finish(req, comm, what, start);
    detail::count_traffic(detail::collective::all_gather, chunk * sizeof(T), p);
  }

  // AdamW's step of this rank's block [lo, lo + chunk), the elements of
  // parameters frozen at run time left as they were: their values (weight
  // decay would move them) and moments (which decay even with a zero
  // gradient). A block without state yet gets zero moments there: the
  // gradients there are zeros.
  template <class T>
  static void step_skipping_frozen(detail::zero_part<T>& part, std::size_t lo, std::size_t chunk) {
    std::vector<std::pair<std::size_t, std::size_t>> kept;  // block-relative ranges
    for (const auto& [a, b] : part.frozen) {
      const std::size_t x = std::max(a, lo), y = std::min(b, lo + chunk);
      if (x < y) kept.emplace_back(x - lo, y - lo);
    }
    if (kept.empty()) {
      part.opt.step(part.mine);
      return;
    }
    auto& mine = part.mine.block;
    const bool had_state = part.opt.states().has(0);
    using buffer = tensor<T, detail::zero_block>;
    const auto buffers = [&](auto& s) { return std::array<buffer*, 3>{&s.exp_avg, &s.exp_avg_sq, &s.max_exp_avg_sq}; };
    std::vector<T> saved;
    auto copy_out = [&](const T* src) {
      for (const auto& [x, y] : kept) saved.insert(saved.end(), src + x, src + y);
    };
    copy_out(mine.value.data());
    std::array<bool, 3> copied{};
    if (had_state) {
      const auto bs = buffers(part.opt.states().get(0, "block", mine));
      for (std::size_t i = 0; i < bs.size(); ++i)
        if ((copied[i] = bs[i]->size() == chunk)) copy_out(bs[i]->data());
    }
    part.opt.step(part.mine);
    std::size_t k = 0;
    auto copy_in = [&](T* dst) {
      for (const auto& [x, y] : kept) {
        std::copy(saved.begin() + static_cast<std::ptrdiff_t>(k), saved.begin() + static_cast<std::ptrdiff_t>(k + y - x),
                  dst + x);
        k += y - x;
      }
    };
    copy_in(mine.value.data());
    const auto bs = buffers(part.opt.states().get(0, "block", mine));
    for (std::size_t i = 0; i < bs.size(); ++i) {
      if (copied[i])
        copy_in(bs[i]->data());
      else if (bs[i]->size() == chunk)  // made by this step: zero there
        for (const auto& [x, y] : kept) std::fill(bs[i]->data() + x, bs[i]->data() + y, T(0));
    }
  }

  detail::zero_part<float> f_;
  detail::zero_part<double> d_;
};

namespace detail {
struct zero_checkpoint {
  template <axis A, axis... Axes, class M>
  static void save(const sharded_adamw<A>& opt, const mesh<Axes...>& m, const std::string& dir, const M& module) {
    opt.save_to(m, dir, module);
  }
  template <axis A, axis... Axes, class M>
  static void load(sharded_adamw<A>& opt, const mesh<Axes...>& m, const std::string& dir, const M& module) {
    opt.load_from(m, dir, module);
  }
};
}  // namespace detail

/// Saves the optimizer state of `opt` for `module` (the module every rank
/// of m holds, as in data parallelism) as a sharded checkpoint in `dir`,
/// collectively over mesh m: AdamW's options ("adamw.lr", ...), and per
/// parameter, with PyTorch's state keys, its step count ("<name>.step")
/// and its moments ("<name>.exp_avg", "<name>.exp_avg_sq", and with
/// amsgrad "<name>.max_exp_avg_sq"), each moment the parameter's elements
/// in C order (dim `zero_block`; the index records the parameter's dims
/// and extents as "flattened"), written by the ranks of axis A that keep
/// them. The module must be the same on every rank (a `shape_error` on
/// every rank naming the first parameter that differs and the ranks), and
/// on a mesh with other axes than A hold the same values along each of
/// them (a `dist_error` on every rank naming the axis otherwise: with
/// tensor-parallel blocks split over `model`, save each `model`
/// coordinate's state through a `mesh<A>` of its A ranks, in a directory
/// of its own);
/// the save is atomic as `save_checkpoint`'s: a failed one throws on every
/// rank and leaves the previous checkpoint in `dir` as it was.
///
///     dist::save_module(m, "ckpt/model", model);
///     dist::save_optimizer_state(m, "ckpt/optim", model, opt);
template <axis A, axis... Axes, class M>
void save_optimizer_state(const mesh<Axes...>& m, const std::string& dir, const M& module, const sharded_adamw<A>& opt) {
  detail::zero_checkpoint::save(opt, m, dir, module);
}

/// Loads the state `save_optimizer_state` saved into `opt`, collectively
/// over mesh m, on any number of ranks: each rank reads the elements its
/// block of axis A keeps now, whichever ranks wrote them (a checkpoint
/// saved on 4 ranks loads on 2 or 1, and the other way), as PyTorch's
/// distributed checkpoint reshards. Restores the options (as
/// `load_state_dict` restores `param_groups`) and every moment and step
/// count. Checks first, on every rank, that the module is the same on
/// every rank (`shape_error` naming the parameter and the ranks) and, on a
/// mesh with other axes than A, the same along each of them (`dist_error`
/// naming the axis, as in `save_optimizer_state`), that the
/// checkpoint's names are exactly the module's state entries
/// (`checkpoint_error` naming the missing and unexpected ones), and each
/// parameter's dims and extents (`shape_error` naming the parameter);
/// damaged or missing rank files are a `checkpoint_error`. Any error is
/// thrown on every rank, and leaves `opt` as it was.
///
///     dist::load_module(m, "ckpt/model", model);
///     dist::load_optimizer_state(m, "ckpt/optim", model, opt);
template <axis A, axis... Axes, class M>
void load_optimizer_state(const mesh<Axes...>& m, const std::string& dir, const M& module, sharded_adamw<A>& opt) {
  detail::zero_checkpoint::load(opt, m, dir, module);
}

}  // namespace dimsum::dist
