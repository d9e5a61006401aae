#pragma once
/// \file
/// A mesh of MPI ranks with named axes: `dist::mesh<data, model> m(MPI_COMM_WORLD,
/// data{2}, model{2});` lays the communicator's ranks out as a 2 x 2
/// Cartesian grid and gives each axis its own sub-communicator, over which
/// the collectives of a tensor sharded along that axis run.

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
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <thread>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <dimsum/core/diagnostics.hpp>
#include <dimsum/core/errors.hpp>
#include <dimsum/core/fixed_string.hpp>

namespace dimsum::dist {

namespace detail {
struct mesh_axis_tag {};
}  // namespace detail

/// A named mesh axis; its value is its size (number of ranks along it).
/// Declare one with DIMSUM_MESH_AXIS(model).
template <fixed_string Name>
struct mesh_axis : detail::mesh_axis_tag {
  static constexpr auto name = Name;
  int value;
  constexpr mesh_axis(int size = 1) : value(size) {}
};

/// A mesh axis type.
template <class A>
concept axis = std::is_base_of_v<detail::mesh_axis_tag, A>;

/// An error of the distributed layer (an MPI call that failed, a mesh that
/// does not fit the communicator, a collective that did not complete
/// within the deadline). `what()` is "dimsum: dist: <message>".
struct dist_error : error {
  explicit dist_error(const std::string& message) : error("dist: " + message) {}
};

namespace detail {
inline std::chrono::milliseconds& deadline_setting() {
  static std::chrono::milliseconds d{std::chrono::minutes(10)};
  return d;
}
}  // namespace detail

/// How long a rank waits in a collective of this layer for the other ranks
/// (default 10 minutes). A rank that waits longer throws `dist_error`
/// naming the collective, the ranks that did not arrive and the time
/// waited (inside `abort_on_error`, that ends the job). Set it on every
/// rank, to the same value, before the first collective.
inline void set_deadline(std::chrono::milliseconds d) {
  if (d.count() <= 0) throw dist_error("set_deadline: the deadline must be positive");
  detail::deadline_setting() = d;
}
/// The current deadline (see `set_deadline`).
inline std::chrono::milliseconds deadline() { return detail::deadline_setting(); }

namespace detail {
/// Throws dist_error naming the MPI call when rc is not MPI_SUCCESS (the
/// mesh's communicators return errors instead of aborting).
inline void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw dist_error(std::string(what) + " failed: " + std::string(text, static_cast<std::size_t>(len)));
}

using clock = std::chrono::steady_clock;

inline std::string seconds_text(clock::duration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", std::chrono::duration<double>(d).count());
  return buf;
}

/// "1", "1, 3", ... : ranks of `comm` given as ranks of the whole mesh
/// communicator `world` (what the user's m.rank() says).
inline std::string rank_list(MPI_Comm comm, MPI_Comm world, const std::vector<int>& ranks) {
  std::vector<int> out(ranks.size(), MPI_UNDEFINED);
  MPI_Group g = MPI_GROUP_NULL, w = MPI_GROUP_NULL;
  MPI_Comm_group(comm, &g);
  MPI_Comm_group(world, &w);
  MPI_Group_translate_ranks(g, static_cast<int>(ranks.size()), ranks.data(), w, out.data());
  MPI_Group_free(&g);
  MPI_Group_free(&w);
  std::string s;
  for (std::size_t i = 0; i < out.size(); ++i) s += (i ? ", " : "") + std::to_string(out[i] == MPI_UNDEFINED ? ranks[i] : out[i]);
  return s;
}

/// Polls `reqs` (MPI_Testall) until all complete or the deadline passes
/// since `start`. Each poll also drives MPI's progress, so for the first
/// 100 ms it polls between yields (as MPI's blocking calls spin); after
/// that it sleeps 100 us between polls, and 1 ms after 10 s, so a rank
/// that waits long leaves the CPU to ranks that compute. Returns false on
/// timeout (the requests are then still pending).
inline bool wait_all(std::span<MPI_Request> reqs, clock::time_point start) {
  using namespace std::chrono_literals;
  const auto limit = start + deadline_setting();
  for (;;) {
    int done = 0;
    check_mpi(MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE), "MPI_Testall");
    if (done) return true;
    const auto now = clock::now();
    if (now >= limit) return false;
    if (now - start < 100ms)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(now - start < 10s ? 100us : 1ms);
  }
}

