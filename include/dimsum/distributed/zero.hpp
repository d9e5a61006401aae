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
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <boost/hana.hpp>

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
  flat_block<T> mine;
  optim::adamw opt;
  explicit zero_part(const optim::adamw_options& o) : opt(o) {}
};
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
    nn::for_each_parameter(module, [&](const std::string&, auto& p) {
      auto& part = this->part_of(p);
      part.values.insert(part.values.end(), p.value.data(), p.value.data() + p.value.size());
      part.grads.insert(part.grads.end(), p.grad.data(), p.grad.data() + p.grad.size());
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
    nn::for_each_parameter(module, [&](const std::string&, auto& p) {
      using T = typename std::remove_cvref_t<decltype(p.value)>::value_type;
      const std::vector<T>& src = this->part_of(p).values;
      std::size_t& i = std::is_same_v<T, float> ? fi : di;
      std::copy(src.begin() + static_cast<std::ptrdiff_t>(i), src.begin() + static_cast<std::ptrdiff_t>(i + p.value.size()),
                p.value.data());
      i += p.value.size();
    });
  }

 private:
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
    part.opt.step(part.mine);
    detail::check_mpi(MPI_Iallgather(mine.value.data(), detail::checked_count(chunk), type, part.values.data(),
                                     detail::checked_count(chunk), type, comm, &req),
                      "MPI_Iallgather (parameters)");
    detail::finish(req, comm, what, start);
    detail::count_traffic(detail::collective::all_gather, chunk * sizeof(T), p);
  }

  detail::zero_part<float> f_;
  detail::zero_part<double> d_;
};

}  // namespace dimsum::dist
