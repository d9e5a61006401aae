#pragma once
/// \file
/// `dist::gradient_reducer<A>`: data-parallel gradient averaging that
/// overlaps with the backward pass, as PyTorch's DistributedDataParallel
/// does. The module's parameters are grouped into buckets of about
/// `bucket_bytes` (in reverse declaration order, the order in which
/// backward usually finishes them); as soon as backward has finished every
/// gradient of a bucket, the bucket's all-reduce over mesh axis A starts
/// (MPI's non-blocking all-reduce), while backward computes the rest.
/// `finish()` waits for them (against `dist::deadline()`) and writes each
/// parameter's average into its `grad`: the same gradients as
/// `dist::average_gradients<A>(mesh, module)`.
///
///     dist::gradient_reducer<data> reducer(mesh, model);
///     for (...) {
///       nn::zero_grad(model);
///       grad::tape t;
///       reducer.attach(t);                 // before backward
///       t.backward(loss(t, model, x, y));
///       reducer.finish();                  // every rank's gradients averaged
///       opt.step(model);
///     }

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <dimsum/distributed/data_parallel.hpp>
#include <dimsum/distributed/mesh.hpp>
#include <dimsum/grad/tape.hpp>
#include <dimsum/nn/module.hpp>

namespace dimsum::dist {

namespace detail {

/// One parameter as the reducer sees it: its gradient's address (what the
/// tape reports), its element count, and how to copy its gradient out to
/// and the average back from a bucket buffer of float or double.
struct reduced_parameter {
  const void* grad = nullptr;
  std::size_t size = 0;
  bool wide = false;  // reduced in double (any value type but float)
  std::function<bool()> requires_grad;
  std::function<void(void* dst)> copy_out;
  std::function<void(const void* src, double parts)> copy_in;
};

/// A bucket: consecutive parameters of one buffer type.
struct gradient_bucket {
  std::vector<std::size_t> params;
  std::size_t elements = 0;
  bool wide = false;
  std::vector<float> f;
  std::vector<double> d;
  std::size_t waiting = 0;  // parameters whose gradient backward has not finished
  bool started = false;
  MPI_Request req = MPI_REQUEST_NULL;
};

/// What the reducer and the tape's callback share.
struct reducer_state {
  std::vector<reduced_parameter> params;
  std::vector<gradient_bucket> buckets;
  std::unordered_map<const void*, std::size_t> index;  // grad address -> parameter
  std::vector<std::size_t> bucket_of;                  // parameter -> bucket
  std::size_t next = 0;                                // the next bucket to start (in order)
  std::size_t started_in_backward = 0;
  bool in_backward = false;
  MPI_Comm comm = MPI_COMM_NULL, world = MPI_COMM_NULL;
  std::string what;
  std::uint64_t axis_size = 1;

  void start(gradient_bucket& b) {
    void* buf = nullptr;
    if (b.wide) {
      b.d.resize(b.elements);
      buf = b.d.data();
    } else {
      b.f.resize(b.elements);
      buf = b.f.data();
    }
    std::size_t at = 0;
    for (std::size_t p : b.params) {
      auto& rp = params[p];
      rp.copy_out(b.wide ? static_cast<void*>(b.d.data() + at) : static_cast<void*>(b.f.data() + at));
      at += rp.size;
    }
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, buf, checked_count(b.elements), b.wide ? MPI_DOUBLE : MPI_FLOAT, MPI_SUM, comm,
                             &b.req),
              "MPI_Iallreduce (gradient bucket)");
    count_traffic(collective::all_reduce, b.elements * (b.wide ? sizeof(double) : sizeof(float)), axis_size);
    b.started = true;
    if (in_backward) ++started_in_backward;
  }
  /// Starts the buckets that are ready, in bucket order (every rank starts
  /// the same all-reduces in the same order, as MPI requires), and lets MPI
  /// progress the ones under way.
  void start_ready() {
    while (next < buckets.size() && buckets[next].waiting == 0) start(buckets[next++]);
    progress();
  }
  void progress() {
    for (std::size_t i = 0; i < next; ++i) {
      int done = 0;
      if (buckets[i].req != MPI_REQUEST_NULL) check_mpi(MPI_Test(&buckets[i].req, &done, MPI_STATUS_IGNORE), "MPI_Test");
    }
  }
  void ready(const void* g) {
    auto it = index.find(g);
    if (it == index.end()) return;  // a parameter of another module
    auto& b = buckets[bucket_of[it->second]];
    if (b.waiting > 0) --b.waiting;
    start_ready();
  }
};

}  // namespace detail

