#pragma once
/// \file
/// Tensor-parallel training: sharded vars and the adjoints of the
/// collectives. `dist::sharded<grad::var<float, nheads, d_model, d_head>,
/// split<nheads, model>>` is a var each rank holds its heads of; the dist::
/// operations (einsum, + - * /, softmax, map, rename, ...) run on vars as
/// they run on tensors, each rank recording its block's operations on its
/// own tape, and the collectives record their adjoints:
///
///   - `all_reduce` (partial sum -> full value): backward is the identity
///     (each rank's part receives the full gradient);
///   - `replicate<A>(mesh, x)` (a full var entering a region split over A,
///     Megatron's f): forward the identity, backward an all_reduce over A
///     of the parts of x's gradient each rank computed;
///   - `reduce_scatter<D>` (partial -> D split): backward `all_gather<D>`;
///   - `all_gather<D>` (D split -> full): backward takes this rank's block
///     of the gradient (the adjoint of `shard`);
///   - `shard<Ps...>(mesh, v)` (full -> split): backward all_gathers the
///     blocks' gradients into v's full gradient;
///   - `sequence_gather<D>` (D split -> full, entering a region split over
///     the same axis: Megatron's sequence-parallel g): backward
///     `reduce_scatter<D>` of the ranks' parts of the gradient.
///
/// A var whose gradient would be left as a partial sum (a full var used
/// with values split over a mesh axis, without `replicate`) is the compile
/// error `gradient_would_be_a_partial_sum`, naming its dims and the axis.
/// See docs/distributed.md, "Tensor-parallel training".

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include <dimsum/distributed/mesh.hpp>
#include <dimsum/distributed/sharded.hpp>
#include <dimsum/grad/grad.hpp>

namespace dimsum::dist {

/// Checker: a var whose gradient this rank would compute only a part of.
template <class VarDims, class Axis>
struct gradient_would_be_a_partial_sum {
  static_assert(dimsum::detail::always_false<VarDims, Axis>,
                "dimsum: this var meets values split (or partial) over a mesh axis it is not placed on, so each rank "
                "would compute only a part of its gradient (a partial sum over the axis) where the var needs the full "
                "gradient; pass it through dist::replicate<axis>(mesh, v) (identity forward, all_reduce of the "
                "gradient's parts backward), or shard it over the axis too");
};

/// Checker: sequence_gather<D> of a var placed otherwise than split over D
/// alone (its result, replicated over D's axis, has no place for the rest).
template <class Dim, class Placements>
struct sequence_gather_needs_a_var_split_over_d_alone {
  static_assert(dimsum::detail::always_false<Dim, Placements>,
                "dimsum: sequence_gather<D>(s) needs s split over D and placed no other way (its result is a var "
                "replicated over D's mesh axis); gather or reduce the other placements first");
};

/// Checker: a replicated var in an operation none of whose values is split
/// over its axis.
template <class VarDims, class Axis>
struct replicated_var_meets_no_split_value {
  static_assert(dimsum::detail::always_false<VarDims, Axis>,
                "dimsum: a var made by dist::replicate<axis> meets no value split (or partial) over that axis here, "
                "so every rank computes all of its gradient and replicate's all_reduce would count it once per rank; "
                "use the var replicate was given");
};

/// A var sharded over a mesh: each rank holds `local()`, the var of its
/// block, recorded on its own tape. Made by `dist::watch` (a parameter
/// holding this rank's block), `dist::shard` of a var, and the dist::
/// operations on sharded vars. `value()` is the sharded tensor of its
/// value; `dist::gradient(s)` the sharded tensor of its gradient.
template <class T, dimension... Ds, class... Ps>
class sharded<grad::var<T, Ds...>, Ps...> {
  static constexpr auto problem_ = detail::placement_problem<dim_list<Ds...>, Ps...>();
  using check_ = std::integral_constant<
      std::size_t, sizeof(detail::placements_checked<problem_.first, problem_.second, dim_list<Ds...>, Ps...>)>;

