#pragma once
/// \file
/// Sequence (context) parallelism: attention over positions split over a
/// mesh axis, by ring attention. Each rank of axis A holds a contiguous
/// block of the query positions of q and of the key positions of k and v;
/// the K/V blocks travel around the ring (`ring_shift`), each rank runs the
/// fused attention kernel on its queries against the block in hand while
/// the next one is on its way, and merges the partial outputs by their
/// log-sum-exp. Causal and sliding-window attention skip the block pairs
/// the mask empties. Backward (FlashAttention-2 style, from the global
/// output and log-sum-exp) sends the partial gradients of K and V around
/// the ring behind their blocks, back to their owner.
///
///     auto o = dist::ring_attention<d_head>(q, k, v, {.scale = 0.125, .causal = true});
///
/// q: sharded<tensor<T, ..., q_posn, ..., d_head>, split<q_posn, seq>>,
/// k: sharded<tensor<T, ..., k_posn, ..., d_head>, split<k_posn, seq>>,
/// v: sharded<tensor<T, ..., k_posn, ..., d_v>, split<k_posn, seq>>;
/// the result has q's dims with d_head replaced by v's value dim, split
/// like q. On sharded vars it records one node whose backward is the ring
/// backward.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <dimsum/core/diagnostics.hpp>
#include <dimsum/core/errors.hpp>
#include <dimsum/distributed/mesh.hpp>
#include <dimsum/distributed/ring_shift.hpp>
#include <dimsum/distributed/sharded.hpp>
#include <dimsum/distributed/sharded_var.hpp>
#include <dimsum/grad/grad.hpp>
#include <dimsum/kernels/attention.hpp>
#include <dimsum/kernels/attention_backward.hpp>
#include <dimsum/tensor/tensor.hpp>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace dimsum::dist {

/// What `ring_attention` computes: softmax over the keys of `scale` times
/// the scores q·k, then the weighted sum of v. `causal`: query position i
/// sees the keys at positions j <= i. `window` (> 0, implies causal): the
/// keys i - window < j <= i (the query itself and the window - 1 before
/// it, as `window_mask`). Positions are global: a rank's block starts at
/// its coordinate along the axis times the block length.
struct ring_attention_options {
  double scale = 1.0;
  bool causal = false;
  std::size_t window = 0;
};

/// Checker: ring_attention's operands do not have the dims it needs.
template <class QDims, class KDims, class VDims, class HeadDim>
struct ring_attention_operands_do_not_fit {
  static_assert(dimsum::detail::always_false<QDims, KDims, VDims, HeadDim>,
                "dimsum: dist::ring_attention<D>(q, k, v) needs q with (batch dims..., its query position, D), k with "
                "(the same batch dims, its key position, D) and v with (the same batch dims, the key position, one "
                "value dim), in any order");
};
/// Checker: ring_attention's operands are not split along their positions
/// over one mesh axis.
template <class QPlacements, class KPlacements, class VPlacements>
struct ring_attention_needs_position_splits {
  static_assert(dimsum::detail::always_false<QPlacements, KPlacements, VPlacements>,
                "dimsum: dist::ring_attention needs q split over a mesh axis along its query position dim "
                "(split<q_posn, A>) and k and v split over the same axis along their key position dim "
                "(split<k_posn, A>), and no other placement");
};