/// Averages gradients over mesh axis A while backward runs (see the file
/// comment). The module must outlive the reducer and keep its parameters
/// where they are (the reducer holds their addresses). Every rank of A
/// builds it with the same module layout and calls `attach` and `finish`
/// each step; the bucket layout is compared across ranks on every
/// `attach` (one 80-byte message to and from each other rank), so modules
/// that differ are a `shape_error` on every rank, not mixed buffers.
template <axis A>
class gradient_reducer {
 public:
  static constexpr std::size_t default_bucket_bytes = std::size_t(1) << 20;

  template <axis... Axes, class M>
  gradient_reducer(const mesh<Axes...>& m, M& module, std::size_t bucket_bytes = default_bucket_bytes)
      : state_(std::make_shared<detail::reducer_state>()) {
    if constexpr (!((Axes::name.view() == A::name.view()) || ...)) {
      dimsum::detail::report<average_over_a_mesh_axis_the_mesh_lacks<A, detail::axes<Axes...>>>();
    } else {
      auto& s = *state_;
      s.comm = m.template comm<A>();
      s.world = m.comm();
      s.axis_size = static_cast<std::uint64_t>(m.template axis_size<A>());
      s.what = "gradient_reducer over mesh axis '" + std::string(A::name.view()) + "'";
      nn::for_each_parameter(module, [&](const std::string&, auto& p) {
        using P = std::remove_cvref_t<decltype(p)>;
        if constexpr (!is_frozen_parameter_v<P>) {
          using T = typename P::value_type;
          detail::reduced_parameter r;
          r.grad = &p.grad;
          r.size = p.value.size();
          r.wide = !std::is_same_v<T, float>;
          r.requires_grad = [&p] { return p.requires_grad; };
          r.copy_out = [&p](void* dst) {
            if (p.grad.extents() != p.value.extents()) p.zero_grad();
            const T* g = p.grad.data();
            if constexpr (std::is_same_v<T, float>)
              std::copy_n(g, p.grad.size(), static_cast<float*>(dst));
            else
              for (std::size_t i = 0, n = p.grad.size(); i < n; ++i) static_cast<double*>(dst)[i] = static_cast<double>(g[i]);
          };
          r.copy_in = [&p](const void* src, double parts) {
            T* g = p.grad.data();
            for (std::size_t i = 0, n = p.grad.size(); i < n; ++i) {
              if constexpr (std::is_same_v<T, float>)
                g[i] = static_cast<T>(static_cast<const float*>(src)[i] / parts);
              else
                g[i] = static_cast<T>(static_cast<const double*>(src)[i] / parts);
            }
          };
          s.params.push_back(std::move(r));
        }
      });
      // Buckets in reverse declaration order: backward finishes the last
      // layers' gradients first.
      s.bucket_of.assign(s.params.size(), 0);
      for (std::size_t k = s.params.size(); k-- > 0;) {
        const auto& p = s.params[k];
        const std::size_t bytes = p.size * (p.wide ? sizeof(double) : sizeof(float));
        if (s.buckets.empty() || s.buckets.back().wide != p.wide ||
            (s.buckets.back().elements > 0 &&
             (s.buckets.back().elements * (p.wide ? sizeof(double) : sizeof(float)) + bytes > bucket_bytes))) {
          s.buckets.emplace_back();
          s.buckets.back().wide = p.wide;
        }
        s.buckets.back().params.push_back(k);
        s.buckets.back().elements += p.size;
        s.bucket_of[k] = s.buckets.size() - 1;
      }
      for (std::size_t k = 0; k < s.params.size(); ++k) s.index.emplace(s.params[k].grad, k);
    }
  }

  gradient_reducer(const gradient_reducer&) = delete;
  gradient_reducer& operator=(const gradient_reducer&) = delete;

