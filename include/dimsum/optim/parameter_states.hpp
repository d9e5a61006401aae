#pragma once
/// \file
/// `parameter_states<State>`: the per-parameter state an optimizer keeps
/// (momentum buffers, Adam moments), typed by each parameter's own type and
/// created on the first step, in the order `for_each_parameter` visits the
/// module. Also `optimizer_error`, thrown for invalid hyper-parameters and
/// for a module whose parameters changed between steps. See
/// tests/unit/optim_optimizers.cpp.

#include <cstddef>
#include <memory>
#include <span>
#include <string_view>
#include <string>
#include <utility>
#include <vector>

#include <dimsum/core/errors.hpp>
#include <dimsum/nn/module.hpp>
#include <dimsum/optim/param_groups.hpp>

namespace dimsum::optim {

/// An invalid optimizer or schedule setting (a negative learning rate,
/// nesterov without momentum, ...) or a module whose parameters (names or
/// types) differ from the ones the optimizer's state was created for.
struct optimizer_error : error {
  using error::error;
};

namespace detail {
// Throws shape_error unless `p.grad` has the extents of `p.value`: an
// optimizer step reads both element by element.
template <class P>
void check_grad_extents(const std::string& name, const P& p) {
  if (p.value.extents() == p.grad.extents()) return;
  throw shape_error(nn::detail::cat("parameter '", name, "' (", nn::parameter_dim_names<P>(", "),
                                    ") has value extents (", nn::detail::extents_string(p.value.extents()),
                                    ") but gradient extents (", nn::detail::extents_string(p.grad.extents()),
                                    "); call zero_grad() or run a backward pass first"));
}

// Throws shape_error unless the buffer `key` of parameter `name`'s
// optimizer state has the extents of `p.value`: an update reads both
// element by element (a parameter rebuilt with other dynamic extents after
// the first step would be read out of bounds; torch refuses it too).
template <class P, class B>
void check_state_extents(const std::string& name, const P& p, const char* key, const B& buffer) {
  if (buffer.extents() == p.value.extents()) return;
  throw shape_error(nn::detail::cat("parameter '", name, "' (", nn::parameter_dim_names<P>(", "),
                                    ") has value extents (", nn::detail::extents_string(p.value.extents()),
                                    ") but its optimizer state '", key, "' has extents (",
                                    nn::detail::extents_string(buffer.extents()),
                                    "); the parameter changed since the first step"));
}
}  // namespace detail

/// The optimizer state of every parameter of one module: one `State<P>` per
/// parameter of type `P`, kept in visiting order with the parameter's
/// dotted name. `get` creates a state on first use and afterwards checks
/// that the same parameter (name and type) sits at that position. A
/// position may hold no state (a frozen parameter, never stepped).
template <template <class> class State>
class parameter_states {
 public:
  /// The state of the `index`-th parameter `p` named `name`, made with
  /// `State<P>(p)` the first time.
  template <class P>
  State<P>& get(std::size_t index, const std::string& name, const P& p) {
    if (index >= slots_.size()) slots_.resize(index + 1);  // positions before it hold no state yet
    if (!slots_[index]) {
      auto s = std::make_unique<slot<State<P>>>(name, p);
      auto& state = s->state;
      slots_[index] = std::move(s);
      return state;
    }
    check(index, name, p);
    return static_cast<slot<State<P>>&>(*slots_[index]).state;
  }

  /// Checks, without changing anything, that the state at `index`, if
  /// there is one, was created for a parameter of this name and type;
  /// throws `optimizer_error` otherwise.
  template <class P>
  void check(std::size_t index, const std::string& name, const P&) const {
    if (index >= slots_.size() || !slots_[index]) return;  // a new state
    if (!dynamic_cast<const slot<State<P>>*>(slots_[index].get()) || slots_[index]->name != name)
      throw optimizer_error(nn::detail::cat("optimizer state: parameter ", std::to_string(index), " is '", name, "' (",
                                            nn::parameter_dim_names<P>(", "), ") but the state was created for '",
                                            slots_[index]->name,
                                            "'; the module's parameters changed since the first step"));
  }