namespace detail {

inline constexpr std::uint64_t code_ring_attention = 101;

/// The dims of ring attention's operands: q (B..., Q, Dk), k (B..., K, Dk),
/// v (B..., K, Dv), each in any order.
template <class QL, class KL, class VL, class Q, class K, class Dk>
struct ring_dims {
  static constexpr std::size_t nb = QL::size >= 2 ? QL::size - 2 : 0;
  static constexpr std::array<std::string_view, nb> batch = [] {
    std::array<std::string_view, nb> b{};
    std::size_t n = 0;
    for (auto name : QL::names)
      if (name != Q::name.view() && name != Dk::name.view() && n < nb) b[n++] = name;
    return b;
  }();
  static constexpr bool has(std::span<const std::string_view> names, std::string_view n) {
    for (auto x : names)
      if (x == n) return true;
    return false;
  }
  /// The index in VL of the value dim (the one that is neither K nor a batch dim).
  static constexpr std::size_t dv_index = [] {
    std::size_t found = VL::size;
    for (std::size_t i = 0; i < VL::size; ++i)
      if (VL::names[i] != K::name.view() && !has(batch, VL::names[i])) found = found == VL::size ? i : VL::size + 1;
    return found;
  }();
  static constexpr bool ok = [] {
    if (QL::size < 2 || !has(QL::names, Dk::name.view()) || Q::name.view() == Dk::name.view()) return false;
    if (KL::size != nb + 2 || VL::size != nb + 2) return false;
    if (!has(KL::names, K::name.view()) || !has(KL::names, Dk::name.view()) || !has(VL::names, K::name.view()))
      return false;
    for (auto b : batch)
      if (!has(KL::names, b) || !has(VL::names, b)) return false;
    return dv_index < VL::size && nb <= kernels::max_group_rank;
  }();
};

template <class D, class Dk, class Dv>
using replace_head = std::conditional_t<D::name.view() == Dk::name.view(), Dv, D>;

template <std::size_t N>
std::array<std::ptrdiff_t, N> strides_by_name(const auto& names_of_tensor, const auto& strides,
                                              const std::array<std::string_view, N>& want) {
  std::array<std::ptrdiff_t, N> s{};
  for (std::size_t i = 0; i < N; ++i) s[i] = strides[dimsum::detail::find_name(names_of_tensor, want[i])];
  return s;
}
template <class Tn>
std::size_t extent_by_name(const Tn& t, std::string_view n) {
  return t.extents()[dimsum::detail::find_name(dims_of_t<Tn>::names, n)];
}

/// One rank's share of a ring attention: the kernel's arguments for its
/// blocks (pointers to K and V set per block pair), the axis, the options.
template <class T>
struct ring_job {
  kernels::attention_args<T> args;
  std::size_t k_size = 0, v_size = 0, out_size = 0;
  std::size_t rows = 0;  // batch size x query rows: the lse's length
  MPI_Comm comm = MPI_COMM_NULL, world = MPI_COMM_NULL;
  int me = 0, size = 1;
  std::string what;
  ring_attention_options opt;
  std::array<std::uint64_t, 2 + shift_header_dims> header{};
  std::vector<std::string> names;

  /// Whether block pair (query block qi, key block kj) has no kept score.
  bool skipped(int qi, int kj) const {
    if (!opt.causal && opt.window == 0) return false;
    if (kj > qi) return true;  // keys all in the future
    if (opt.window == 0) return false;
    const auto n = static_cast<long long>(args.nq);
    const long long nearest = static_cast<long long>(qi - kj) * n - (n - 1);  // smallest query - key distance
    return nearest >= static_cast<long long>(opt.window);
  }
  /// The score stages of block pair (qi, kj): the scale, then the causal or
  /// window mask at the offset of the blocks' positions.
  void stages_for(kernels::attention_args<T>& a, int qi, int kj) const {
    a.n_stages = 0;
    kernels::score_stage<T> scale;
    scale.op = kernels::score_op::multiply;
    scale.value = static_cast<T>(opt.scale);
    a.stages[a.n_stages++] = scale;
    if (opt.causal || opt.window > 0) {
      kernels::score_stage<T> mask;
      mask.op = kernels::score_op::causal;
      mask.value = -std::numeric_limits<T>::infinity();
      mask.window = opt.window > 0 ? opt.window : kernels::unbounded_window;
      mask.offset = static_cast<std::size_t>(qi - kj) * args.nq;
      a.stages[a.n_stages++] = mask;
    }
  }
  transfer shift(const T* send, T* recv, std::size_t count, int channel) const {
    const auto [to, from] = ring_peers(me, size, 1);
    traffic& tr = traffic_counter();
    ++tr.calls;
    tr.payload_bytes += count * sizeof(T);
    tr.ring_bytes += count * sizeof(T);
    auto h = header;
    h[0] = code_ring_attention + static_cast<std::uint64_t>(channel);
    return transfer::start(comm, world, what, send, recv, count, mpi_type<T>(), to, from, h, names, channel);
  }