 public:
  using var_type = grad::var<T, Ds...>;
  using tensor_type = tensor<T, Ds...>;
  using value_type = T;
  using dims = dim_list<Ds...>;
  using placements = std::tuple<Ps...>;
  static constexpr bool has_partial = (is_partial_v<Ps> || ...);

  sharded(var_type local, std::shared_ptr<dist::detail::mesh_comms> comms)
      : local_(std::move(local)), comms_(std::move(comms)) {}
  /// Takes the result of an operation that already reported a compile-time error.
  sharded(invalid_expression) {}

  /// This rank's block, a var.
  const var_type& local() const { return local_; }
  /// This rank's block of the value, as a sharded tensor.
  sharded<tensor_type, Ps...> value() const { return sharded<tensor_type, Ps...>(local_.value(), comms_); }
  const std::shared_ptr<dist::detail::mesh_comms>& comms() const { return comms_; }
  /// The global extent of dim D.
  template <dimension D>
  std::size_t extent() const {
    return value().template extent<D>();
  }

 private:
  var_type local_;
  std::shared_ptr<dist::detail::mesh_comms> comms_;
};

/// A var every rank holds in full along mesh axes As inside a region where
/// values are split over them (`replicate<As...>(mesh, x)`): it may meet
/// split values in dist:: operations, each rank adding its part of the
/// gradient; backward all_reduces the parts over As into the var it was
/// made from.
template <class T, dimension... Ds, axis... As>
class replicated<grad::var<T, Ds...>, As...> {
 public:
  using var_type = grad::var<T, Ds...>;
  using tensor_type = tensor<T, Ds...>;
  using value_type = T;
  using dims = dim_list<Ds...>;
  using placements = std::tuple<>;
  using first_axis = std::tuple_element_t<0, std::tuple<As...>>;

  replicated(var_type local, std::shared_ptr<dist::detail::mesh_comms> comms)
      : local_(std::move(local)), comms_(std::move(comms)) {}
  replicated(invalid_expression) {}
  const var_type& local() const { return local_; }
  const tensor_type& value() const { return local_.value(); }
  const std::shared_ptr<dist::detail::mesh_comms>& comms() const { return comms_; }

 private:
  var_type local_;
  std::shared_ptr<dist::detail::mesh_comms> comms_;
};

namespace detail {

template <class X>
  requires grad::detail::var_like<X>
struct block_type<X> {
  using type = grad::var_for_t<typename X::value_type, typename X::dims>;
};

template <class Tuple>
struct axes_of;
template <class... Ps>
struct axes_of<std::tuple<Ps...>> {
  static constexpr std::array<std::string_view, sizeof...(Ps)> value{Ps::mesh_axis::name.view()...};
};

template <class O>
  requires grad::detail::var_like<O>
struct gradient_axes<O> {
  static constexpr bool is_var = !grad::detail::is_frozen_var_v<O>;
  static constexpr bool is_replicated = false;
  static constexpr std::array<std::string_view, 0> axes{};
};
template <class T, dimension... Ds, class... Ps>
struct gradient_axes<sharded<grad::var<T, Ds...>, Ps...>> {
  static constexpr bool is_var = true;
  static constexpr bool is_replicated = false;
  static constexpr auto axes = axes_of<std::tuple<Ps...>>::value;
};
template <class T, dimension... Ds, axis... As>
struct gradient_axes<replicated<grad::var<T, Ds...>, As...>> {
  static constexpr bool is_var = true;
  static constexpr bool is_replicated = true;
  static constexpr std::array<std::string_view, sizeof...(As)> axes{As::name.view()...};
};

template <class Out, class... Os>
struct report_partial_gradient {
  static constexpr void report() {
    constexpr auto at = partial_gradient_operand<Out, Os...>();
    if constexpr (at.first != sizeof...(Os)) {
      using O = std::remove_cvref_t<std::tuple_element_t<at.first, std::tuple<Os...>>>;
      using A = typename std::tuple_element_t<at.second, Out>::mesh_axis;
      dimsum::detail::report<gradient_would_be_a_partial_sum<diagnostic_dims_t<typename O::dims>, A>>();
    } else {
      using O = std::remove_cvref_t<std::tuple_element_t<idle_replicated_operand<Out, Os...>(), std::tuple<Os...>>>;
      dimsum::detail::report<replicated_var_meets_no_split_value<diagnostic_dims_t<typename O::dims>, typename O::first_axis>>();
    }
  }
};

/// t summed over mesh axis `axis` in place (MPI_Allreduce), counted as traffic.
template <class T, dimension... Ds>
void all_reduce_in_place(const mesh_comms& c, std::string_view axis, tensor<T, Ds...>& t, const char* op) {
  const std::size_t a = c.axis_index(axis);
  MPI_Comm comm = c.axis_comms[a];
  const std::string what = over_axis(op, axis);
  const auto start = clock::now();
  arrive_with(c, comm, what, code_all_reduce, t, start);
  MPI_Request req = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, t.data(), checked_count(t.size()), mpi_type<T>(), MPI_SUM, comm, &req),
            "MPI_Iallreduce");
  finish(req, comm, what, start);
  count_traffic(collective::all_reduce, t.size() * sizeof(T), static_cast<std::uint64_t>(c.sizes[a]));
}

