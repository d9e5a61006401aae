#pragma once
/// \file
/// Parameters found by reflection. A module is a struct whose members are
/// declared with `BOOST_HANA_DEFINE_STRUCT` (or adapted afterwards with
/// `BOOST_HANA_ADAPT_STRUCT`); Hana gives each member with its name, so
/// `for_each_parameter(m, f)` visits every `parameter<T, Ds...>` (and
/// `frozen_parameter<T, Ds...>`) member with
/// its dotted name ("blocks.0.attn.W_Q"): nested modules recursively,
/// `std::array` and `std::vector` of modules or parameters as "name.i",
/// `std::optional` of either under its own name when it holds a value.
/// Members of any other type (sizes, flags, plain tensors used as buffers)
/// are not parameters and are skipped, as PyTorch skips plain attributes.
/// `zero_grad`, `parameter_count`, `summary`, the optimizers and the state
/// dicts are all built on this one visitor. See tests/unit/optim_module.cpp.

#include <algorithm>
#include <array>
#include <cstddef>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <boost/hana/accessors.hpp>
#include <boost/hana/adapt_struct.hpp>
#include <boost/hana/define_struct.hpp>
#include <boost/hana/first.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/second.hpp>
#include <boost/hana/string.hpp>
#include <boost/hana/concept/struct.hpp>

#include <dimsum/core/diagnostics.hpp>
#include <dimsum/grad/parameter.hpp>