  /// Forward: out (laid out as args.out's strides describe, written) and
  /// lse (rows values, written) from q (args.q) and this rank's k and v.
  void forward(const T* k, const T* v, T* out, T* lse) const {
    const std::size_t kv = k_size + v_size;
    std::vector<T> buf[2] = {std::vector<T>(kv), std::vector<T>(size > 1 ? kv : 0)};
    std::copy(k, k + k_size, buf[0].begin());
    std::copy(v, v + v_size, buf[0].begin() + static_cast<std::ptrdiff_t>(k_size));
    std::vector<T> part(out_size), part_lse(rows);
    std::fill(out, out + out_size, T(0));
    std::fill(lse, lse + rows, -std::numeric_limits<T>::infinity());
    int cur = 0;
    for (int s = 0; s < size; ++s) {
      const int kj = (me - s + size) % size;
      transfer t;
      if (s + 1 < size) t = shift(buf[cur].data(), buf[1 - cur].data(), kv, 0);
      if (!skipped(me, kj)) {
        kernels::attention_args<T> a = args;
        stages_for(a, me, kj);
        a.k = buf[cur].data();
        a.v = buf[cur].data() + k_size;
        a.out = part.data();
        a.lse = part_lse.data();
        kernels::attention(a);
        merge(out, lse, part.data(), part_lse.data());
      }
      t.wait();
      cur = 1 - cur;
    }
  }

  /// out, lse += a partial output and its log-sum-exp (rows whose partial
  /// lse is -inf saw no key of the block and are left as they are).
  void merge(T* out, T* lse, const T* part, const T* part_lse) const {
    const std::size_t nb = args.batch_size();
    for (std::size_t bi = 0; bi < nb; ++bi) {
      const std::ptrdiff_t ob = args.batch_offset(args.out_batch, bi);
      for (std::size_t i = 0; i < args.nq; ++i) {
        const std::size_t r = bi * args.nq + i;
        const T lp = part_lse[r];
        if (lp == -std::numeric_limits<T>::infinity()) continue;
        const T la = lse[r];
        const std::ptrdiff_t o = ob + static_cast<std::ptrdiff_t>(i) * args.out_row;
        if (la == -std::numeric_limits<T>::infinity()) {
          for (std::size_t c = 0; c < args.dv; ++c)
            out[o + static_cast<std::ptrdiff_t>(c) * args.out_col] =
                part[o + static_cast<std::ptrdiff_t>(c) * args.out_col];
          lse[r] = lp;
          continue;
        }
        const double m = std::max<double>(la, lp);
        const double wa = std::exp(double(la) - m), wp = std::exp(double(lp) - m), sum = wa + wp;
        for (std::size_t c = 0; c < args.dv; ++c) {
          T& x = out[o + static_cast<std::ptrdiff_t>(c) * args.out_col];
          x = static_cast<T>((double(x) * wa + double(part[o + static_cast<std::ptrdiff_t>(c) * args.out_col]) * wp) /
                             sum);
        }
        lse[r] = static_cast<T>(m + std::log(sum));
      }
    }
  }