/// Cancels and frees pending requests after a timeout (the operation is
/// abandoned; the caller throws).
inline void abandon(std::span<MPI_Request> reqs) {
  for (MPI_Request& r : reqs)
    if (r != MPI_REQUEST_NULL) {
      MPI_Cancel(&r);
      MPI_Request_free(&r);
    }
}

/// Waits for one non-blocking collective started at `start`; throws
/// dist_error naming `what` and the time waited after the deadline.
inline void finish(MPI_Request req, MPI_Comm comm, const std::string& what, clock::time_point start) {
  if (wait_all(std::span<MPI_Request>(&req, 1), start)) return;
  int size = 0;
  MPI_Comm_size(comm, &size);
  abandon(std::span<MPI_Request>(&req, 1));
  throw dist_error(what + ": not complete after " + seconds_text(clock::now() - start) + " (deadline " +
                   seconds_text(deadline_setting()) + ") on an axis of " + std::to_string(size) + " ranks");
}

/// Codes of this layer's collectives in the arrival check (`arrive`):
/// ranks in different collectives are told apart.
enum collective_code : std::uint64_t {
  code_all_reduce = 1,
  code_all_gather,
  code_reduce_scatter,
  code_shard,
  code_from_local,
  code_average_gradients,
  code_checkpoint,
  code_sharded_adamw
};

/// The tag of the arrival messages (see `arrive`); the mesh's communicators
/// carry no other point-to-point traffic.
inline constexpr int arrival_tag = 0x64696d;  // "dim"
inline constexpr std::size_t arrival_dims = 8;

/// Every rank of `comm` entering the collective `what` (numbered `op`)
/// with the extents `ext` of the dims `names`: each rank sends the others
/// (op, rank count, extents) and waits for theirs, up to the deadline.
///   - a rank that has not arrived by the deadline: `dist_error` "<what>:
///     rank(s) R did not arrive within T (deadline D)", naming the ranks of
///     the mesh communicator `world`;
///   - ranks in different collectives: `dist_error` naming both;
///   - a dim whose extent differs: `shape_error` "<what>: dim 'D' has extent
///     a on rank(s) ... but b on rank(s) ..." on every rank.
/// Costs one message of 80 bytes to and from each other rank of `comm`.
inline void arrive(MPI_Comm comm, MPI_Comm world, const std::string& what, std::uint64_t op,
                   std::span<const std::uint64_t> ext, std::span<const std::string_view> names, clock::time_point start) {
  int size = 0, me = 0;
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  if (size == 1) return;
  MPI_Comm_rank(comm, &me);
  constexpr std::size_t n = 2 + arrival_dims;
  std::array<std::uint64_t, n> mine{};
  mine[0] = op;
  mine[1] = ext.size();
  // with more than 8 dims, the eighth slot holds a hash (FNV-1a) of the extents from the eighth on
  for (std::size_t i = 0; i < ext.size() && (ext.size() <= arrival_dims || i + 1 < arrival_dims); ++i) mine[2 + i] = ext[i];
  if (ext.size() > arrival_dims) {
    std::uint64_t h = 14695981039346656037ull;
    for (std::size_t i = arrival_dims - 1; i < ext.size(); ++i) h = (h ^ ext[i]) * 1099511628211ull;
    mine[2 + arrival_dims - 1] = h;
  }
  const auto P = static_cast<std::size_t>(size);
  std::vector<std::uint64_t> all(n * P);
  std::copy(mine.begin(), mine.end(), all.begin() + static_cast<std::ptrdiff_t>(n * static_cast<std::size_t>(me)));
  std::vector<MPI_Request> recvs, sends;
  std::vector<int> from;
  for (int r = 0; r < size; ++r) {
    if (r == me) continue;
    recvs.emplace_back();
    from.push_back(r);
    check_mpi(MPI_Irecv(all.data() + n * static_cast<std::size_t>(r), static_cast<int>(n), MPI_UINT64_T, r, arrival_tag,
                        comm, &recvs.back()),
              "MPI_Irecv (arrival)");
    sends.emplace_back();
    check_mpi(MPI_Isend(mine.data(), static_cast<int>(n), MPI_UINT64_T, r, arrival_tag, comm, &sends.back()),
              "MPI_Isend (arrival)");
  }
  if (!wait_all(recvs, start)) {
    std::vector<int> missing;
    for (std::size_t i = 0; i < recvs.size(); ++i) {
      int done = 0;
      if (recvs[i] != MPI_REQUEST_NULL) MPI_Test(&recvs[i], &done, MPI_STATUS_IGNORE);
      if (recvs[i] != MPI_REQUEST_NULL) missing.push_back(from[i]);
    }
    abandon(recvs);
    abandon(sends);
    throw dist_error(what + ": rank" + (missing.size() > 1 ? "s " : " ") + rank_list(comm, world, missing) +
                     " did not arrive within " + seconds_text(clock::now() - start) + " (deadline " +
                     seconds_text(deadline_setting()) + "; rank " + rank_list(comm, world, {me}) + " waited)");
  }
  if (!wait_all(sends, start)) {
    abandon(sends);
    throw dist_error(what + ": the arrival messages were not delivered within the deadline");
  }
  auto row = [&](int r) { return all.data() + n * static_cast<std::size_t>(r); };
  for (int r = 0; r < size; ++r)
    if (row(r)[0] != op || row(r)[1] != ext.size())
      throw dist_error(what + ": rank " + rank_list(comm, world, {r}) + " is in another collective (or one on a tensor of " +
                       std::to_string(row(r)[1]) + " dims) while rank " + rank_list(comm, world, {me}) + " is here");
  for (std::size_t d = 0; d < std::min(ext.size(), arrival_dims); ++d) {
    std::vector<int> same, other;
    for (int r = 0; r < size; ++r) (row(r)[2 + d] == row(0)[2 + d] ? same : other).push_back(r);
    if (other.empty()) continue;
    const bool folded = d + 1 == arrival_dims && ext.size() > arrival_dims;
    const std::string dim = folded ? "dims '" + std::string(names[d]) + "' and after" : "dim '" + std::string(names[d]) + "'";
    std::string text = what + ": " + dim + " has ";
    text += folded ? "other extents" : "extent " + std::to_string(row(0)[2 + d]);
    text += " on rank" + std::string(same.size() > 1 ? "s " : " ") + rank_list(comm, world, same) + " but ";
    text += folded ? "different ones" : std::to_string(row(other[0])[2 + d]);
    text += " on rank" + std::string(other.size() > 1 ? "s " : " ") + rank_list(comm, world, other) +
            " (every rank must call it with the same extents)";
    throw shape_error(text);
  }
}

