#pragma once
/// \file
/// Data parallelism: each rank of a mesh axis trains on its block of the
/// batch, and `average_gradients<data>(mesh, model)` makes every rank's
/// gradients the average over the axis before the optimizer step (what
/// PyTorch's DistributedDataParallel does during backward).

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <string>
#include <type_traits>
#include <vector>

#include <dimsum/distributed/mesh.hpp>
#include <dimsum/distributed/sharded.hpp>
#include <dimsum/nn/module.hpp>

namespace dimsum::dist {

/// Checker: averaging over a mesh axis that the mesh lacks.
template <class Axis, class MeshAxes>
struct average_over_a_mesh_axis_the_mesh_lacks {
  static_assert(dimsum::detail::always_false<Axis, MeshAxes>,
                "dimsum: average_gradients over a mesh axis that the mesh does not have");
};

/// Replaces the gradient of every parameter of `module` (found by
/// nn::for_each_parameter, nested modules included) by its average over
/// mesh axis A: one all-reduce of all gradients packed into one buffer
/// per value type, then a division by A's size. With each rank's loss the
/// mean over its equal block of the batch, the result is the gradient of
/// the mean loss over the whole batch, so the optimizer steps agree on
/// every rank. Collective over A. Returns the number of bytes this rank
/// handed to MPI (also counted in `traffic_counter()`). Compile time: A is one of the mesh's axes.
template <axis A, axis... Axes, class M>
std::size_t average_gradients(const mesh<Axes...>& m, M& module) {
  if constexpr (!((Axes::name.view() == A::name.view()) || ...)) {
    dimsum::detail::report<average_over_a_mesh_axis_the_mesh_lacks<A, detail::axes<Axes...>>>();
    return 0;
  } else {
    std::vector<float> f;
    std::vector<double> d;
    auto gather = [&](const std::string&, auto& p) {
      if constexpr (!is_frozen_parameter_v<decltype(p)>) {  // a frozen_parameter has no gradient
        using T = typename std::remove_cvref_t<decltype(p.grad)>::value_type;
        auto& buf = [&]() -> auto& {
          if constexpr (std::is_same_v<T, float>) return f;
          else return d;
        }();
        buf.insert(buf.end(), p.grad.data(), p.grad.data() + p.grad.size());
      }
    };
    nn::for_each_parameter(module, gather);
    MPI_Comm comm = m.template comm<A>();
    const auto parts = static_cast<double>(m.template axis_size<A>());
    // every rank must hand over as many gradient elements of each type
    const std::string what = "average_gradients over mesh axis '" + std::string(A::name.view()) + "'";
    const auto start = detail::clock::now();
    const std::array<std::uint64_t, 2> counts{f.size(), d.size()};
    const std::array<std::string_view, 2> count_names{"float gradient elements", "double gradient elements"};
    detail::arrive(comm, m.comm(), what, detail::code_average_gradients, counts, count_names, start);
    auto reduce = [&]<class T>(std::vector<T>& buf, MPI_Datatype type) {
      if (buf.empty()) return;
      MPI_Request req = MPI_REQUEST_NULL;
      detail::check_mpi(MPI_Iallreduce(MPI_IN_PLACE, buf.data(), detail::checked_count(buf.size()), type, MPI_SUM, comm, &req),
                        "MPI_Iallreduce (gradients)");
      detail::finish(req, comm, what, start);
      detail::count_traffic(detail::collective::all_reduce, buf.size() * sizeof(T),
                            static_cast<std::uint64_t>(m.template axis_size<A>()));
    };
    reduce(f, MPI_FLOAT);
    reduce(d, MPI_DOUBLE);
    std::size_t fi = 0, di = 0;
    auto scatter = [&](const std::string&, auto& p) {
      if constexpr (!is_frozen_parameter_v<decltype(p)>) {
        using T = typename std::remove_cvref_t<decltype(p.grad)>::value_type;
        T* g = p.grad.data();
        for (std::size_t i = 0, n = p.grad.size(); i < n; ++i) {
          if constexpr (std::is_same_v<T, float>)
            g[i] = static_cast<T>(f[fi++] / parts);
          else
            g[i] = static_cast<T>(d[di++] / parts);
        }
      }
    };
    nn::for_each_parameter(module, scatter);
    return f.size() * sizeof(float) + d.size() * sizeof(double);
  }
}

}  // namespace dimsum::dist