  /// Backward: dq (like q), dk (like k), dv (like v), written, from the
  /// global output `out` and log-sum-exp `lse` of this rank's queries and
  /// the gradient `dout` (laid out like out).
  void backward(const T* k, const T* v, const T* out, const T* lse, const T* dout, T* dq, T* dk, T* dv) const {
    const std::size_t kv = k_size + v_size;
    const std::size_t q_size = q_elements;
    std::vector<T> buf[2] = {std::vector<T>(kv), std::vector<T>(size > 1 ? kv : 0)};
    std::copy(k, k + k_size, buf[0].begin());
    std::copy(v, v + v_size, buf[0].begin() + static_cast<std::ptrdiff_t>(k_size));
    // The gradients of a K/V block: this rank's share of its own block stays
    // here (`own`); the partial sum of the other ranks' shares starts at the
    // next rank (step 1) and travels with the block, one step behind it,
    // until it comes home: p - 1 hops.
    std::vector<T> own(kv, T(0));
    std::vector<T> grads[2] = {std::vector<T>(size > 1 ? kv : 0), std::vector<T>(size > 1 ? kv : 0)};
    std::vector<T> tq(q_size), tkv(kv);
    std::fill(dq, dq + q_size, T(0));
    int cur = 0, gcur = 0;
    transfer gt;
    for (int s = 0; s < size; ++s) {
      const int kj = (me - s + size) % size;
      transfer t;
      if (s + 1 < size) t = shift(buf[cur].data(), buf[1 - cur].data(), kv, 0);
      const bool computed = !skipped(me, kj);
      if (computed) {
        kernels::attention_args<T> a = args;
        stages_for(a, me, kj);
        a.k = buf[cur].data();
        a.v = buf[cur].data() + k_size;
        a.out = const_cast<T*>(out);
        a.lse = nullptr;
        a.lse_low = nullptr;
        kernels::attention_grad_args<T> g;
        g.fwd = &a;
        g.lse = lse;
        g.dout = dout;
        g.dq = tq.data();
        g.dk = (s == 0 ? own : tkv).data();
        g.dv = (s == 0 ? own : tkv).data() + k_size;
        kernels::attention_backward(g);  // writes (does not add to) dq, dk, dv
        for (std::size_t x = 0; x < q_size; ++x) dq[x] += tq[x];
      }
      if (s >= 1) {
        if (s == 1) {
          std::fill(grads[gcur].begin(), grads[gcur].end(), T(0));
        } else {
          gt.wait();
          gcur = 1 - gcur;
        }
        if (computed)
          for (std::size_t x = 0; x < kv; ++x) grads[gcur][x] += tkv[x];
        gt = shift(grads[gcur].data(), grads[1 - gcur].data(), kv, 1);
      }
      t.wait();
      cur = 1 - cur;
    }
    if (size > 1) {
      gt.wait();
      gcur = 1 - gcur;
      for (std::size_t x = 0; x < kv; ++x) own[x] += grads[gcur][x];
    }
    std::copy(own.begin(), own.begin() + static_cast<std::ptrdiff_t>(k_size), dk);
    std::copy(own.begin() + static_cast<std::ptrdiff_t>(k_size), own.end(), dv);
  }
  std::size_t q_elements = 0;
};

/// The job of q, k, v (local blocks) over mesh axis A: checks the extents
/// across the axis's ranks (arrival), then locally, and lays out the
/// kernel's arguments.
template <class Q, class K, class Dk, class A, class QT, class KT, class VT>
ring_job<typename QT::value_type> make_ring_job(const mesh_comms& c, const QT& q, const KT& k, const VT& v,
                                                const ring_attention_options& opt, const char* op) {
  using T = typename QT::value_type;
  using QL = dims_of_t<QT>;
  using KL = dims_of_t<KT>;
  using VL = dims_of_t<VT>;
  using R = ring_dims<QL, KL, VL, Q, K, Dk>;
  const std::size_t a = c.axis_index(A::name.view());
  ring_job<T> j;
  j.comm = c.axis_comms[a];
  j.world = c.cart;
  j.size = c.sizes[a];
  j.me = c.coords[a];
  j.what = over_axis(op, A::name.view());
  j.opt = opt;
  check_dynamic_split<Q, A>(op, static_cast<std::size_t>(j.size));
  check_dynamic_split<K, A>(op, static_cast<std::size_t>(j.size));
  const auto start = clock::now();
  arrive_with(c, j.comm, j.what, code_ring_attention, q, start);
  arrive_with(c, j.comm, j.what, code_ring_attention, k, start);
  arrive_with(c, j.comm, j.what, code_ring_attention, v, start);
  // every rank holds blocks of the same extents now: the checks below agree on every rank
  for (auto b : R::batch) {
    if (extent_by_name(k, b) != extent_by_name(q, b) || extent_by_name(v, b) != extent_by_name(q, b))
      throw shape_error(j.what + ": dim '" + std::string(b) + "' has extent " + std::to_string(extent_by_name(q, b)) +
                        " in q but " + std::to_string(extent_by_name(k, b)) + " in k and " +
                        std::to_string(extent_by_name(v, b)) + " in v");
  }
  const std::size_t dk_q = extent_by_name(q, Dk::name.view()), dk_k = extent_by_name(k, Dk::name.view());
  if (dk_q != dk_k)
    throw shape_error(j.what + ": dim '" + std::string(Dk::name.view()) + "' has extent " + std::to_string(dk_q) +
                      " in q but " + std::to_string(dk_k) + " in k");
  const std::size_t nk = extent_by_name(k, K::name.view()), nkv = extent_by_name(v, K::name.view());
  if (nk != nkv)
    throw shape_error(j.what + ": dim '" + std::string(K::name.view()) + "' has extent " + std::to_string(nk) +
                      " in k but " + std::to_string(nkv) + " in v");
  const std::size_t nq = extent_by_name(q, Q::name.view());
  if ((opt.causal || opt.window > 0) && nq != nk)
    throw shape_error(j.what + ": causal attention needs query and key blocks of one length, but each rank holds " +
                      std::to_string(nq) + " positions of '" + std::string(Q::name.view()) + "' and " +
                      std::to_string(nk) + " of '" + std::string(K::name.view()) + "'");
  if (!(opt.scale == opt.scale)) throw shape_error(j.what + ": the scale is NaN");

  kernels::attention_args<T>& x = j.args;
  x.q = q.data();
  x.nq = nq;
  x.nk = nk;
  x.dk = dk_q;
  x.dv = v.extents()[R::dv_index];
  const std::string_view dv_name = VL::names[R::dv_index];
  {
    const auto s = strides_by_name<2>(QL::names, q.strides(), {Q::name.view(), Dk::name.view()});
    x.q_row = s[0];
    x.q_col = s[1];
  }
  {
    const auto s = strides_by_name<2>(KL::names, k.strides(), {K::name.view(), Dk::name.view()});
    x.k_row = s[0];
    x.k_col = s[1];
  }
  {
    const auto s = strides_by_name<2>(VL::names, v.strides(), {K::name.view(), dv_name});
    x.v_row = s[0];
    x.v_col = s[1];
  }
  // the output has q's dims (Dk replaced by the value dim): q's strides with dv's extent in Dk's place
  {
    auto ext = q.extents();
    ext[dimsum::detail::find_name(QL::names, Dk::name.view())] = x.dv;
    const auto os = dimsum::detail::row_major_strides<QL::size>(ext);
    j.out_size = 1;
    for (auto e : ext) j.out_size *= e;
    x.out_row = os[dimsum::detail::find_name(QL::names, Q::name.view())];
    x.out_col = os[dimsum::detail::find_name(QL::names, Dk::name.view())];
    const auto qb = strides_by_name<R::nb>(QL::names, q.strides(), R::batch);
    const auto kb = strides_by_name<R::nb>(KL::names, k.strides(), R::batch);
    const auto vb = strides_by_name<R::nb>(VL::names, v.strides(), R::batch);
    const auto ob = strides_by_name<R::nb>(QL::names, os, R::batch);
    x.batch_rank = R::nb;
    for (std::size_t i = 0; i < R::nb; ++i) {
      x.batch_extents[i] = extent_by_name(q, R::batch[i]);
      x.q_batch[i] = qb[i];
      x.k_batch[i] = kb[i];
      x.v_batch[i] = vb[i];
      x.out_batch[i] = ob[i];
    }
  }
  j.k_size = k.size();
  j.v_size = v.size();
  j.q_elements = q.size();
  j.rows = x.batch_size() * nq;
  // the header of the K/V blocks that travel: k's extents (v's follow from them, checked above)
  j.header = shift_header(code_ring_attention, k);
  j.header[1] = j.k_size + j.v_size;
  j.names = dim_names_of<KT>();
  return j;
}

template <class Dk, class Dv, class T, class... QDs>
using ring_out_tensor = tensor<T, replace_head<QDs, Dk, Dv>...>;

}  // namespace detail