namespace dimsum::nn {

/// A type whose members Hana can enumerate with their names: declared with
/// `BOOST_HANA_DEFINE_STRUCT` or adapted with `BOOST_HANA_ADAPT_STRUCT`.
template <class M>
concept module = boost::hana::Struct<std::remove_cvref_t<M>>::value;

/// Compile-time error: `M` was passed where a module is needed, but Hana
/// cannot enumerate its members.
template <class M>
struct module_is_not_a_reflected_struct {
  static_assert(dimsum::detail::always_false<M>,
                "dimsum: a module must declare its members with BOOST_HANA_DEFINE_STRUCT or adapt them with "
                "BOOST_HANA_ADAPT_STRUCT");
};

template <class M>
class frozen_module;

namespace detail {
template <class X>
inline constexpr bool is_frozen_module_v = false;
template <class M>
inline constexpr bool is_frozen_module_v<frozen_module<M>> = true;

// Concatenates strings by appending: g++ 12 raises a false -Wrestrict (GCC
// PR 105329) on `"literal" + std::string&&` at -O2, and messages are built
// from many pieces anyway.
template <class... S>
std::string cat(const S&... s) {
  std::string r;
  (r.append(std::string_view(s)), ...);
  return r;
}

// "3, 4" for extents {3, 4}.
template <std::size_t N>
std::string extents_string(const std::array<std::size_t, N>& e) {
  std::string r;
  for (std::size_t i = 0; i < N; ++i) {
    if (i) r += ", ";
    r += std::to_string(e[i]);
  }
  return r;
}

template <class X>
struct sequence_traits {
  static constexpr bool value = false;
};
template <class X, std::size_t N>
struct sequence_traits<std::array<X, N>> {
  static constexpr bool value = true;
  using element = X;
};
template <class X, class A>
struct sequence_traits<std::vector<X, A>> {
  static constexpr bool value = true;
  using element = X;
};

template <class X>
struct optional_traits {
  static constexpr bool value = false;
};
template <class X>
struct optional_traits<std::optional<X>> {
  static constexpr bool value = true;
  using element = X;
};

template <class X>
constexpr bool holds_parameters() {
  using D = std::remove_cvref_t<X>;
  if constexpr (is_parameter_v<D> || module<D> || is_frozen_module_v<D>)
    return true;
  else if constexpr (optional_traits<D>::value)
    return holds_parameters<typename optional_traits<D>::element>();
  else if constexpr (sequence_traits<D>::value)
    return holds_parameters<typename sequence_traits<D>::element>();
  else
    return false;
}

// Visits one member `x` named `name`: a parameter, a module, a sequence of
// either, or an optional one (visited when engaged: a bias-less layer has
// no bias key, as in PyTorch); anything else holds no parameters.
template <class X, class F>
void visit_member(X&& x, const std::string& name, F& f) {
  using D = std::remove_cvref_t<X>;
  if constexpr (is_parameter_v<D>) {
    f(name, x);
  } else if constexpr (is_frozen_module_v<D>) {
    // The wrapped module's parameters under the wrapper's own name; frozen
    // again after `f`, which may have set a flag (set_requires_grad(m, true)).
    visit_member(x.module_, name, f);
    if constexpr (!std::is_const_v<std::remove_reference_t<X>>) x.freeze();
  } else if constexpr (module<D>) {
    boost::hana::for_each(boost::hana::accessors<D>(), [&](auto pair) {
      constexpr auto member_name = boost::hana::first(pair);
      std::string full = name;
      if (!full.empty()) full += '.';
      full += boost::hana::to<const char*>(member_name);
      visit_member(boost::hana::second(pair)(x), full, f);
    });
  } else if constexpr (optional_traits<D>::value && holds_parameters<D>()) {
    if (x) visit_member(*x, name, f);
  } else if constexpr (sequence_traits<D>::value && holds_parameters<D>()) {
    std::size_t i = 0;
    for (auto&& element : x) visit_member(element, cat(name, ".", std::to_string(i++)), f);
  }
}

template <class L, std::size_t... I>
std::string dim_names(std::index_sequence<I...>, [[maybe_unused]] std::string_view sep) {
  std::string s;
  ((s += (I ? sep : std::string_view()), s += L::names[I]), ...);
  return s;
}

}  // namespace detail

/// Calls `f(name, p)` for every parameter `p` of module `m`, in declaration
/// order, with its dotted name (`std::string`): a member `W_Q` of the second
/// element of a `std::array` member `blocks` is "blocks.1.W_Q". `p` is
/// const when `m` is. Example:
///
///     for_each_parameter(model, [](const std::string& name, auto& p) { p.value.fill(0); });
template <class M, class F>
void for_each_parameter(M&& m, F&& f) {
  if constexpr (!module<M>)
    dimsum::detail::report<module_is_not_a_reflected_struct<std::remove_cvref_t<M>>>();
  else
    detail::visit_member(m, std::string(), f);
}

/// Sets every parameter's gradient to zeros (`optimizer.zero_grad()` /
/// `module.zero_grad(set_to_none=False)` in PyTorch).
template <class M>
void zero_grad(M& m) {
  for_each_parameter(m, [](const std::string&, auto& p) { p.zero_grad(); });
}

/// Freezes (`false`) or unfreezes (`true`) every parameter of `m`, as
/// PyTorch's `m.requires_grad_(flag)`: a frozen parameter is a constant on
/// the tape, gets no gradient, and the optimizers skip it
/// (`parameter::requires_grad`).
template <class M>
void set_requires_grad(M& m, bool flag) {
  for_each_parameter(m, [flag](const std::string&, auto& p) {
    if constexpr (!is_frozen_parameter_v<decltype(p)>) p.requires_grad = flag;  // a frozen type stays frozen
  });
}

/// Compile-time error: `nn::frozen<X>` of an `X` that is neither a
/// `parameter<T, Dims...>` nor a module (a tensor, a number).
template <class X>
struct frozen_takes_a_parameter_or_a_module {
  static_assert(dimsum::detail::always_false<X>,
                "dimsum: nn::frozen<X> takes a parameter<T, Dims...> or a module (a BOOST_HANA_DEFINE_STRUCT struct)");
  using type = X;  // X itself, so that the static_assert is the one error
};

namespace detail {
template <class P>
struct frozen_of {
  using type = typename frozen_takes_a_parameter_or_a_module<P>::type;
};
template <class T, dimension... Ds>
struct frozen_of<parameter<T, Ds...>> {
  using type = frozen_parameter<T, Ds...>;
};
template <class T, dimension... Ds>
struct frozen_of<frozen_parameter<T, Ds...>> {
  using type = frozen_parameter<T, Ds...>;
};
template <module M>
struct frozen_of<M> {
  using type = frozen_module<M>;
};
template <class M>
struct frozen_of<frozen_module<M>> {
  using type = frozen_module<M>;
};
}  // namespace detail

/// A module `M` frozen by its type (a backbone or an embedding kept fixed
/// while the rest is fine-tuned: PyTorch's `m.requires_grad_(False)` said in
/// the declaration), spelled `nn::frozen<M>`. Reflection finds `M`'s
/// parameters under the member's own name (`embed.weight` for a member
/// `embed`, as without the wrapper), so checkpoints save and load them, but
/// every one of them is frozen (`requires_grad` false, and set false again
/// whenever `for_each_parameter` or `set_requires_grad` visits it): `m(...)`
/// calls `M`'s forward, on a tape too, where its parameters are constants;
/// the optimizers and `clip_grad_norm` skip them; `gradient` of one throws
/// `grad::tape_error`. `m.module()` and `m->` read `M` (const).
template <class M>
class frozen_module {
 public:
  using module_type = M;
  frozen_module() { freeze(); }
  /// Wraps `m`, frozen.
  explicit frozen_module(M m) : module_(std::move(m)) { freeze(); }
  /// Constructs `M(args...)`, frozen: `nn::frozen<nn::embedding<float, vocab, emb>> e(vocab{7}, emb{4});`.
  template <class A, class... R>
    requires(!std::is_same_v<std::remove_cvref_t<A>, frozen_module> && !std::is_same_v<std::remove_cvref_t<A>, M> &&
             std::is_constructible_v<M, A, R...>)
  explicit frozen_module(A&& a, R&&... r) : module_(std::forward<A>(a), std::forward<R>(r)...) {
    freeze();
  }
  /// Replaces the module (weights loaded into a fresh `M`), frozen.
  frozen_module& operator=(M m) {
    module_ = std::move(m);
    freeze();
    return *this;
  }