/// Every split of a sharded tensor gathered, one after the other: the full value.
template <class S>
auto gather_every_split(S s) {
  if constexpr (is_sharded_v<S>) {
    using Splits = typename filter<keep_splits, typename S::placements>::type;
    static_assert(std::tuple_size_v<Splits> > 0, "dimsum: internal: a partial sum has no split to gather");
    return gather_every_split(all_gather<typename std::tuple_element_t<0, Splits>::dim>(std::move(s)));
  } else {
    return s;
  }
}

/// This rank's block of a full tensor for the splits Ps (the other placements ignored).
template <class... Ps, class T, dimension... Ds>
tensor<T, Ds...> block_of(const mesh_comms& c, tensor<T, Ds...> full) {
  auto cut = [&]<class P>(std::type_identity<P>) {
    if constexpr (is_split_v<P>) {
      using D = typename P::dim;
      const std::size_t a = c.axis_index(P::mesh_axis::name.view());
      const auto parts = static_cast<std::size_t>(c.sizes[a]);
      const std::size_t n = full.template extent<D>();
      if (n % parts != 0)
        throw shape_error("shard: dim '" + std::string(D::name.view()) + "' of extent " + std::to_string(n) +
                          " does not split evenly over mesh axis '" + std::string(P::mesh_axis::name.view()) +
                          "' of size " + std::to_string(parts));
      const auto k = static_cast<std::size_t>(c.coords[a]);
      full = slice<D>(full, k * (n / parts), (k + 1) * (n / parts));
    }
  };
  (cut(std::type_identity<Ps>{}), ...);
  return full;
}

/// Whether every one of As is an axis of the mesh MeshAxes.
template <class MeshAxes, axis... As>
constexpr bool all_axes_in_mesh() {
  for (std::string_view a : std::array<std::string_view, sizeof...(As)>{As::name.view()...}) {
    bool found = false;
    for (auto n : MeshAxes::names) found = found || n == a;
    if (!found) return false;
  }
  return true;
}
}  // namespace detail

// ------------------------------------------------------------- creation

