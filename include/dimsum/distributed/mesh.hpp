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
#include <cstddef>
#include <memory>
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

/// An error of the distributed layer that every rank sees (an MPI call that
/// failed, a mesh that does not fit the communicator).
struct dist_error : error {
  using error::error;
};

namespace detail {
/// Throws dist_error naming the MPI call when rc is not MPI_SUCCESS (the
/// mesh's communicators return errors instead of aborting).
inline void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw dist_error(std::string("dimsum::dist: ") + what + " failed: " + std::string(text, static_cast<std::size_t>(len)));
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
    throw dist_error("dimsum::dist: the mesh has no axis '" + std::string(name) + "'");
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
      if (dims[i] < 1) throw dist_error("dimsum::dist: mesh axis '" + std::string(names[i]) + "' needs a size >= 1");
      product *= dims[i];
      layout += (i ? " x " : "") + std::string(names[i]) + "=" + std::to_string(dims[i]);
    }
    if (product != world)
      throw dist_error("dimsum::dist: mesh " + layout + " needs " + std::to_string(product) +
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
