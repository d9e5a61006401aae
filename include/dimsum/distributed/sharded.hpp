#pragma once
/// \file
/// Tensors sharded over a mesh by name: `sharded<tensor<float, nheads,
/// d_model, d_head>, split<nheads, model>>` holds, on each rank, the heads
/// of its coordinate along mesh axis `model`. A contraction over a split
/// dim yields a `partial<model, nheads>` value (each rank holds a part of a
/// sum) that only `all_reduce` or `reduce_scatter` turns into a full one;
/// using it where the full value is needed is a compile error naming the
/// dim and the axis. Collectives are written by the user (docs/design.md).

// dimsum uses MPI's C API only: skip the deprecated C++ bindings (whose
// casts warn under -Wextra).
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <dimsum/core/diagnostics.hpp>
#include <dimsum/core/errors.hpp>
#include <dimsum/distributed/mesh.hpp>
// The var overloads of eval, einsum, softmax, ... must be declared before
// the dist:: operations that call them qualified on a sharded var's block.
#include <dimsum/grad/grad.hpp>
#include <dimsum/io/print.hpp>
#include <dimsum/ops/einsum.hpp>
#include <dimsum/ops/mask.hpp>
#include <dimsum/ops/rename.hpp>
#include <dimsum/ops/slice.hpp>
#include <dimsum/ops/softmax.hpp>
#include <dimsum/tensor/tensor.hpp>

namespace dimsum::dist {

/// Placement: dim D is split in equal blocks over mesh axis A (the rank at
/// coordinate c along A holds block c).
template <dimension D, axis A>
struct split {
  using dim = D;
  using mesh_axis = A;
};
/// Placement: the value is a partial sum over mesh axis A (the full value
/// is the sum of every rank's along A), left by contracting dim D.
template <axis A, dimension D>
struct partial {
  using mesh_axis = A;
  using dim = D;
};

template <class P>
inline constexpr bool is_split_v = false;
template <dimension D, axis A>
inline constexpr bool is_split_v<split<D, A>> = true;
template <class P>
inline constexpr bool is_partial_v = false;
template <axis A, dimension D>
inline constexpr bool is_partial_v<partial<A, D>> = true;

// ---------------------------------------------------------------- checkers

/// Checker: a sharded tensor assigned to a plain tensor (a rank holds only
/// its block, or a partial sum).
template <class ShardedDims, class TensorDims>
struct a_sharded_tensor_is_not_a_tensor {
  static_assert(dimsum::detail::always_false<ShardedDims, TensorDims>,
                "dimsum: a dist::sharded is not a tensor; take this rank's block with s.local(), or the full value "
                "with all_gather<D>(s) (all_reduce for a partial sum)");
};
/// Checker: a placement splits a dim the tensor does not have.
template <class Dim, class Axis, class Dims>
struct sharded_dim_is_not_a_dim_of_the_tensor {
  static_assert(dimsum::detail::always_false<Dim, Axis, Dims>,
                "dimsum: a sharded tensor splits a dim that the tensor does not have");
};
/// Checker: one dim split twice, or one mesh axis used for two placements.
template <class Dim, class Axis>
struct sharded_tensor_uses_a_dim_or_mesh_axis_twice {
  static_assert(dimsum::detail::always_false<Dim, Axis>,
                "dimsum: a sharded tensor places one dim, or uses one mesh axis, twice");
};
/// Checker: a placement names a mesh axis that the mesh lacks.
template <class Dim, class Axis, class MeshAxes>
struct sharded_over_a_mesh_axis_the_mesh_lacks {
  static_assert(dimsum::detail::always_false<Dim, Axis, MeshAxes>,
                "dimsum: a dim is sharded over a mesh axis that the mesh does not have");
};
/// Checker: a dim with a static extent split over a mesh axis (each rank's
/// block has another extent than the whole, which its type cannot say).
template <class Dim, class Axis>
struct split_dim_has_a_static_extent {
  static_assert(dimsum::detail::always_false<Dim, Axis>,
                "dimsum: a dim split over a mesh axis must be dynamic (each rank's block has another extent than the "
                "whole): declare it DIMSUM_DIM(name) without an extent and give the extent at run time");
};
/// Checker: operands of one operation place a dim differently.
template <class Dim, class Axis>
struct operands_shard_a_dim_inconsistently {
  static_assert(dimsum::detail::always_false<Dim, Axis>,
                "dimsum: operands place a dim inconsistently: split over a mesh axis in one operand, not (or over "
                "another axis) in another; all_gather it, or shard the other operand the same way");
};
/// Checker: a partial sum used where the full value is needed.
template <class Dim, class Axis, class Operation>
struct partial_sum_used_as_a_full_value {
  static_assert(dimsum::detail::always_false<Dim, Axis, Operation>,
                "dimsum: a partial sum (left by contracting a dim split over a mesh axis) is used where the full "
                "value is needed; all_reduce (or reduce_scatter) it first");
};
/// Checker: a collective over a dim or axis the value is not placed on.
template <class What, class Operation>
struct collective_has_nothing_to_do {
  static_assert(dimsum::detail::always_false<What, Operation>,
                "dimsum: this collective needs a value placed that way (all_reduce: a partial sum; all_gather<D>: D "
                "split; reduce_scatter<D>: a partial sum and D not split)");
};
/// Checker: an operation over a split dim that needs every element of it.
template <class Dim, class Axis, class Operation>
struct operation_over_a_sharded_dim {
  static_assert(dimsum::detail::always_false<Dim, Axis, Operation>,
                "dimsum: this operation needs all of a dim that is split over a mesh axis; all_gather it first");
};

/// Operation names in diagnostics.
struct op_softmax {};
struct op_causal_mask {};
struct op_masked_fill {};
struct op_map {};
struct op_print {};
struct op_add_full_value {};
struct op_product_of_partial_sums {};
struct op_all_reduce {};
struct op_all_gather {};
struct op_reduce_scatter {};

// ------------------------------------------------------------ placements

namespace detail {
/// Names of a tuple of placements' dims and axes, and which are splits.
template <class Tuple>
struct placement_info;
template <class... Ps>
struct placement_info<std::tuple<Ps...>> {
  static constexpr std::size_t size = sizeof...(Ps);
  static constexpr std::array<std::string_view, sizeof...(Ps)> dims{Ps::dim::name.view()...};
  static constexpr std::array<std::string_view, sizeof...(Ps)> axes{Ps::mesh_axis::name.view()...};
  static constexpr std::array<bool, sizeof...(Ps)> splits{is_split_v<Ps>...};
};

/// The first problem with placements Ps on dims L: 0 none, 1 a split dim
/// not in L (at index), 2 a dim or axis used twice (at index).
template <class L, class... Ps>
constexpr std::pair<int, std::size_t> placement_problem() {
  using I = placement_info<std::tuple<Ps...>>;
  for (std::size_t i = 0; i < I::size; ++i)
    if (I::splits[i] && dimsum::detail::find_name(L::names, I::dims[i]) == dimsum::detail::npos) return {1, i};
  for (std::size_t i = 0; i < I::size; ++i)
    for (std::size_t j = i + 1; j < I::size; ++j)
      if (I::axes[i] == I::axes[j] || (I::splits[i] && I::splits[j] && I::dims[i] == I::dims[j])) return {2, j};
  return {0, 0};
}

template <int Kind, std::size_t I, class L, class... Ps>
struct placements_checked {};
template <std::size_t I, class L, class... Ps>
struct placements_checked<1, I, L, Ps...>
    : sharded_dim_is_not_a_dim_of_the_tensor<
          diagnostic_name_t<typename std::tuple_element_t<I, std::tuple<Ps...>>::dim>,
          typename std::tuple_element_t<I, std::tuple<Ps...>>::mesh_axis, diagnostic_dims_t<L>> {};
template <std::size_t I, class L, class... Ps>
struct placements_checked<2, I, L, Ps...>
    : sharded_tensor_uses_a_dim_or_mesh_axis_twice<
          diagnostic_name_t<typename std::tuple_element_t<I, std::tuple<Ps...>>::dim>,
          typename std::tuple_element_t<I, std::tuple<Ps...>>::mesh_axis> {};
}  // namespace detail

template <class Tensor, class... Ps>
class sharded;

/// A tensor sharded over a mesh: each rank holds `local()`, its block of
/// every split dim (and its part of every partial sum). `extent<D>()` is
/// the global extent. Made by `shard`, `from_local`, and the operations of
/// this header; the placements are checked when the type is instantiated
/// (one error naming the dim and axis).
template <class T, dimension... Ds, class... Ps>
class sharded<tensor<T, Ds...>, Ps...> {
  static constexpr auto problem_ = detail::placement_problem<dim_list<Ds...>, Ps...>();
  // A member type is instantiated with the class: bad placements fail here, once.
  using check_ = std::integral_constant<
      std::size_t, sizeof(detail::placements_checked<problem_.first, problem_.second, dim_list<Ds...>, Ps...>)>;