/// The var of a parameter that holds this rank's block of a tensor split by
/// Ps, on tape `t`: `dist::watch<split<nheads, model>>(tape, mesh, W_Q)`.
/// Backward accumulates this rank's block of the gradient into `block.grad`
/// (an optimizer then steps each rank's block as it would the whole
/// parameter). Collective over the mesh: the blocks' extents are compared
/// (`shape_error` on every rank if a dim's differ). Compile time: as
/// `from_local` (a split dim must be dynamic).
template <class... Ps, class T, dimension... Ds, axis... Axes>
auto watch(grad::tape& t, const mesh<Axes...>& m, parameter<T, Ds...>& block) {
  if constexpr (!detail::axes_in_mesh<detail::axes<Axes...>, Ps...>) {
    detail::report_axis_not_in_mesh<detail::axes<Axes...>, Ps...>();
    return invalid_expression{};
  } else if constexpr (!detail::no_static_split<Ps...>) {
    detail::report_static_split<Ps...>();
    return invalid_expression{};
  } else {
    static_assert((is_split_v<Ps> && ...), "dimsum: dist::watch takes split<D, axis> placements");
    detail::arrive_with(*m.comms(), m.comm(), "dist::watch", detail::code_from_local, block.value, detail::clock::now());
    return sharded<grad::var<T, Ds...>, Ps...>(t.watch(block), m.comms());
  }
}

/// This rank's block of a var every rank holds in full (the same value on
/// every rank): the var of `shard<Ps...>(m, v.value())`, whose gradient is
/// all_gathered into v's full gradient in backward (the adjoint of shard
/// is gather).
template <class... Ps, class T, dimension... Ds, axis... Axes>
auto shard(const mesh<Axes...>& m, const grad::var<T, Ds...>& v) {
  if constexpr (!detail::axes_in_mesh<detail::axes<Axes...>, Ps...>) {
    detail::report_axis_not_in_mesh<detail::axes<Axes...>, Ps...>();
    return invalid_expression{};
  } else if constexpr (!detail::no_static_split<Ps...>) {
    detail::report_static_split<Ps...>();
    return invalid_expression{};
  } else {
    static_assert((is_split_v<Ps> && ...), "dimsum: shard takes split<D, axis> placements");
    auto s = dist::shard<Ps...>(m, v.value());
    auto comms = m.comms();
    auto out = grad::detail::record(v.owner(), std::move(s.local()), v.requires_grad(),
                                    [v, comms](tensor<T, Ds...>& g, const tensor<T, Ds...>&) {
                                      v.node()->accumulate(detail::gather_every_split(
                                          sharded<tensor<T, Ds...>, Ps...>(std::move(g), comms)));
                                    });
    return sharded<grad::var<T, Ds...>, Ps...>(std::move(out), m.comms());
  }
}

/// A full var (every rank holds the same value) entering a region where
/// values are split over mesh axes As: Megatron's f. Forward the identity;
/// backward, each rank's part of the gradient (computed from its blocks
/// only) is all_reduced over As before it reaches v. Without it, a var
/// used with split values is the compile error `gradient_would_be_a_partial_sum`.
template <axis... As, class T, dimension... Ds, axis... Axes>
auto replicate(const mesh<Axes...>& m, const grad::var<T, Ds...>& v) {
  static_assert(sizeof...(As) > 0, "dimsum: replicate<A>(mesh, v) names the mesh axes v enters a region split over");
  static_assert(detail::all_axes_in_mesh<detail::axes<Axes...>, As...>(),
                "dimsum: replicate<A>(mesh, v): A is not an axis of the mesh");
  auto comms = m.comms();
  tensor<T, Ds...> copy = v.value();
  auto out = grad::detail::record(v.owner(), std::move(copy), v.requires_grad(),
                                  [v, comms](tensor<T, Ds...>& g, const tensor<T, Ds...>&) {
                                    (detail::all_reduce_in_place(*comms, As::name.view(), g, "replicate (backward)"), ...);
                                    v.node()->accumulate(std::move(g));
                                  });
  return replicated<grad::var<T, Ds...>, As...>(std::move(out), m.comms());
}
template <axis... As, class V, axis... Axes>
  requires(grad::detail::var_like<V> && !std::is_same_v<std::remove_cvref_t<V>, typename std::remove_cvref_t<V>::var_type>)
auto replicate(const mesh<Axes...>& m, const V& v) {
  return replicate<As...>(m, dimsum::eval(v));
}

// ------------------------------------------------------------ collectives