/// The run-time part of a mesh, shared by every tensor sharded over it:
/// the Cartesian communicator and one sub-communicator per axis.
struct mesh_comms {
  MPI_Comm cart = MPI_COMM_NULL;
  std::vector<std::string> names;
  std::vector<MPI_Comm> axis_comms;
  std::vector<int> sizes, coords;

  mesh_comms() = default;
  mesh_comms(const mesh_comms&) = delete;
  mesh_comms& operator=(const mesh_comms&) = delete;
  ~mesh_comms() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;  // MPI has released them
    for (MPI_Comm& c : axis_comms)
      if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
    if (cart != MPI_COMM_NULL) MPI_Comm_free(&cart);
  }
  std::size_t axis_index(std::string_view name) const {
    for (std::size_t i = 0; i < names.size(); ++i)
      if (names[i] == name) return i;
    throw dist_error("the mesh has no axis '" + std::string(name) + "'");
  }
};

template <class... Axes>
constexpr bool unique_axis_names() {
  constexpr std::array<std::string_view, sizeof...(Axes)> n{Axes::name.view()...};
  for (std::size_t i = 0; i < n.size(); ++i)
    for (std::size_t j = i + 1; j < n.size(); ++j)
      if (n[i] == n[j]) return false;
  return true;
}
}  // namespace detail

/// Checker: a mesh names one axis twice.
template <class... Axes>
struct mesh_names_an_axis_twice {
  static_assert(dimsum::detail::always_false<Axes...>, "dimsum: a mesh names an axis twice");
};

namespace detail {
template <bool Unique, class... Axes>
struct mesh_axes_checked {};
template <class... Axes>
struct mesh_axes_checked<false, Axes...> : mesh_names_an_axis_twice<Axes...> {};
}  // namespace detail