  /// Checks that a step visited at least the parameters the state holds
  /// (a module with fewer parameters than at the first step is an error).
  void check_count(std::size_t visited) const {
    if (visited < slots_.size())
      throw optimizer_error(nn::detail::cat("optimizer state: the module has ", std::to_string(visited),
                                            " parameters but the state was created for ",
                                            std::to_string(slots_.size())));
  }

  /// The state of parameter `name` of type `P`, for inspection; throws
  /// `optimizer_error` if there is none (before the first step) or it has
  /// another type.
  template <class P>
  const State<P>& find(const std::string& name) const {
    for (const auto& s : slots_)
      if (s && s->name == name) {
        if (auto* typed = dynamic_cast<const slot<State<P>>*>(s.get())) return typed->state;
        throw optimizer_error(nn::detail::cat("optimizer state: parameter '", name, "' is not of the requested type"));
      }
    throw optimizer_error(nn::detail::cat("optimizer state: no state for parameter '", name, "'"));
  }

  /// The existing state at `index` (`index < size()`), after `check`'s
  /// test that it belongs to parameter `name` of type `P`; for reading
  /// every state in visiting order (io/optimizer_state.hpp saves them so).
  template <class P>
  const State<P>& at(std::size_t index, const std::string& name, const P& p) const {
    if (!has(index))
      throw optimizer_error(nn::detail::cat("optimizer state: no state for parameter ", std::to_string(index), " '",
                                            name, "'"));
    check(index, name, p);
    return static_cast<const slot<State<P>>&>(*slots_[index]).state;
  }

  /// How many positions there are (the last parameter with a state, plus
  /// one); 0 before the first step.
  std::size_t size() const { return slots_.size(); }
  /// Whether the parameter at `index` has a state.
  bool has(std::size_t index) const { return index < slots_.size() && slots_[index]; }

 private:
  struct slot_base {
    explicit slot_base(std::string n) : name(std::move(n)) {}
    virtual ~slot_base() = default;
    std::string name;
  };
  template <class S>
  struct slot : slot_base {
    template <class P>
    slot(const std::string& n, const P& p) : slot_base(n), state(p) {}
    S state;
  };
  std::vector<std::unique_ptr<slot_base>> slots_;
};

/// What every optimizer shares (CRTP): parameter groups and the step.
/// `Options` is the optimizer's options type; the optimizer's own
/// `options` member are group 0's, which takes every parameter that no
/// group added with `add_group` takes (optim/param_groups.hpp). `step(m)`
/// visits the parameters of module `m`, checks every group's options
/// (`Derived::check_options`), skips every frozen parameter
/// (`requires_grad == false` or a `frozen_parameter`: no update, no state
/// created), checks that
/// each parameter is taken by at most one
/// added group (`optimizer_error` naming it and both groups, as PyTorch
/// refuses a parameter in two groups), that each gradient has its value's
/// extents (a `shape_error` naming the parameter otherwise) and that the
/// module's parameters are the ones the state was made for, then calls
/// `Derived::update(p, state, options, lr)` with the parameter's
/// `State<P>`, its group's options and learning rate (the group's `lr`
/// times `lr_factor()`), after `Derived::check_state(name, p, state,
/// options)` (a `shape_error` for a state whose buffers no longer have the
/// parameter's extents); a step that throws changes no parameter and no
/// state. `state<P>(name)` returns a parameter's state for inspection;
/// `states()` all of them (what a checkpoint of the optimizer saves and
/// loads, io/optimizer_state.hpp).
template <class Derived, template <class> class State, class Options>
class optimizer_base {
 public:
  using options_type = Options;
  /// The state this optimizer keeps for a parameter of type `P`.
  template <class P>
  using state_type = State<P>;

  /// Adds a group taking the parameters `select` accepts, with options `o`
  /// (checked as the constructor checks them); returns it, so that its
  /// options can be changed between steps. PyTorch:
  /// `AdamW([{"params": decay}, {"params": no_decay, "weight_decay": 0}])`.
  param_group<Options>& add_group(selector select, Options o) {
    Derived::check_options(o);
    groups_.push_back(param_group<Options>{std::move(select), o});
    return groups_.back();
  }
  /// The same with group 0's options, to be changed through the result:
  /// `opt.add_group(optim::rank_is(1)).options.weight_decay = 0.0;`
  param_group<Options>& add_group(selector select) { return add_group(std::move(select), derived().options); }