/// The full value of a partial-sum var: `all_reduce` of its value; backward
/// is the identity (each rank's part receives the full gradient).
template <class T, dimension... Ds, class... Ps>
auto all_reduce(sharded<grad::var<T, Ds...>, Ps...> s) {
  using Parts = typename detail::filter<detail::keep_partials, std::tuple<Ps...>>::type;
  if constexpr (std::tuple_size_v<Parts> == 0) {
    dimsum::detail::report<collective_has_nothing_to_do<std::tuple<Ps...>, op_all_reduce>>();
    return invalid_expression{};
  } else {
    using Tn = tensor<T, Ds...>;
    auto r = dist::all_reduce(sharded<Tn, Ps...>(s.local().value(), s.comms()));
    Tn full = std::move(const_cast<Tn&>(static_cast<const Tn&>(detail::local_of(r))));
    const auto& in = s.local();
    auto out = grad::detail::record(in.owner(), std::move(full), in.requires_grad(),
                                    [in](Tn& g, const Tn&) { in.node()->accumulate(std::move(g)); });
    using Keep = typename detail::filter<detail::keep_splits, std::tuple<Ps...>>::type;
    return detail::make_result<grad::var<T, Ds...>, Keep>(std::move(out), s.comms());
  }
}

/// Dim D whole again on every rank (a var of the full value along D);
/// backward takes this rank's block of D from the gradient (the adjoint of
/// gather is shard: every rank holds the same full gradient).
template <dimension D, class T, dimension... Ds, class... Ps>
auto all_gather(sharded<grad::var<T, Ds...>, Ps...> s) {
  using Match = typename detail::filter<detail::split_of_dim<D>::template match, std::tuple<Ps...>>::type;
  if constexpr (std::tuple_size_v<Match> == 0) {
    dimsum::detail::report<collective_has_nothing_to_do<diagnostic_name_t<D>, op_all_gather>>();
    return invalid_expression{};
  } else {
    using Tn = tensor<T, Ds...>;
    using P = std::tuple_element_t<0, Match>;
    auto r = dist::all_gather<D>(sharded<Tn, Ps...>(s.local().value(), s.comms()));
    Tn full = std::move(const_cast<Tn&>(static_cast<const Tn&>(detail::local_of(r))));
    const auto& in = s.local();
    auto comms = s.comms();
    auto out = grad::detail::record(in.owner(), std::move(full), in.requires_grad(), [in, comms](Tn& g, const Tn&) {
      in.node()->accumulate(detail::block_of<P>(*comms, std::move(g)));
    });
    using Keep = typename detail::filter<detail::not_split_of_dim<D>::template keep, std::tuple<Ps...>>::type;
    return detail::make_result<grad::var<T, Ds...>, Keep>(std::move(out), s.comms());
  }
}

/// Dim D whole again on every rank, entering a region where values are
/// split over the axis D was split over (Megatron's sequence-parallel g:
/// the blocks of positions a norm or dropout ran on, gathered before a
/// column-parallel projection). Forward `all_gather<D>`; the result is a
/// replicated var (`replicated<var, A>`: it may meet values split over A),
/// and backward reduce-scatters D of the ranks' parts of its gradient over
/// A, so each rank's block receives its block of the summed gradient: the
/// bytes of one all-gather, where `replicate<A>(mesh, all_gather<D>(s))`
/// all-reduces the whole gradient (twice the bytes) and then keeps a block.
/// `s` is split over D and nothing else.
template <dimension D, class T, dimension... Ds, class... Ps>
auto sequence_gather(sharded<grad::var<T, Ds...>, Ps...> s) {
  using Match = typename detail::filter<detail::split_of_dim<D>::template match, std::tuple<Ps...>>::type;
  if constexpr (std::tuple_size_v<Match> == 0) {
    dimsum::detail::report<collective_has_nothing_to_do<diagnostic_name_t<D>, op_all_gather>>();
    return invalid_expression{};
  } else if constexpr (sizeof...(Ps) != 1) {
    dimsum::detail::report<sequence_gather_needs_a_var_split_over_d_alone<diagnostic_name_t<D>, std::tuple<Ps...>>>();
    return invalid_expression{};
  } else {
    using P = std::tuple_element_t<0, Match>;
    using A = typename P::mesh_axis;
    using Tn = tensor<T, Ds...>;
    auto r = dist::all_gather<D>(sharded<Tn, Ps...>(s.local().value(), s.comms()));
    Tn full = std::move(const_cast<Tn&>(static_cast<const Tn&>(detail::local_of(r))));
    const auto& in = s.local();
    auto comms = s.comms();
    auto out = grad::detail::record(in.owner(), std::move(full), in.requires_grad(), [in, comms](Tn& g, const Tn&) {
      auto block = dist::reduce_scatter<D>(sharded<Tn, partial<A, D>>(std::move(g), comms));
      in.node()->accumulate(std::move(block.local()));
    });
    return replicated<grad::var<T, Ds...>, A>(std::move(out), s.comms());
  }
}