  /// Prepares a step on tape `t` (call before `t.backward`): checks that
  /// every rank of A has the same buckets, then asks the tape to report
  /// each finished parameter gradient, which starts its bucket's
  /// all-reduce once the bucket is complete (buckets start in order, so a
  /// parameter the step does not use holds the buckets after it until
  /// `finish`). A parameter with `requires_grad == false` counts as
  /// finished from the start.
  void attach(grad::tape& t) {
    auto& s = *state_;
    if (s.next != 0) throw dist_error(s.what + ": attach before the previous step's finish()");
    check_layout("attach");
    for (auto& b : s.buckets) {
      b.waiting = 0;
      b.started = false;
      for (std::size_t p : b.params)
        if (s.params[p].requires_grad()) ++b.waiting;
    }
    s.started_in_backward = 0;
    s.in_backward = true;
    std::weak_ptr<detail::reducer_state> w = state_;
    t.on_parameter_gradient([w](const void* g) {
      if (auto st = w.lock(); st && st->in_backward) st->ready(g);
    });
    s.start_ready();
  }

  /// Starts the buckets not yet started, waits for every all-reduce (up to
  /// `dist::deadline()`, then `dist_error` naming the axis and the time
  /// waited) and replaces each parameter's gradient by its average over A.
  /// Without `attach` it reduces every bucket now, as `average_gradients`.
  /// Returns the bytes this rank handed to MPI.
  std::size_t finish() {
    auto& s = *state_;
    const auto start = detail::clock::now();
    if (s.next == 0 && !s.in_backward) check_layout("finish");
    s.in_backward = false;
    for (; s.next < s.buckets.size(); ++s.next) s.start(s.buckets[s.next]);
    std::vector<MPI_Request> reqs;
    for (auto& b : s.buckets) reqs.push_back(b.req);
    if (!detail::wait_all(reqs, start)) {
      detail::abandon(reqs);
      for (auto& b : s.buckets) b.req = MPI_REQUEST_NULL;
      s.next = 0;
      throw dist_error(s.what + ": not complete after " + detail::seconds_text(detail::clock::now() - start) +
                       " (deadline " + detail::seconds_text(deadline()) + ") on an axis of " +
                       std::to_string(s.axis_size) + " ranks");
    }
    std::size_t bytes = 0;
    const double parts = static_cast<double>(s.axis_size);
    for (auto& b : s.buckets) {
      b.req = MPI_REQUEST_NULL;
      std::size_t at = 0;
      for (std::size_t p : b.params) {
        s.params[p].copy_in(b.wide ? static_cast<const void*>(b.d.data() + at) : static_cast<const void*>(b.f.data() + at),
                            parts);
        at += s.params[p].size;
      }
      bytes += b.elements * (b.wide ? sizeof(double) : sizeof(float));
    }
    s.next = 0;
    return bytes;
  }

  /// The number of buckets.
  std::size_t buckets() const { return state_->buckets.size(); }
  /// The parameters (dotted-name order reversed) of bucket i, as indices
  /// into the module's parameters in `nn::for_each_parameter` order.
  const std::vector<std::size_t>& bucket_parameters(std::size_t i) const { return state_->buckets.at(i).params; }
  /// How many buckets of the last step started during backward (the rest
  /// started in `finish`): the overlap achieved.
  std::size_t started_during_backward() const { return state_->started_in_backward; }

 private:
  void check_layout(const char* call) {
    auto& s = *state_;
    std::vector<std::uint64_t> ext;
    std::vector<std::string> names;
    for (std::size_t i = 0; i < s.buckets.size(); ++i) {
      ext.push_back(s.buckets[i].elements);
      names.push_back("gradient elements of bucket " + std::to_string(i));
    }
    ext.insert(ext.begin(), s.buckets.size());
    names.insert(names.begin(), "number of buckets");
    std::vector<std::string_view> views(names.begin(), names.end());
    detail::arrive(s.comm, s.world, s.what + " (" + call + ")", detail::code_average_gradients, ext, views,
                   detail::clock::now());
  }

  std::shared_ptr<detail::reducer_state> state_;
};

}  // namespace dimsum::dist