/// Ring attention over the mesh axis A that q's query positions and k's and
/// v's key positions are split over (sequence parallelism): each rank ends
/// with the attention output of its query block, split like q. D is the
/// dim q and k contract (the head dim); v's other dim (not a batch dim of q,
/// not the key position) is the value dim, which takes D's place in the
/// result. Collective over A: every rank must call it, with blocks of the
/// same extents (compared on entry: `shape_error` on every rank otherwise);
/// each K/V block travels once around the ring, overlapped with the
/// attention of the block in hand, each shift waiting at most
/// `dist::deadline()`. Bytes sent per rank: (p - 1) x (this rank's K and V
/// block bytes), counted in `dist::traffic_counter()`.
template <dimension Dk, class T, dimension... QDs, dimension Q, axis A, dimension... KDs, dimension K, dimension... VDs>
auto ring_attention(const sharded<tensor<T, QDs...>, split<Q, A>>& q, const sharded<tensor<T, KDs...>, split<K, A>>& k,
                    const sharded<tensor<T, VDs...>, split<K, A>>& v, ring_attention_options opt = {}) {
  using R = detail::ring_dims<dim_list<QDs...>, dim_list<KDs...>, dim_list<VDs...>, Q, K, Dk>;
  if constexpr (!R::ok) {
    dimsum::detail::report<
        ring_attention_operands_do_not_fit<diagnostic_dims_t<dim_list<QDs...>>, diagnostic_dims_t<dim_list<KDs...>>,
                                           diagnostic_dims_t<dim_list<VDs...>>, diagnostic_name_t<Dk>>>();
    return invalid_expression{};
  } else {
    using Dv = std::tuple_element_t<R::dv_index, std::tuple<VDs...>>;
    using Out = detail::ring_out_tensor<Dk, Dv, T, QDs...>;
    auto job = detail::make_ring_job<Q, K, Dk, A>(*q.comms(), q.local(), k.local(), v.local(), opt, "ring_attention");
    auto ext = q.local().extents();
    ext[dimsum::detail::find_name(dim_list<QDs...>::names, Dk::name.view())] = job.args.dv;
    Out out = Out::from_extents(ext);
    std::vector<T> lse(job.rows);
    job.forward(k.local().data(), v.local().data(), out.data(), lse.data());
    return sharded<Out, split<Q, A>>(std::move(out), q.comms());
  }
}