  /// The number of groups: 1 (the optimizer's own options) plus the added ones.
  std::size_t group_count() const { return groups_.size() + 1; }
  /// The options of group `g`: `options` for 0, else the `g`-th added
  /// group's (`g < group_count()`, else `optimizer_error`).
  Options& group_options(std::size_t g) { return const_cast<Options&>(std::as_const(*this).group_options(g)); }
  const Options& group_options(std::size_t g) const {
    if (g == 0) return derived().options;
    if (g > groups_.size())
      throw optimizer_error(nn::detail::cat("optimizer: no group ", std::to_string(g), " (there are ",
                                            std::to_string(group_count()), ")"));
    return groups_[g - 1].options;
  }

  /// The group that takes parameter `p` named `name`: the added group
  /// whose selector accepts it, else 0; `optimizer_error` if two do.
  template <class P>
  std::size_t group_of(const std::string& name, const P&) const {
    const parameter_info info{name, std::span<const std::string_view>(P::dims::names)};
    std::size_t g = 0;
    for (std::size_t i = 0; i < groups_.size(); ++i)
      if (groups_[i].select(info)) {
        if (g != 0)
          throw optimizer_error(nn::detail::cat("optimizer: parameter '", name, "' is taken by group ",
                                                std::to_string(g), " and group ", std::to_string(i + 1),
                                                "; a parameter belongs to one group"));
        g = i + 1;
      }
    return g;
  }

  /// Scales every group's learning rate by `f` (at least 0) from the next
  /// step on, as PyTorch's `LambdaLR` scales each group's initial lr:
  /// `opt.set_lr_factor(schedule.factor(step))` (optim/lr_schedule.hpp).
  /// The groups' `options.lr` stay the base rates.
  void set_lr_factor(double f) {
    if (!(f >= 0.0)) throw optimizer_error(nn::detail::cat("optimizer: invalid lr factor ", std::to_string(f)));
    lr_factor_ = f;
  }
  /// The factor `set_lr_factor` set (1 by default).
  double lr_factor() const { return lr_factor_; }

  /// One update of every parameter of `m` from its `grad`.
  template <class M>
  void step(M& m) {
    // Every check before the first update: a step that throws leaves the
    // module and the state as they were.
    for (std::size_t g = 0; g < group_count(); ++g) Derived::check_options(group_options(g));
    std::size_t i = 0;
    group_index_.clear();
    nn::for_each_parameter(std::as_const(m), [&](const std::string& name, const auto& p) {
      const std::size_t g = group_of(name, p);
      group_index_.push_back(g);
      if constexpr (!is_frozen_parameter_v<decltype(p)>) {  // frozen by its type: never a state
        states_.check(i, name, p);
        if (p.requires_grad) {  // a frozen parameter is skipped, as PyTorch skips a parameter without grad
          detail::check_grad_extents(name, p);
          if (states_.has(i)) derived().check_state(name, p, states_.at(i, name, p), group_options(g));
        }
      }
      ++i;
    });
    states_.check_count(i);
    i = 0;
    nn::for_each_parameter(m, [&](const std::string& name, auto& p) {
      const Options& o = group_options(group_index_[i]);
      if constexpr (!is_frozen_parameter_v<decltype(p)>)
        if (p.requires_grad) derived().update(p, states_.get(i, name, p), o, o.lr * lr_factor_);
      ++i;
    });
  }

  /// The state of parameter `name` (of type `P`) after a step.
  template <class P>
  const State<P>& state(const std::string& name) const {
    return states_.template find<P>(name);
  }

  /// Every parameter's state, in visiting order (empty before the first
  /// step).
  const parameter_states<State>& states() const { return states_; }
  parameter_states<State>& states() { return states_; }

  /// The groups added with `add_group` (group 1 first).
  const std::vector<param_group<Options>>& added_groups() const { return groups_; }
  std::vector<param_group<Options>>& added_groups() { return groups_; }

 private:
  const Derived& derived() const { return static_cast<const Derived&>(*this); }
  Derived& derived() { return static_cast<Derived&>(*this); }

  parameter_states<State> states_;
  std::vector<param_group<Options>> groups_;
  std::vector<std::size_t> group_index_;  // the last step's group of each parameter
  double lr_factor_ = 1.0;
};

}  // namespace dimsum::optim