 public:
  using tensor_type = tensor<T, Ds...>;
  using value_type = T;
  using dims = dim_list<Ds...>;
  using placements = std::tuple<Ps...>;
  static constexpr bool has_partial = (is_partial_v<Ps> || ...);

  sharded(tensor_type local, std::shared_ptr<dist::detail::mesh_comms> comms)
      : local_(std::move(local)), comms_(std::move(comms)) {}
  /// Takes the result of an operation that already reported a compile-time
  /// error, so `sharded<...> y = <mistake>;` gives that one error, not a
  /// second one about the conversion.
  sharded(invalid_expression) {}
  /// `tensor<...> t = s;`: the compile error `a_sharded_tensor_is_not_a_tensor`
  /// naming both dim lists, instead of the compiler's "no conversion".
  template <class U, dimension... Es>
  operator tensor<U, Es...>() const {
    dimsum::detail::report<a_sharded_tensor_is_not_a_tensor<diagnostic_dims_t<dim_list<Ds...>>,
                                                            diagnostic_dims_t<dim_list<Es...>>>>();
    return {};
  }

  /// This rank's block.
  const tensor_type& local() const { return local_; }
  tensor_type& local() { return local_; }
  /// The mesh's shared state.
  const std::shared_ptr<dist::detail::mesh_comms>& comms() const { return comms_; }
  /// The global extent of dim D (its local extent times the size of the
  /// axis it is split over).
  template <dimension D>
  std::size_t extent() const {
    std::size_t e = local_.template extent<D>();
    using I = detail::placement_info<placements>;
    for (std::size_t i = 0; i < I::size; ++i)
      if (I::splits[i] && I::dims[i] == D::name.view())
        e *= static_cast<std::size_t>(comms_->sizes[comms_->axis_index(I::axes[i])]);
    return e;
  }

