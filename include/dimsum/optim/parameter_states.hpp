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
#include <string>
#include <utility>
#include <vector>

#include <dimsum/core/errors.hpp>
#include <dimsum/nn/module.hpp>

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
}  // namespace detail

/// The optimizer state of every parameter of one module: one `State<P>` per
/// parameter of type `P`, kept in visiting order with the parameter's
/// dotted name. `get` creates a state on first use and afterwards checks
/// that the same parameter (name and type) sits at that position.
template <template <class> class State>
class parameter_states {
 public:
  /// The state of the `index`-th parameter `p` named `name`, made with
  /// `State<P>(p)` the first time.
  template <class P>
  State<P>& get(std::size_t index, const std::string& name, const P& p) {
    if (index == slots_.size()) {
      auto s = std::make_unique<slot<State<P>>>(name, p);
      auto& state = s->state;
      slots_.push_back(std::move(s));
      return state;
    }
    if (index > slots_.size())
      throw optimizer_error(nn::detail::cat("optimizer state: parameter '", name, "' visited out of order"));
    check(index, name, p);
    return static_cast<slot<State<P>>&>(*slots_[index]).state;
  }

  /// Checks, without changing anything, that the state at `index`, if
  /// there is one, was created for a parameter of this name and type;
  /// throws `optimizer_error` otherwise.
  template <class P>
  void check(std::size_t index, const std::string& name, const P&) const {
    if (index >= slots_.size()) return;  // a new state
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
      if (s->name == name) {
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
    if (index >= slots_.size())
      throw optimizer_error(nn::detail::cat("optimizer state: no state for parameter ", std::to_string(index), " '",
                                            name, "'"));
    check(index, name, p);
    return static_cast<const slot<State<P>>&>(*slots_[index]).state;
  }

  /// How many parameters have a state.
  std::size_t size() const { return slots_.size(); }

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

/// What every optimizer shares (CRTP): `step(m)` visits the parameters of
/// module `m`, checks that each gradient has its value's extents (a
/// `shape_error` naming the parameter otherwise) and that the module's
/// parameters are the ones the state was made for, then calls
/// `Derived::update(p, state)` with the parameter's `State<P>`; a step that
/// throws changes no parameter and no state. `state<P>(name)` returns a
/// parameter's state for inspection; `states()` all of them (what a
/// checkpoint of the optimizer saves and loads, io/optimizer_state.hpp).
template <class Derived, template <class> class State>
class optimizer_base {
 public:
  /// One update of every parameter of `m` from its `grad`.
  template <class M>
  void step(M& m) {
    // Every check before the first update: a step that throws leaves the
    // module and the state as they were.
    std::size_t i = 0;
    nn::for_each_parameter(std::as_const(m), [&](const std::string& name, const auto& p) {
      detail::check_grad_extents(name, p);
      states_.check(i++, name, p);
    });
    states_.check_count(i);
    i = 0;
    nn::for_each_parameter(m, [&](const std::string& name, auto& p) {
      static_cast<const Derived&>(*this).update(p, states_.get(i++, name, p));
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

 private:
  parameter_states<State> states_;
};

}  // namespace dimsum::optim