/// Ring attention on sharded vars: the forward above, recorded as one node
/// of the tape whose backward runs the ring backward (each rank's K and V
/// blocks travel again, their gradients' partial sums with them, back to
/// the rank that holds them). Every rank must run backward through it.
/// Bytes sent per rank in backward: (p - 1) x the K and V block bytes, and
/// as many again for their gradients' partial sums.
template <dimension Dk, class T, dimension... QDs, dimension Q, axis A, dimension... KDs, dimension K, dimension... VDs>
auto ring_attention(const sharded<grad::var<T, QDs...>, split<Q, A>>& q,
                    const sharded<grad::var<T, KDs...>, split<K, A>>& k,
                    const sharded<grad::var<T, VDs...>, split<K, A>>& v, ring_attention_options opt = {}) {
  using R = detail::ring_dims<dim_list<QDs...>, dim_list<KDs...>, dim_list<VDs...>, Q, K, Dk>;
  if constexpr (!R::ok) {
    dimsum::detail::report<
        ring_attention_operands_do_not_fit<diagnostic_dims_t<dim_list<QDs...>>, diagnostic_dims_t<dim_list<KDs...>>,
                                           diagnostic_dims_t<dim_list<VDs...>>, diagnostic_name_t<Dk>>>();
    return invalid_expression{};
  } else {
    using Dv = std::tuple_element_t<R::dv_index, std::tuple<VDs...>>;
    using Out = detail::ring_out_tensor<Dk, Dv, T, QDs...>;
    const auto& qv = q.local();
    const auto& kv = k.local();
    const auto& vv = v.local();
    auto job = std::make_shared<detail::ring_job<T>>(
        detail::make_ring_job<Q, K, Dk, A>(*q.comms(), qv.value(), kv.value(), vv.value(), opt, "ring_attention"));
    auto ext = qv.value().extents();
    ext[dimsum::detail::find_name(dim_list<QDs...>::names, Dk::name.view())] = job->args.dv;
    Out out = Out::from_extents(ext);
    auto lse = std::make_shared<std::vector<T>>(job->rows);
    job->forward(kv.value().data(), vv.value().data(), out.data(), lse->data());
    grad::tape* owner = qv.owner() ? qv.owner() : kv.owner() ? kv.owner() : vv.owner();
    const bool needs = qv.requires_grad() || kv.requires_grad() || vv.requires_grad();
    auto node = grad::detail::record(owner, std::move(out), needs, [qv, kv, vv, job, lse](Out& g, const Out& value) {
      auto dq = tensor<T, QDs...>::from_extents(qv.value().extents());
      auto dk = tensor<T, KDs...>::from_extents(kv.value().extents());
      auto dv = tensor<T, VDs...>::from_extents(vv.value().extents());
      detail::ring_job<T> b = *job;
      b.what.insert(std::string_view("ring_attention").size(), " (backward)");
      b.args.q = qv.value().data();
      b.backward(kv.value().data(), vv.value().data(), value.data(), lse->data(), g.data(), dq.data(), dk.data(),
                 dv.data());
      if (qv.requires_grad()) qv.node()->accumulate(std::move(dq));
      if (kv.requires_grad()) kv.node()->accumulate(std::move(dk));
      if (vv.requires_grad()) vv.node()->accumulate(std::move(dv));
    });
    using V = grad::var_for_t<T, dims_of_t<Out>>;
    return sharded<V, split<Q, A>>(V(std::move(node)), q.comms());
  }
}

/// Operands that are not q split along its query position and k and v
/// along their key position over one mesh axis: the compile error
/// `ring_attention_needs_position_splits`.
template <dimension Dk, class Qs, class Ks, class Vs>
requires(is_sharded_v<Qs> || is_sharded_v<Ks> || is_sharded_v<Vs>) auto ring_attention(const Qs&, const Ks&, const Vs&,
                                                                                       ring_attention_options = {}) {
  dimsum::detail::report<ring_attention_needs_position_splits<detail::placements_of_t<Qs>, detail::placements_of_t<Ks>,
                                                              detail::placements_of_t<Vs>>>();
  return invalid_expression{};
}

}  // namespace dimsum::dist