  const M& module() const { return module_; }
  const M* operator->() const { return &module_; }

  /// `M`'s forward: `e(ids)`, `e(tape, ids)`, `block(x)` on a var; its
  /// parameters are read as constants on a tape.
  template <class... A>
    requires std::is_invocable_v<M&, A...>
  decltype(auto) operator()(A&&... a) {
    return module_(std::forward<A>(a)...);
  }
  template <class... A>
    requires std::is_invocable_v<const M&, A...>
  decltype(auto) operator()(A&&... a) const {
    return module_(std::forward<A>(a)...);
  }
  /// Calls `f(m)` with the module, mutable (`reset_parameters`, loading by
  /// hand); its parameters are frozen again afterwards.
  template <class F>
  void update(F&& f) {
    std::forward<F>(f)(module_);
    freeze();
  }

 private:
  template <class X, class F>
  friend void detail::visit_member(X&& x, const std::string& name, F& f);
  void freeze() {
    auto off = [](const std::string&, auto& p) {
      if constexpr (!is_frozen_parameter_v<decltype(p)>) p.requires_grad = false;
    };
    detail::visit_member(module_, std::string(), off);
  }
  M module_;
};

/// A member declared frozen in a model struct, saved and loaded under its
/// name, read as a constant on a tape, skipped by the optimizers:
/// `nn::frozen<parameter<T, Ds...>>` is `frozen_parameter<T, Ds...>`
/// (asking for its gradient is a compile error), `nn::frozen<M>` of a
/// module `M` is `frozen_module<M>` (its parameters keep their type and are
/// frozen at run time: `gradient` of one throws `grad::tape_error`).
template <class P>
using frozen = typename detail::frozen_of<P>::type;

/// The number of trainable elements of `m` (the sum of every parameter's
/// element count, `sum(p.numel() for p in m.parameters())`).
template <class M>
std::size_t parameter_count(const M& m) {
  std::size_t n = 0;
  for_each_parameter(m, [&](const std::string&, const auto& p) { n += p.value.size(); });
  return n;
}

/// The dims of parameter type `P` by name, space-separated ("d_model d_head").
template <class P>
  requires is_parameter_v<P>
std::string parameter_dim_names(std::string_view sep = " ") {
  using L = typename std::remove_cvref_t<P>::dims;
  return detail::dim_names<L>(std::make_index_sequence<L::size>{}, sep);
}

/// A table of `m`'s parameters, one line each: dotted name, dims by name,
/// extents and element count, then the total; for printing
/// (`std::cout << summary(model)`).
///
///     name          dims             extents       count
///     embed.weight  (vocab, d_model) (65, 32)      2080
///     ...
///     total                                        2208
template <class M>
std::string summary(const M& m) {
  struct row {
    std::string name, dims, extents, count;
  };
  std::vector<row> rows{{"name", "dims", "extents", "count"}};
  std::size_t total = 0;
  for_each_parameter(m, [&](const std::string& name, const auto& p) {
    rows.push_back({name, detail::cat("(", parameter_dim_names<std::remove_cvref_t<decltype(p)>>(", "), ")"),
                    detail::cat("(", detail::extents_string(p.value.extents()), ")"), std::to_string(p.value.size())});
    total += p.value.size();
  });
  rows.push_back({"total", "", "", std::to_string(total)});
  std::size_t w[3] = {0, 0, 0};
  for (const auto& r : rows) {
    w[0] = std::max(w[0], r.name.size());
    w[1] = std::max(w[1], r.dims.size());
    w[2] = std::max(w[2], r.extents.size());
  }
  std::ostringstream out;
  for (const auto& r : rows) {
    out << r.name << std::string(w[0] - r.name.size() + 2, ' ') << r.dims << std::string(w[1] - r.dims.size() + 2, ' ')
        << r.extents << std::string(w[2] - r.extents.size() + 2, ' ') << r.count << '\n';
  }
  return out.str();
}

}  // namespace dimsum::nn