/// The full value of a partial-sum var, split over D on the partial's axis;
/// backward all_gathers D of the gradient (each rank's part receives the
/// full gradient).
template <dimension D, class T, dimension... Ds, class... Ps>
auto reduce_scatter(sharded<grad::var<T, Ds...>, Ps...> s) {
  using Parts = typename detail::filter<detail::keep_partials, std::tuple<Ps...>>::type;
  using Match = typename detail::filter<detail::split_of_dim<D>::template match, std::tuple<Ps...>>::type;
  if constexpr (std::tuple_size_v<Parts> != 1 || std::tuple_size_v<Match> != 0 || !contains_v<dim_list<Ds...>, D>) {
    dimsum::detail::report<collective_has_nothing_to_do<diagnostic_name_t<D>, op_reduce_scatter>>();
    return invalid_expression{};
  } else {
    using Tn = tensor<T, Ds...>;
    auto r = dist::reduce_scatter<D>(sharded<Tn, Ps...>(s.local().value(), s.comms()));
    using R = decltype(r);
    const auto& in = s.local();
    auto comms = s.comms();
    auto out = grad::detail::record(in.owner(), std::move(r.local()), in.requires_grad(), [in, comms](Tn& g, const Tn&) {
      auto full = dist::all_gather<D>(R(std::move(g), comms));
      in.node()->accumulate(std::move(const_cast<Tn&>(static_cast<const Tn&>(detail::local_of(full)))));
    });
    return detail::make_result<grad::var<T, Ds...>, typename R::placements>(std::move(out), s.comms());
  }
}

// ------------------------------------------------------------- operations

/// Dim From renamed To, placements included.
template <dimension From, dimension To, class T, dimension... Ds, class... Ps>
auto rename(const sharded<grad::var<T, Ds...>, Ps...>& s) {
  auto local = dimsum::eval(dimsum::rename<From, To>(s.local()));
  using Out = typename detail::rename_placements<From, To, std::tuple<Ps...>>::type;
  return detail::make_result<decltype(local), Out>(std::move(local), s.comms());
}
/// Dim From of a replicated var renamed To.
template <dimension From, dimension To, class T, dimension... Ds, axis... As>
auto rename(const replicated<grad::var<T, Ds...>, As...>& r) {
  auto local = dimsum::eval(dimsum::rename<From, To>(r.local()));
  return replicated<decltype(local), As...>(std::move(local), r.comms());
}

/// The gradient of a sharded var after backward, as a sharded tensor placed
/// as the var's blocks (a partial sum's gradient is the full gradient on
/// every rank: its partials are dropped). For the var of `dist::watch(p)`,
/// this rank's block of the gradient, as `p.grad` holds it.
template <class T, dimension... Ds, class... Ps>
auto gradient(const sharded<grad::var<T, Ds...>, Ps...>& s) {
  using Keep = typename detail::filter<detail::keep_splits, std::tuple<Ps...>>::type;
  tensor<T, Ds...> g = dimsum::gradient(s.local());
  return detail::make_result<tensor<T, Ds...>, Keep>(std::move(g), s.comms());
}

}  // namespace dimsum::dist