 private:
  tensor_type local_;
  std::shared_ptr<dist::detail::mesh_comms> comms_;
};

template <class X>
inline constexpr bool is_sharded_v = false;
template <class Tn, class... Ps>
inline constexpr bool is_sharded_v<sharded<Tn, Ps...>> = true;

/// A var every rank holds in full along mesh axes As, inside a
/// tensor-parallel region (distributed/sharded_var.hpp).
template <class Var, axis... As>
class replicated;
template <class X>
inline constexpr bool is_replicated_v = false;
template <class V, axis... As>
inline constexpr bool is_replicated_v<replicated<V, As...>> = true;

namespace detail {
template <class X>
struct placements_of {
  using type = std::tuple<>;
};
template <class Tn, class... Ps>
struct placements_of<sharded<Tn, Ps...>> {
  using type = std::tuple<Ps...>;
};
template <class X>
using placements_of_t = typename placements_of<std::remove_cvref_t<X>>::type;

/// A sharded (or replicated var) operand's local block; anything else as
/// it is (replicated).
template <class X>
decltype(auto) local_of(const X& x) {
  if constexpr (is_sharded_v<X> || is_replicated_v<X>)
    return (x.local());
  else
    return (x);
}
template <class... Xs>
std::shared_ptr<mesh_comms> comms_of(const Xs&... xs) {
  std::shared_ptr<mesh_comms> c;
  auto take = [&](const auto& x) {
    using X = std::remove_cvref_t<decltype(x)>;
    if constexpr (is_sharded_v<X> || is_replicated_v<X>)
      if (!c) c = x.comms();
  };
  (take(xs), ...);
  return c;
}

/// The type a rank's block is held as: itself for a tensor; a var for
/// anything var-like (a lazy or fused var is recorded as the var it
/// gives; specialised in distributed/sharded_var.hpp).
template <class X>
struct block_type {
  using type = X;
};

/// An operand with dims (a named expression, a var, a sharded value).
template <class O>
concept has_dims = requires { typename std::remove_cvref_t<O>::dims; };

/// Whether an operand is a var whose gradient backward computes (a var,
/// a sharded var, a replicated var; specialised in sharded_var.hpp), and
/// the mesh axes over which its gradient is complete on each rank (those
/// of its placements, and a replicated var's axes).
template <class O>
struct gradient_axes {
  static constexpr bool is_var = false;
  static constexpr bool is_replicated = false;
  static constexpr std::array<std::string_view, 0> axes{};
};

/// The index of the first var operand among Os whose gradient would be a
/// partial sum over a mesh axis of the result's placements Out (its block
/// of the result is computed from this rank's part only), or sizeof...(Os);
/// `axis` receives that axis's index in Out.
template <class Out, class... Os>
constexpr std::pair<std::size_t, std::size_t> partial_gradient_operand() {
  using I = placement_info<Out>;
  std::size_t k = 0;
  std::pair<std::size_t, std::size_t> found{sizeof...(Os), 0};
  auto one = [&]<class O>(std::type_identity<O>) {
    using G = gradient_axes<O>;
    if constexpr (G::is_var) {
      for (std::size_t i = 0; i < I::size && found.first == sizeof...(Os); ++i) {
        bool covered = false;
        for (auto a : G::axes) covered = covered || a == I::axes[i];
        if (!covered) found = {k, i};
      }
    }
    ++k;
  };
  (one(std::type_identity<std::remove_cvref_t<Os>>{}), ...);
  return found;
}
/// The index of the first replicated var among Os with an axis that none of
/// the result's placements Out is on (its gradient would be complete on
/// every rank, and all_reducing it would count it once per rank), or
/// sizeof...(Os).
template <class Out, class... Os>
constexpr std::size_t idle_replicated_operand() {
  using I = placement_info<Out>;
  std::size_t k = 0, found = sizeof...(Os);
  auto one = [&]<class O>(std::type_identity<O>) {
    using G = gradient_axes<O>;
    if constexpr (G::is_replicated) {
      for (auto a : G::axes) {
        bool used = false;
        for (std::size_t i = 0; i < I::size; ++i) used = used || a == I::axes[i];
        if (!used && found == sizeof...(Os)) found = k;
      }
    }
    ++k;
  };
  (one(std::type_identity<std::remove_cvref_t<Os>>{}), ...);
  return found;
}
template <class Out, class... Os>
inline constexpr bool gradients_complete = partial_gradient_operand<Out, Os...>().first == sizeof...(Os) &&
                                           idle_replicated_operand<Out, Os...>() == sizeof...(Os);
/// Reports the operand partial_gradient_operand finds (defined in sharded_var.hpp).
template <class Out, class... Os>
struct report_partial_gradient;

template <class... Ts>
using tuple_cat_t = decltype(std::tuple_cat(std::declval<Ts>()...));

/// The tuple of Ps whose predicate holds.
template <template <class> class Keep, class Tuple>
struct filter;
template <template <class> class Keep, class... Ps>
struct filter<Keep, std::tuple<Ps...>> {
  using type = tuple_cat_t<std::conditional_t<Keep<Ps>::value, std::tuple<Ps>, std::tuple<>>...>;
};

/// Placements without duplicates (first kept).
template <class Done, class Rest>
struct dedup;
template <class Done>
struct dedup<Done, std::tuple<>> {
  using type = Done;
};
template <class... Done, class P, class... Rest>
struct dedup<std::tuple<Done...>, std::tuple<P, Rest...>> {
  using type = typename dedup<std::conditional_t<(std::is_same_v<P, Done> || ...), std::tuple<Done...>,
                                                 std::tuple<Done..., P>>,
                              std::tuple<Rest...>>::type;
};

/// sharded<tensor, Ps...> for a tuple of placements; the tensor itself
/// when there are none (a replicated value).
template <class Tn, class Tuple>
struct result;
template <class Tn>
struct result<Tn, std::tuple<>> {
  using type = Tn;
  static Tn make(Tn t, const std::shared_ptr<mesh_comms>&) { return t; }
};
template <class Tn, class... Ps>
struct result<Tn, std::tuple<Ps...>> {
  using type = sharded<Tn, Ps...>;
  static type make(Tn t, std::shared_ptr<mesh_comms> c) { return type(std::move(t), std::move(c)); }
};
// The local operation already reported its mistake (an einsum label, a
// rename, ...): pass it on, so that the mistake stays one error.
template <class... Ps>
struct result<invalid_expression, std::tuple<Ps...>> {
  using type = invalid_expression;
  static type make(invalid_expression, const std::shared_ptr<mesh_comms>&) { return {}; }
};
template <class Tn, class Tuple>
auto make_result(Tn t, const std::shared_ptr<mesh_comms>& c) {
  using B = typename block_type<Tn>::type;
  return result<B, Tuple>::make(B(std::move(t)), c);
}

/// The first dim placed inconsistently among operands Os (dims Ls): index
/// into the operands' concatenated dims, or npos.
struct inconsistency {
  std::string_view dim, axis;
  bool found = false;
};
template <class... Os>
constexpr inconsistency find_inconsistency() {
  constexpr std::size_t n = sizeof...(Os);
  // For each operand: its dim names and, per dim, the axis it is split over ("" if none).
  std::array<std::vector<std::string_view>, n> names{};
  std::array<std::vector<std::string_view>, n> axes{};
  std::size_t k = 0;
  auto one = [&]<class O>(std::type_identity<O>) {
    if constexpr (is_sharded_v<O> || is_replicated_v<O> || has_dims<O>) {  // scalars have no dims
      using L = dims_of_t<std::remove_cvref_t<decltype(local_of(std::declval<const O&>()))>>;
      using I = placement_info<placements_of_t<O>>;
      for (std::size_t i = 0; i < L::size; ++i) {
        names[k].push_back(L::names[i]);
        std::string_view a = "";
        for (std::size_t j = 0; j < I::size; ++j)
          if (I::splits[j] && I::dims[j] == L::names[i]) a = I::axes[j];
        axes[k].push_back(a);
      }
    }
    ++k;
  };
  (one(std::type_identity<std::remove_cvref_t<Os>>{}), ...);
  for (std::size_t a = 0; a < n; ++a)
    for (std::size_t i = 0; i < names[a].size(); ++i)
      for (std::size_t b = a + 1; b < n; ++b)
        for (std::size_t j = 0; j < names[b].size(); ++j)
          if (names[a][i] == names[b][j] && axes[a][i] != axes[b][j])
            return {names[a][i], axes[a][i].empty() ? axes[b][j] : axes[a][i], true};
  return {};
}

/// Finds the placement type (among every operand's) of dim `name` split
/// over axis `axis_name`, for diagnostics.
template <std::size_t I, class Tuple>
struct tuple_at {
  using type = std::tuple_element_t<I, Tuple>;
};
template <class All, std::size_t I>
using all_at_t = typename tuple_at<I, All>::type;
template <class All>
constexpr std::size_t index_of_placement(std::string_view dim, std::string_view ax) {
  using I = placement_info<All>;
  for (std::size_t i = 0; i < I::size; ++i)
    if (I::dims[i] == dim && I::axes[i] == ax) return i;
  return 0;
}

/// Index of the first partial placement in Tuple (size if none).
template <class Tuple>
constexpr std::size_t first_partial() {
  using I = placement_info<Tuple>;
  for (std::size_t i = 0; i < I::size; ++i)
    if (!I::splits[i]) return i;
  return I::size;
}

template <class P>
struct keep_splits : std::bool_constant<is_split_v<P>> {};
template <class P>
struct keep_partials : std::bool_constant<is_partial_v<P>> {};

/// Reports the first partial of Tuple as used where the full value is needed.
template <class Op, class Tuple>
constexpr void report_partial() {
  using P = std::tuple_element_t<first_partial<Tuple>(), Tuple>;
  dimsum::detail::report<partial_sum_used_as_a_full_value<diagnostic_name_t<typename P::dim>, typename P::mesh_axis, Op>>();
}

template <class T>
MPI_Datatype mpi_type() {
  if constexpr (std::is_same_v<T, float>)
    return MPI_FLOAT;
  else if constexpr (std::is_same_v<T, double>)
    return MPI_DOUBLE;
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return MPI_INT64_T;
  else
    static_assert(dimsum::detail::always_false<T>, "dimsum: dist supports float, double and int64 tensors");
}

inline int checked_count(std::size_t n) {
  if (n > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw dist_error("a message of " + std::to_string(n) + " elements exceeds MPI's int count");
  return static_cast<int>(n);
}

/// `arrive` for a tensor: its dims' extents compared over `comm`.
template <class Tn>
void arrive_with(const mesh_comms& c, MPI_Comm comm, const std::string& what, std::uint64_t code, const Tn& t,
                 clock::time_point start) {
  using L = dims_of_t<Tn>;
  const auto e = t.extents();
  std::array<std::uint64_t, L::size> ext{};
  for (std::size_t i = 0; i < L::size; ++i) ext[i] = e[i];
  const std::array<std::string_view, L::size> names = L::names;
  arrive(comm, c.cart, what, code, ext, names, start);
}

/// "<op> over mesh axis '<axis>'", the collective's name in messages.
inline std::string over_axis(const char* op, std::string_view axis) {
  return std::string(op) + " over mesh axis '" + std::string(axis) + "'";
}
}  // namespace detail

// ---------------------------------------------------------------- traffic

/// What this process's collectives sent, counted by the collectives of
/// this layer (`all_reduce`, `all_gather`, `reduce_scatter`,
/// `average_gradients`) since the last `reset_traffic()`. `payload_bytes`
/// is the size of the buffers handed to MPI; `ring_bytes` is what this rank
/// sends if MPI runs each collective as a ring over the p ranks of its axis
/// (the bandwidth-optimal algorithm the cost model in docs/distributed.md
/// assumes): all-reduce of n bytes 2 (p - 1) n / p, all-gather (p - 1) x the
/// block, reduce-scatter (p - 1) n / p; 0 when p = 1. MPI may choose
/// another algorithm (recursive doubling for small messages sends more);
/// the count is the model's, not a measurement of the wire. Not
/// thread-safe: call collectives from one thread per rank, as MPI's default
/// thread level requires anyway.
struct traffic {
  std::uint64_t calls = 0;
  std::uint64_t payload_bytes = 0;
  std::uint64_t ring_bytes = 0;
};
/// This process's counter (see `traffic`).
inline traffic& traffic_counter() {
  static traffic t;
  return t;
}
/// Zeroes this process's counter.
inline void reset_traffic() { traffic_counter() = traffic{}; }

namespace detail {
enum class collective { all_reduce, all_gather, reduce_scatter };
/// Counts one collective: `bytes` is the buffer each rank hands MPI (the
/// block for all_gather, the whole input for all_reduce and reduce_scatter)
/// over an axis of p ranks.
inline void count_traffic(collective kind, std::uint64_t bytes, std::uint64_t p) {
  traffic& t = traffic_counter();
  ++t.calls;
  t.payload_bytes += bytes;
  switch (kind) {
    case collective::all_reduce: t.ring_bytes += 2 * (p - 1) * bytes / p; break;
    case collective::all_gather: t.ring_bytes += (p - 1) * bytes; break;
    case collective::reduce_scatter: t.ring_bytes += (p - 1) * bytes / p; break;
  }
}
}  // namespace detail

// --------------------------------------------------------------- creation

namespace detail {
template <class MeshAxes, class... Ps>
constexpr std::size_t first_axis_not_in_mesh() {
  using I = placement_info<std::tuple<Ps...>>;
  constexpr auto mesh_names = MeshAxes::names;
  for (std::size_t i = 0; i < I::size; ++i) {
    bool found = false;
    for (auto m : mesh_names) found = found || m == I::axes[i];
    if (!found) return i;
  }
  return I::size;
}
template <axis... As>
struct axes {
  static constexpr std::array<std::string_view, sizeof...(As)> names{As::name.view()...};
};
template <class MeshAxes, class... Ps>
inline constexpr bool axes_in_mesh = first_axis_not_in_mesh<MeshAxes, Ps...>() == sizeof...(Ps);
/// Reports the first placement whose axis the mesh lacks.
template <class MeshAxes, class... Ps>
constexpr void report_axis_not_in_mesh() {
  using P = std::tuple_element_t<first_axis_not_in_mesh<MeshAxes, Ps...>(), std::tuple<Ps...>>;
  dimsum::detail::report<
      sharded_over_a_mesh_axis_the_mesh_lacks<diagnostic_name_t<typename P::dim>, typename P::mesh_axis, MeshAxes>>();
}
}  // namespace detail

namespace detail {
template <class P>
constexpr bool static_split() {
  if constexpr (is_split_v<P>)
    return P::dim::is_static;
  else
    return false;
}
/// The index of the first split placement whose dim has a static extent
/// (sizeof...(Ps) if none).
template <class... Ps>
constexpr std::size_t first_static_split() {
  constexpr std::array<bool, sizeof...(Ps) + 1> is{static_split<Ps>()..., true};
  std::size_t i = 0;
  while (!is[i]) ++i;
  return i;
}
template <class... Ps>
inline constexpr bool no_static_split = first_static_split<Ps...>() == sizeof...(Ps);
/// Reports the first split placement of a dim with a static extent.
template <class... Ps>
constexpr void report_static_split() {
  using P = std::tuple_element_t<first_static_split<Ps...>(), std::tuple<Ps...>>;
  dimsum::detail::report<split_dim_has_a_static_extent<diagnostic_name_t<typename P::dim>, typename P::mesh_axis>>();
}

/// The same for placements given as a std::tuple.
template <class Tuple>
struct static_split_of;
template <class... Ps>
struct static_split_of<std::tuple<Ps...>> {
  static constexpr bool none = no_static_split<Ps...>;
  static constexpr void report() { report_static_split<Ps...>(); }
};
template <class Tuple>
inline constexpr bool no_static_split_in = static_split_of<Tuple>::none;
template <class Tuple>
constexpr void report_static_split_in() {
  static_split_of<Tuple>::report();
}

/// A dim split over more than one rank must be dynamic: each rank's block
/// has another extent than the static one.
inline shape_error static_split_error(const std::string& what, std::string_view dim, std::size_t extent,
                                      std::string_view axis, std::size_t parts) {
  return shape_error(what + ": dim '" + std::string(dim) + "' has the static extent " + std::to_string(extent) +
                     " and is split over mesh axis '" + std::string(axis) + "' of size " + std::to_string(parts) +
                     "; a dim split over ranks must be dynamic: declare it DIMSUM_DIM(" + std::string(dim) +
                     ") and give its extent at run time");
}
template <dimension D, axis A>
void check_dynamic_split(const char* what, std::size_t parts) {
  if constexpr (D::is_static)
    if (parts > 1) throw static_split_error(what, D::name.view(), D::static_extent, A::name.view(), parts);
}
}  // namespace detail

/// This rank's block of `full` (a tensor every rank holds, e.g. loaded from
/// one file or drawn with one seed) for placements Ps (splits only):
/// `shard<split<nheads, model>>(mesh, W_Q)`. Compile time: each axis is one
/// of the mesh's (`sharded_over_a_mesh_axis_the_mesh_lacks`), each dim one
/// of the tensor's. Run time: each split dim's extent divides by its axis's
/// size (`shape_error` naming both).
template <class... Ps, class T, dimension... Ds, axis... Axes>
auto shard(const mesh<Axes...>& m, const tensor<T, Ds...>& full) {
  if constexpr (!detail::axes_in_mesh<detail::axes<Axes...>, Ps...>) {
    detail::report_axis_not_in_mesh<detail::axes<Axes...>, Ps...>();
    return invalid_expression{};
  } else if constexpr (!detail::no_static_split<Ps...>) {
    detail::report_static_split<Ps...>();
    return invalid_expression{};
  } else {
    static_assert((is_split_v<Ps> && ...), "dimsum: shard takes split<D, axis> placements");
    // every rank holds the same full tensor: its extents are compared over the mesh
    detail::arrive_with(*m.comms(), m.comm(), "shard", detail::code_shard, full, detail::clock::now());
    tensor<T, Ds...> local = full;
    auto cut = [&]<class P>(std::type_identity<P>) {
      using D = typename P::dim;
      if constexpr (contains_v<dim_list<Ds...>, D>) {
        const std::size_t n = local.template extent<D>();
        const auto parts = static_cast<std::size_t>(m.template axis_size<typename P::mesh_axis>());
        if (n % parts != 0)
          throw shape_error("shard: dim '" + std::string(D::name.view()) + "' of extent " + std::to_string(n) +
                            " does not split evenly over mesh axis '" + std::string(P::mesh_axis::name.view()) +
                            "' of size " + std::to_string(parts));
        const std::size_t c = static_cast<std::size_t>(m.template coord<typename P::mesh_axis>());
        local = slice<D>(local, c * (n / parts), (c + 1) * (n / parts));
      }
    };
    (cut(std::type_identity<Ps>{}), ...);
    return sharded<tensor<T, Ds...>, Ps...>(std::move(local), m.comms());
  }
}

/// A sharded tensor from the block each rank computed or loaded itself.
/// Collective over the mesh: every rank's extents are compared, and a dim
/// whose extent differs between ranks throws `shape_error` on every rank
/// (naming the dim and the extents), so no rank goes on to a collective
/// the others never reach.
template <class... Ps, class T, dimension... Ds, axis... Axes>
auto from_local(const mesh<Axes...>& m, tensor<T, Ds...> local) {
  if constexpr (!detail::axes_in_mesh<detail::axes<Axes...>, Ps...>) {
    detail::report_axis_not_in_mesh<detail::axes<Axes...>, Ps...>();
    return invalid_expression{};
  } else if constexpr (!detail::no_static_split<Ps...>) {
    detail::report_static_split<Ps...>();
    return invalid_expression{};
  } else {
    detail::arrive_with(*m.comms(), m.comm(), "from_local", detail::code_from_local, local, detail::clock::now());
    return sharded<tensor<T, Ds...>, Ps...>(std::move(local), m.comms());
  }
}

// ------------------------------------------------------------ collectives

/// The full value of a partial sum: MPI_Allreduce (sum) of every rank's
/// part along each partial's mesh axis. The result keeps the splits; with
/// none left it is a plain (replicated) tensor. A value that is not a
/// partial sum is a compile error (`collective_has_nothing_to_do`).
template <class Tn, class... Ps>
auto all_reduce(sharded<Tn, Ps...> s) {
  using Parts = typename detail::filter<detail::keep_partials, std::tuple<Ps...>>::type;
  if constexpr (std::tuple_size_v<Parts> == 0) {
    dimsum::detail::report<collective_has_nothing_to_do<std::tuple<Ps...>, op_all_reduce>>();
    return invalid_expression{};
  } else {
    using T = typename Tn::value_type;
    using I = detail::placement_info<std::tuple<Ps...>>;
    Tn local = std::move(s.local());
    for (std::size_t i = 0; i < I::size; ++i)
      if (!I::splits[i]) {
        const std::size_t a = s.comms()->axis_index(I::axes[i]);
        MPI_Comm comm = s.comms()->axis_comms[a];
        const std::string what = detail::over_axis("all_reduce", I::axes[i]);
        const auto start = detail::clock::now();
        detail::arrive_with(*s.comms(), comm, what, detail::code_all_reduce, local, start);
        MPI_Request req = MPI_REQUEST_NULL;
        detail::check_mpi(MPI_Iallreduce(MPI_IN_PLACE, local.data(), detail::checked_count(local.size()),
                                         detail::mpi_type<T>(), MPI_SUM, comm, &req),
                          "MPI_Iallreduce");
        detail::finish(req, comm, what, start);
        detail::count_traffic(detail::collective::all_reduce, local.size() * sizeof(T),
                              static_cast<std::uint64_t>(s.comms()->sizes[a]));
      }
    using Keep = typename detail::filter<detail::keep_splits, std::tuple<Ps...>>::type;
    return detail::make_result<Tn, Keep>(std::move(local), s.comms());
  }
}

/// The argument already reported a compile-time error (e.g. a partial sum
/// plus a full value): pass it on, so that the mistake stays one error.
inline invalid_expression all_reduce(invalid_expression) { return {}; }
template <dimension D>
invalid_expression all_gather(invalid_expression) {
  return {};
}
template <dimension D>
invalid_expression reduce_scatter(invalid_expression) {
  return {};
}

namespace detail {
template <class D>
struct split_of_dim {
  template <class P>
  struct match : std::bool_constant<is_split_v<P> && P::dim::name.view() == D::name.view()> {};
};
template <class D>
struct not_split_of_dim {
  template <class P>
  struct keep : std::bool_constant<!(is_split_v<P> && P::dim::name.view() == D::name.view())> {};
};
}  // namespace detail

/// Dim D whole again on every rank: MPI_Allgather of the blocks along the
/// axis D is split over. Compile error if D is not split.
template <dimension D, class T, dimension... Ds, class... Ps>
auto all_gather(sharded<tensor<T, Ds...>, Ps...> s) {
  using Match = typename detail::filter<detail::split_of_dim<D>::template match, std::tuple<Ps...>>::type;
  if constexpr (std::tuple_size_v<Match> == 0) {
    dimsum::detail::report<collective_has_nothing_to_do<diagnostic_name_t<D>, op_all_gather>>();
    return invalid_expression{};
  } else {
    using A = typename std::tuple_element_t<0, Match>::mesh_axis;
    using Tn = tensor<T, Ds...>;
    const auto& c = *s.comms();
    MPI_Comm comm = c.axis_comms[c.axis_index(A::name.view())];
    const auto parts = static_cast<std::size_t>(c.sizes[c.axis_index(A::name.view())]);
    const Tn& local = s.local();
    std::vector<T> recv(local.size() * parts);
    const std::string what = detail::over_axis("all_gather", A::name.view());
    const auto start = detail::clock::now();
    detail::arrive_with(c, comm, what, detail::code_all_gather, local, start);
    MPI_Request req = MPI_REQUEST_NULL;
    detail::check_mpi(MPI_Iallgather(local.data(), detail::checked_count(local.size()), detail::mpi_type<T>(), recv.data(),
                                     detail::checked_count(local.size()), detail::mpi_type<T>(), comm, &req),
                      "MPI_Iallgather");
    detail::finish(req, comm, what, start);
    detail::count_traffic(detail::collective::all_gather, local.size() * sizeof(T), parts);
    constexpr std::size_t d = index_of<dim_list<Ds...>>(D::name.view());
    auto ext = local.extents();
    const std::size_t chunk = ext[d];
    auto full_ext = ext;
    full_ext[d] = chunk * parts;
    Tn full = Tn::from_extents(full_ext);
    const auto fs = full.strides();
    const auto ls = local.strides();
    for (std::size_t r = 0; r < parts; ++r) {
      tensor_view<const T, Ds...> block(recv.data() + r * local.size(), ext, ls);
      block.eval_to(strided<T, sizeof...(Ds)>{full.data() + static_cast<std::ptrdiff_t>(r * chunk) * fs[d], ext, fs});
    }
    using Keep = typename detail::filter<detail::not_split_of_dim<D>::template keep, std::tuple<Ps...>>::type;
    return detail::make_result<Tn, Keep>(std::move(full), s.comms());
  }
}

/// The full value of a partial sum, split over dim D on the partial's axis:
/// MPI_Reduce_scatter_block (each rank receives the sum of its block of D).
/// Needs exactly one partial and D not split; D's extent divides by the
/// axis size (`shape_error` otherwise).
template <dimension D, class T, dimension... Ds, class... Ps>
auto reduce_scatter(sharded<tensor<T, Ds...>, Ps...> s) {
  using Parts = typename detail::filter<detail::keep_partials, std::tuple<Ps...>>::type;
  using Match = typename detail::filter<detail::split_of_dim<D>::template match, std::tuple<Ps...>>::type;
  if constexpr (std::tuple_size_v<Parts> != 1 || std::tuple_size_v<Match> != 0 || !contains_v<dim_list<Ds...>, D>) {
    dimsum::detail::report<collective_has_nothing_to_do<diagnostic_name_t<D>, op_reduce_scatter>>();
    return invalid_expression{};
  } else {
    using P = std::tuple_element_t<0, Parts>;
    using A = typename P::mesh_axis;
    using Tn = tensor<T, Ds...>;
    const auto& c = *s.comms();
    MPI_Comm comm = c.axis_comms[c.axis_index(A::name.view())];
    const auto parts = static_cast<std::size_t>(c.sizes[c.axis_index(A::name.view())]);
    const int coord = c.coords[c.axis_index(A::name.view())];
    const Tn& local = s.local();
    const std::string what = detail::over_axis("reduce_scatter", A::name.view());
    const auto start = detail::clock::now();
    detail::arrive_with(c, comm, what, detail::code_reduce_scatter, local, start);
    constexpr std::size_t d = index_of<dim_list<Ds...>>(D::name.view());
    const std::size_t n = local.extents()[d];
    if (n % parts != 0)
      throw shape_error("reduce_scatter: dim '" + std::string(D::name.view()) + "' of extent " + std::to_string(n) +
                        " does not split evenly over mesh axis '" + std::string(A::name.view()) + "' of size " +
                        std::to_string(parts));
    const std::size_t chunk = n / parts;
    auto block_ext = local.extents();
    block_ext[d] = chunk;
    Tn block = Tn::from_extents(block_ext);
    std::vector<T> send(local.size());
    for (std::size_t r = 0; r < parts; ++r) {
      const Tn piece = slice<D>(local, r * chunk, (r + 1) * chunk);
      std::copy(piece.data(), piece.data() + piece.size(), send.begin() + static_cast<std::ptrdiff_t>(r * block.size()));
    }
    MPI_Request req = MPI_REQUEST_NULL;
    detail::check_mpi(MPI_Ireduce_scatter_block(send.data(), block.data(), detail::checked_count(block.size()),
                                                detail::mpi_type<T>(), MPI_SUM, comm, &req),
                      "MPI_Ireduce_scatter_block");
    detail::finish(req, comm, what, start);
    detail::count_traffic(detail::collective::reduce_scatter, send.size() * sizeof(T), parts);
    (void)coord;
    using Rest = typename detail::filter<detail::keep_splits, std::tuple<Ps...>>::type;
    using Out = detail::tuple_cat_t<Rest, std::tuple<split<D, A>>>;
    return detail::make_result<Tn, Out>(std::move(block), s.comms());
  }
}

// ------------------------------------------------------------- operations

namespace detail {
/// The output placements of a contraction with output dims Out over
/// operands Os (consistency already checked): every split whose dim is in
/// Out; a partial over the axis of every split dim that is summed away;
/// the operands' partials.
template <class Out, class All>
struct contraction_placements;
template <class Out, class... Ps>
struct contraction_placements<Out, std::tuple<Ps...>> {
  template <class P>
  using one = std::conditional_t<is_split_v<P>,
                                 std::conditional_t<contains_v<Out, typename P::dim>, std::tuple<P>,
                                                    std::tuple<partial<typename P::mesh_axis, typename P::dim>>>,
                                 std::tuple<P>>;
  using type = typename dedup<std::tuple<>, tuple_cat_t<one<Ps>...>>::type;
};

/// 0 fine; otherwise the index (+1) into All of a partial placement that
/// meets another partial or a split over its axis (a product of two
/// partial sums, or of a partial sum and a block: not a partial sum of the
/// product).
template <class... Os>
constexpr std::size_t partial_conflict() {
  using All = tuple_cat_t<placements_of_t<Os>...>;
  using I = placement_info<All>;
  // operand index of each placement
  std::array<std::size_t, I::size> owner{};
  std::size_t k = 0, o = 0;
  auto mark = [&]<class O>(std::type_identity<O>) {
    for (std::size_t i = 0; i < placement_info<placements_of_t<O>>::size; ++i) owner[k++] = o;
    ++o;
  };
  (mark(std::type_identity<Os>{}), ...);
  for (std::size_t i = 0; i < I::size; ++i)
    if (!I::splits[i])
      for (std::size_t j = 0; j < I::size; ++j)
        if (owner[j] != owner[i] && I::axes[j] == I::axes[i]) return i + 1;
  return 0;
}
}  // namespace detail

/// einsum over sharded (and replicated: plain) operands, run on the local
/// blocks. The result keeps each split dim of the output; a split dim that
/// is summed away leaves a `partial<axis, dim>` (which `all_reduce` or
/// `reduce_scatter` completes). Compile time: a dim placed differently in
/// two operands (`operands_shard_a_dim_inconsistently`), a partial sum
/// meeting another partial or block over its axis
/// (`partial_sum_used_as_a_full_value`), and every einsum check.
template <fixed_string Pattern, class... Os>
auto einsum(const Os&... ops) {
  constexpr auto bad = detail::find_inconsistency<Os...>();
  using All = detail::tuple_cat_t<detail::placements_of_t<Os>...>;
  if constexpr (bad.found) {
    using P = detail::all_at_t<All, detail::index_of_placement<All>(bad.dim, bad.axis)>;
    dimsum::detail::report<operands_shard_a_dim_inconsistently<diagnostic_name_t<typename P::dim>, typename P::mesh_axis>>();
    return invalid_expression{};
  } else if constexpr (constexpr std::size_t conflict = detail::partial_conflict<Os...>(); conflict != 0) {
    using P = std::tuple_element_t<conflict - 1, All>;
    dimsum::detail::report<
        partial_sum_used_as_a_full_value<diagnostic_name_t<typename P::dim>, typename P::mesh_axis, op_product_of_partial_sums>>();
    return invalid_expression{};
  } else {
    using Tn = decltype(dimsum::eval(dimsum::einsum<Pattern>(detail::local_of(ops)...)));
    using Out = typename detail::contraction_placements<dims_of_t<Tn>, All>::type;
    if constexpr (!is_invalid_v<Tn> && !detail::gradients_complete<Out, Os...>) {
      detail::report_partial_gradient<Out, Os...>::report();
      return invalid_expression{};
    } else {
      auto local = dimsum::eval(dimsum::einsum<Pattern>(detail::local_of(ops)...));
      return detail::make_result<Tn, Out>(std::move(local), detail::comms_of(ops...));
    }
  }
}

namespace detail {
template <dimension From, dimension To>
struct renamed {
  template <class P>
  struct one {
    using type = P;
  };
  template <axis A>
  struct one<split<From, A>> {
    using type = split<To, A>;
  };
};
template <dimension From, dimension To, class Tuple>
struct rename_placements;
template <dimension From, dimension To, class... Ps>
struct rename_placements<From, To, std::tuple<Ps...>> {
  using type = std::tuple<typename renamed<From, To>::template one<Ps>::type...>;
};
}  // namespace detail

/// Dim From renamed To, placements included (a split of From becomes a
/// split of To).
template <dimension From, dimension To, class T, dimension... Ds, class... Ps>
auto rename(const sharded<tensor<T, Ds...>, Ps...>& s) {
  auto local = dimsum::eval(dimsum::rename<From, To>(s.local()));
  using Out = typename detail::rename_placements<From, To, std::tuple<Ps...>>::type;
  return detail::make_result<decltype(local), Out>(std::move(local), s.comms());
}

namespace detail {
/// Operations that need the full value and every element of dims Need.
template <class Op, class S, dimension... Need>
constexpr int full_value_problem() {
  using I = placement_info<placements_of_t<S>>;
  for (std::size_t i = 0; i < I::size; ++i)
    if (!I::splits[i]) return 1;
  for (std::size_t i = 0; i < I::size; ++i)
    if (I::splits[i] && ((I::dims[i] == Need::name.view()) || ...)) return 2;
  return 0;
}
/// The index in All of the first split whose dim the result (dims Out)
/// lacks, or All's size.
template <class Out, class All>
constexpr std::size_t dropped_split() {
  using I = placement_info<All>;
  for (std::size_t i = 0; i < I::size; ++i)
    if (I::splits[i] && dimsum::detail::find_name(Out::names, I::dims[i]) == dimsum::detail::npos) return i;
  return I::size;
}
template <class Tuple, dimension... Need>
constexpr std::size_t split_need_index() {
  using I = placement_info<Tuple>;
  for (std::size_t i = 0; i < I::size; ++i)
    if (I::splits[i] && ((I::dims[i] == Need::name.view()) || ...)) return i;
  return 0;
}
template <class Op, class S, dimension... Need, class F>
auto on_full_value(const S& s, F&& f) {
  using Ps = placements_of_t<S>;
  constexpr int problem = full_value_problem<Op, S, Need...>();
  if constexpr (problem == 1) {
    report_partial<Op, Ps>();
    return invalid_expression{};
  } else if constexpr (problem == 2) {
    using P = std::tuple_element_t<split_need_index<Ps, Need...>(), Ps>;
    dimsum::detail::report<operation_over_a_sharded_dim<diagnostic_name_t<typename P::dim>, typename P::mesh_axis, Op>>();
    return invalid_expression{};
  } else {
    using Local = decltype(dimsum::eval(f(s.local())));
    constexpr std::size_t dropped = dropped_split<dims_of_t<Local>, Ps>();
    if constexpr (!is_invalid_v<Local> && dropped != std::tuple_size_v<Ps>) {
      // f reduced (or renamed) a dim each rank holds only a block of
      using P = std::tuple_element_t<dropped, Ps>;
      dimsum::detail::report<operation_over_a_sharded_dim<diagnostic_name_t<typename P::dim>, typename P::mesh_axis, Op>>();
      return invalid_expression{};
    } else {
      Local local = dimsum::eval(f(s.local()));
      return make_result<Local, Ps>(std::move(local), s.comms());
    }
  }
}
}  // namespace detail

/// softmax<D> of a sharded value: local, when the value is not a partial
/// sum and D is not split (compile errors naming the dim and axis otherwise).
template <dimension D, class Tn, class... Ps>
auto softmax(const sharded<Tn, Ps...>& s) {
  return detail::on_full_value<op_softmax, sharded<Tn, Ps...>, D>(s, [](const auto& x) { return dimsum::softmax<D>(x); });
}

/// causal_mask<Q, K> of a sharded value: local, when the value is not a
/// partial sum and neither Q nor K is split.
template <dimension Q, dimension K, class Tn, class... Ps, scalar V>
auto causal_mask(const sharded<Tn, Ps...>& s, V masked_value) {
  return detail::on_full_value<op_causal_mask, sharded<Tn, Ps...>, Q, K>(
      s, [&](const auto& x) { return dimsum::causal_mask<Q, K>(x, masked_value); });
}

namespace detail {
template <class S, class MaskDims>
struct masked_fill_on;
template <class S, dimension... Ms>
struct masked_fill_on<S, dim_list<Ms...>> {
  template <class M, class V>
  static auto run(const S& s, const M& mask, V value) {
    return on_full_value<op_masked_fill, S, Ms...>(s, [&](const auto& x) { return dimsum::masked_fill(x, mask, value); });
  }
};
}  // namespace detail

/// masked_fill of a sharded value with a replicated boolean mask (a plain
/// tensor, broadcast by name): local, when the value is not a partial sum
/// and none of the mask's dims is split.
template <class Tn, class... Ps, named_expression M, scalar V>
auto masked_fill(const sharded<Tn, Ps...>& s, const M& mask, V value) {
  return detail::masked_fill_on<sharded<Tn, Ps...>, dims_of_t<M>>::run(s, mask, value);
}

/// f (a function of one named expression, e.g. a nonlinearity) applied to
/// every rank's block of a value that is not a partial sum.
template <class F, class Tn, class... Ps>
auto map(F&& f, const sharded<Tn, Ps...>& s) {
  return detail::on_full_value<op_map, sharded<Tn, Ps...>>(s, std::forward<F>(f));
}

/// f applied to the local blocks of several operands (sharded values,
/// replicated tensors, scalars), e.g. a whole attention on each rank's
/// heads, which then runs as one fused pass: `dist::map([&](const auto& q,
/// const auto& k, const auto& v) { return einsum<...>(softmax<k_posn>(...), v); },
/// q, k, v)`. The result keeps every operand's split of a dim it has.
/// Compile time: operands placed inconsistently
/// (`operands_shard_a_dim_inconsistently`), a partial sum among them
/// (`partial_sum_used_as_a_full_value`, `op_map`), and a result without a
/// split dim of an operand (`operation_over_a_sharded_dim`, `op_map`: f
/// reduced over a dim each rank holds only a block of; contract it with
/// `dist::einsum`, which leaves a partial sum).
template <class F, class A, class B, class... Rest>
  requires(is_sharded_v<A> || is_sharded_v<B> || (is_sharded_v<Rest> || ...) || is_replicated_v<A> || is_replicated_v<B> ||
           (is_replicated_v<Rest> || ...))
auto map(F&& f, const A& a, const B& b, const Rest&... rest) {
  using All = detail::tuple_cat_t<detail::placements_of_t<A>, detail::placements_of_t<B>, detail::placements_of_t<Rest>...>;
  using I = detail::placement_info<All>;
  constexpr auto bad = detail::find_inconsistency<A, B, Rest...>();
  if constexpr (bad.found) {
    using P = detail::all_at_t<All, detail::index_of_placement<All>(bad.dim, bad.axis)>;
    dimsum::detail::report<operands_shard_a_dim_inconsistently<diagnostic_name_t<typename P::dim>, typename P::mesh_axis>>();
    return invalid_expression{};
  } else if constexpr (detail::first_partial<All>() != I::size) {
    detail::report_partial<op_map, All>();
    return invalid_expression{};
  } else {
    using Local = decltype(dimsum::eval(f(detail::local_of(a), detail::local_of(b), detail::local_of(rest)...)));
    using Splits = typename detail::dedup<std::tuple<>, All>::type;
    constexpr std::size_t dropped = detail::dropped_split<dims_of_t<Local>, Splits>();
    if constexpr (!is_invalid_v<Local> && dropped != std::tuple_size_v<Splits>) {
      using P = std::tuple_element_t<dropped, Splits>;
      dimsum::detail::report<operation_over_a_sharded_dim<diagnostic_name_t<typename P::dim>, typename P::mesh_axis, op_map>>();
      return invalid_expression{};
    } else if constexpr (!detail::gradients_complete<Splits, A, B, Rest...>) {
      detail::report_partial_gradient<Splits, A, B, Rest...>::report();
      return invalid_expression{};
    } else {
      Local local = dimsum::eval(f(detail::local_of(a), detail::local_of(b), detail::local_of(rest)...));
      return detail::make_result<Local, Splits>(std::move(local), detail::comms_of(a, b, rest...));
    }
  }
}

namespace detail {
enum class arith { add, sub, mul, div };
template <arith Op, class A, class B>
auto combine(const A& a, const B& b) {
  if constexpr (Op == arith::add)
    return a + b;
  else if constexpr (Op == arith::sub)
    return a - b;
  else if constexpr (Op == arith::mul)
    return a * b;
  else
    return a / b;
}
/// Sums (add, sub) need the same partials on both sides (a partial plus a
/// full value would add the full value once per rank); a product or
/// quotient may have a partial in one factor (numerator) only.
template <arith Op, class A, class B>
constexpr std::size_t arithmetic_partial_problem() {
  using PA = typename filter<keep_partials, placements_of_t<A>>::type;
  using PB = typename filter<keep_partials, placements_of_t<B>>::type;
  constexpr std::size_t na = std::tuple_size_v<PA>, nb = std::tuple_size_v<PB>;
  if constexpr (Op == arith::add || Op == arith::sub) {
    if constexpr (std::is_same_v<PA, PB>) return 0;
    else return na > 0 ? 1 : 2;
  } else if constexpr (Op == arith::mul) {
    return na > 0 && nb > 0 ? 1 : 0;
  } else {
    return nb > 0 ? 2 : 0;
  }
}
template <arith Op, class A, class B>
auto arithmetic(const A& a, const B& b) {
  using AP = placements_of_t<A>;
  using BP = placements_of_t<B>;
  constexpr auto bad = find_inconsistency<A, B>();
  constexpr std::size_t partial_problem = arithmetic_partial_problem<Op, A, B>();
  if constexpr (bad.found) {
    using All = tuple_cat_t<AP, BP>;
    using P = all_at_t<All, index_of_placement<All>(bad.dim, bad.axis)>;
    dimsum::detail::report<operands_shard_a_dim_inconsistently<diagnostic_name_t<typename P::dim>, typename P::mesh_axis>>();
    return invalid_expression{};
  } else if constexpr (partial_problem != 0) {
    using Ps = std::conditional_t<partial_problem == 1, AP, BP>;
    using Op2 = std::conditional_t<Op == arith::add || Op == arith::sub, op_add_full_value, op_product_of_partial_sums>;
    report_partial<Op2, Ps>();
    return invalid_expression{};
  } else if constexpr (!gradients_complete<typename dedup<std::tuple<>, tuple_cat_t<AP, BP>>::type, A, B>) {
    report_partial_gradient<typename dedup<std::tuple<>, tuple_cat_t<AP, BP>>::type, A, B>::report();
    return invalid_expression{};
  } else {
    auto local = dimsum::eval(combine<Op>(local_of(a), local_of(b)));
    using Out = typename dedup<std::tuple<>, tuple_cat_t<AP, BP>>::type;
    return make_result<decltype(local), Out>(std::move(local), comms_of(a, b));
  }
}
template <class A, class B>
concept sharded_operands = (is_sharded_v<std::remove_cvref_t<A>> || is_sharded_v<std::remove_cvref_t<B>> ||
                            is_replicated_v<std::remove_cvref_t<A>> || is_replicated_v<std::remove_cvref_t<B>>);
}  // namespace detail

/// Element-wise arithmetic on sharded values (and replicated tensors or
/// scalars), by name as on tensors, run on the local blocks. Operands must
/// place shared dims the same way; a partial sum may be added only to a
/// partial sum over the same axes, and may be one factor of a product (or
/// the numerator of a quotient), never both.
template <class A, class B>
  requires detail::sharded_operands<A, B>
auto operator+(const A& a, const B& b) {
  return detail::arithmetic<detail::arith::add>(a, b);
}
template <class A, class B>
  requires detail::sharded_operands<A, B>
auto operator-(const A& a, const B& b) {
  return detail::arithmetic<detail::arith::sub>(a, b);
}
template <class A, class B>
  requires detail::sharded_operands<A, B>
auto operator*(const A& a, const B& b) {
  return detail::arithmetic<detail::arith::mul>(a, b);
}
template <class A, class B>
  requires detail::sharded_operands<A, B>
auto operator/(const A& a, const B& b) {
  return detail::arithmetic<detail::arith::div>(a, b);
}

/// Prints this rank's block with its placements; a partial sum is a
/// compile error (print the all_reduce'd value).
template <class Tn, class... Ps>
std::ostream& operator<<(std::ostream& os, const sharded<Tn, Ps...>& s) {
  if constexpr ((is_partial_v<Ps> || ...)) {
    detail::report_partial<op_print, std::tuple<Ps...>>();
    return os;
  } else {
    return os << "rank block of a sharded tensor\n" << s.local();
  }
}

}  // namespace dimsum::dist