/// The ranks of a communicator laid out as a grid with named axes, the
/// first axis slowest (rank = coordinates in row-major order). Construct
/// it collectively on every rank of `comm`, with each axis's size; their
/// product must be the communicator's size (`dist_error` otherwise, on
/// every rank). The mesh's communicators return MPI errors as `dist_error`
/// instead of aborting. Copies share the communicators.
template <axis... Axes>
class mesh {
  // A member type is instantiated with the class: a repeated axis fails here, once.
  using names_check_ =
      std::integral_constant<std::size_t, sizeof(detail::mesh_axes_checked<detail::unique_axis_names<Axes...>(), Axes...>)>;

 public:
  static constexpr std::size_t rank_count_axes = sizeof...(Axes);

  explicit mesh(MPI_Comm comm, Axes... sizes) : comms_(std::make_shared<detail::mesh_comms>()) {
    int world = 0;
    detail::check_mpi(MPI_Comm_size(comm, &world), "MPI_Comm_size");
    std::vector<int> dims{sizes.value...};
    long long product = 1;
    std::string layout;
    const std::array<std::string_view, sizeof...(Axes)> names{Axes::name.view()...};
    for (std::size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] < 1) throw dist_error("mesh axis '" + std::string(names[i]) + "' needs a size >= 1");
      product *= dims[i];
      layout += (i ? " x " : "") + std::string(names[i]) + "=" + std::to_string(dims[i]);
    }
    if (product != world)
      throw dist_error("mesh " + layout + " needs " + std::to_string(product) +
                       " ranks, the communicator has " + std::to_string(world));
    std::vector<int> periods(dims.size(), 0);
    detail::check_mpi(MPI_Cart_create(comm, static_cast<int>(dims.size()), dims.data(), periods.data(), 0, &comms_->cart),
                      "MPI_Cart_create");
    MPI_Comm_set_errhandler(comms_->cart, MPI_ERRORS_RETURN);
    int me = 0;
    MPI_Comm_rank(comms_->cart, &me);
    comms_->coords.assign(dims.size(), 0);
    detail::check_mpi(MPI_Cart_coords(comms_->cart, me, static_cast<int>(dims.size()), comms_->coords.data()),
                      "MPI_Cart_coords");
    comms_->sizes = dims;
    for (std::size_t i = 0; i < dims.size(); ++i) {
      std::vector<int> keep(dims.size(), 0);
      keep[i] = 1;
      MPI_Comm sub = MPI_COMM_NULL;
      detail::check_mpi(MPI_Cart_sub(comms_->cart, keep.data(), &sub), "MPI_Cart_sub");
      MPI_Comm_set_errhandler(sub, MPI_ERRORS_RETURN);
      comms_->names.emplace_back(names[i]);
      comms_->axis_comms.push_back(sub);
    }
  }

  /// This rank's number in the mesh, and the number of ranks.
  int rank() const {
    int r = 0;
    MPI_Comm_rank(comms_->cart, &r);
    return r;
  }
  int size() const {
    int s = 0;
    MPI_Comm_size(comms_->cart, &s);
    return s;
  }
  /// This rank's coordinate along axis A, and A's size.
  template <axis A>
  int coord() const {
    return comms_->coords[comms_->axis_index(A::name.view())];
  }
  template <axis A>
  int axis_size() const {
    return comms_->sizes[comms_->axis_index(A::name.view())];
  }
  /// The communicator of the ranks that differ from this one only along A.
  template <axis A>
  MPI_Comm comm() const {
    return comms_->axis_comms[comms_->axis_index(A::name.view())];
  }
  /// The Cartesian communicator of the whole mesh.
  MPI_Comm comm() const { return comms_->cart; }

  /// The shared run-time state (for sharded tensors).
  const std::shared_ptr<detail::mesh_comms>& comms() const { return comms_; }

 private:
  std::shared_ptr<detail::mesh_comms> comms_;
};

}  // namespace dimsum::dist

/// Declares a mesh axis tag type: DIMSUM_MESH_AXIS(model); `model{2}` is an
/// axis of size 2 when building a mesh.
#define DIMSUM_MESH_AXIS(id)                                 \
  struct id : ::dimsum::dist::mesh_axis<#id> {                \
    using ::dimsum::dist::mesh_axis<#id>::mesh_axis;          \
  }
