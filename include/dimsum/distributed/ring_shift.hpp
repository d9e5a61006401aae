#pragma once
/// \file
/// Point-to-point transfers along a mesh axis, with the collectives' never-
/// hang guarantee: `dist::ring_shift<seq>(mesh, send, recv)` starts sending
/// this rank's block to the next rank along `seq` (coordinate c + 1, mod
/// the axis size) and receiving the previous rank's block into `recv`; the
/// returned `dist::transfer` completes on `wait()`, so work between the two
/// overlaps the communication. A peer that has not arrived when
/// `dist::deadline()` has passed since the start makes `wait()` throw
/// `dist_error` naming the operation, the rank and the time waited; a block
/// of other extents than `recv`'s is a `shape_error` on the receiving rank.

#include <array>
#include <cstddef>
#include <cstdint>
#include <dimsum/core/errors.hpp>
#include <dimsum/distributed/mesh.hpp>
#include <dimsum/distributed/sharded.hpp>
#include <dimsum/tensor/tensor.hpp>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dimsum::dist {

namespace detail {
/// Tags of a transfer's two messages: a header (the extents) and the data.
/// The arrival check uses `arrival_tag`; a transfer's tags differ from it.
/// Channel c uses shift_header_tag + 2c and the next tag.
inline constexpr int shift_header_tag = 0x64696e;  // "din"
inline constexpr std::size_t shift_header_dims = 8;
}  // namespace detail

/// A point-to-point exchange in flight (made by `ring_shift`): a send to one
/// rank of an axis and a receive from another. The sends are synchronous
/// (MPI_Issend): a send completes only once its receiver has posted the
/// receive, so a peer that never arrives is seen by both of its neighbours. `wait()` completes both or
/// throws; a transfer dropped without `wait()` is cancelled. Movable, not
/// copyable.
class transfer {
 public:
  transfer() = default;
  transfer(const transfer&) = delete;
  transfer& operator=(const transfer&) = delete;
  transfer(transfer&& o) noexcept { *this = std::move(o); }
  transfer& operator=(transfer&& o) noexcept {
    if (this != &o) {
      cancel();
      st_ = std::move(o.st_);
    }
    return *this;
  }
  ~transfer() { cancel(); }

  /// Whether a transfer is in flight (started and not yet waited on).
  bool pending() const { return st_ != nullptr; }

  /// Completes the transfer: polls until both messages are through, for at
  /// most `dist::deadline()` since it started. Throws `dist_error` "<what>:
  /// rank R did not arrive within T (deadline D; rank M waited)" naming the
  /// peer whose message is missing (the sender if the receive is
  /// incomplete, the receiver if the send is), and `shape_error` if the
  /// block received has other extents than the receive buffer.
  void wait() {
    if (!st_) return;
    auto st = std::move(st_);
    state& s = *st;
    auto timed_out = [&] {
      std::vector<int> missing;
      for (std::size_t i = 0; i < s.reqs.size(); ++i) {
        int done = 0;
        if (s.reqs[i] != MPI_REQUEST_NULL) MPI_Test(&s.reqs[i], &done, MPI_STATUS_IGNORE);
        if (s.reqs[i] == MPI_REQUEST_NULL) continue;
        const int peer = i < 2 ? s.from : s.to;  // receives first, then sends
        bool seen = false;
        for (int m : missing) seen = seen || m == peer;
        if (!seen) missing.push_back(peer);
      }
      detail::abandon(s.reqs);
      return dist_error(s.what + ": rank" + (missing.size() > 1 ? "s " : " ") +
                        detail::rank_list(s.comm, s.world, missing) + " did not arrive within " +
                        detail::seconds_text(detail::clock::now() - s.start) + " (deadline " +
                        detail::seconds_text(detail::deadline_setting()) + "; rank " +
                        detail::rank_list(s.comm, s.world, {s.me}) + " waited)");
    };
    // the header first: a block of other extents is refused before its data is read
    if (!detail::wait_all(std::span<MPI_Request>(s.reqs.data(), 1), s.start)) throw timed_out();
    check_header(s);
    if (!detail::wait_all(s.reqs, s.start)) throw timed_out();
  }

 private:
  struct state;
  static void check_header(state& s) {
    const auto& got = s.header_in;
    const auto& want = s.header_out;
    if (got[0] != want[0] || got[1] != want[1]) {
      detail::abandon(s.reqs);
      throw shape_error(s.what + ": rank " + detail::rank_list(s.comm, s.world, {s.from}) + " sent a block of " +
                        std::to_string(got[1]) + " elements, rank " + detail::rank_list(s.comm, s.world, {s.me}) +
                        " expects " + std::to_string(want[1]) + " (every rank must shift blocks of the same extents)");
    }
    for (std::size_t d = 0; d < s.names.size() && d < detail::shift_header_dims; ++d)
      if (got[2 + d] != want[2 + d]) {
        detail::abandon(s.reqs);
        throw shape_error(s.what + ": dim '" + s.names[d] + "' has extent " + std::to_string(got[2 + d]) + " on rank " +
                          detail::rank_list(s.comm, s.world, {s.from}) + " but " + std::to_string(want[2 + d]) +
                          " on rank " + detail::rank_list(s.comm, s.world, {s.me}) +
                          " (every rank must shift blocks of the same extents)");
      }
  }

 public:
  /// Internal: starts a transfer of `count` elements of MPI type `type`
  /// from `send` to rank `to` of `comm` and into `recv` from rank `from`,
  /// with the header `header` (code, element count, extents) checked on
  /// arrival against the receiver's own; transfers on other `channel`s
  /// (0 to 7) between the same ranks are told apart. Use `ring_shift`.
  static transfer start(MPI_Comm comm, MPI_Comm world, std::string what, const void* send, void* recv,
                        std::size_t count, MPI_Datatype type, int to, int from,
                        const std::array<std::uint64_t, 2 + detail::shift_header_dims>& header,
                        std::vector<std::string> names, int channel = 0) {
    transfer t;
    t.st_ = std::make_unique<state>();
    state& s = *t.st_;
    s.comm = comm;
    s.world = world;
    s.what = std::move(what);
    s.to = to;
    s.from = from;
    s.names = std::move(names);
    s.header_out = header;
    s.start = detail::clock::now();
    MPI_Comm_rank(comm, &s.me);
    const int n = detail::checked_count(count);
    constexpr int h = static_cast<int>(2 + detail::shift_header_dims);
    const int header_tag = detail::shift_header_tag + 2 * channel, data_tag = header_tag + 1;
    s.reqs.assign(4, MPI_REQUEST_NULL);
    detail::check_mpi(MPI_Irecv(s.header_in.data(), h, MPI_UINT64_T, from, header_tag, comm, &s.reqs[0]),
                      "MPI_Irecv (ring shift)");
    detail::check_mpi(MPI_Irecv(recv, n, type, from, data_tag, comm, &s.reqs[1]), "MPI_Irecv (ring shift)");
    detail::check_mpi(MPI_Issend(s.header_out.data(), h, MPI_UINT64_T, to, header_tag, comm, &s.reqs[2]),
                      "MPI_Issend (ring shift)");
    detail::check_mpi(MPI_Issend(send, n, type, to, data_tag, comm, &s.reqs[3]), "MPI_Issend (ring shift)");
    return t;
  }

 private:
  struct state {
    MPI_Comm comm = MPI_COMM_NULL, world = MPI_COMM_NULL;
    std::string what;
    int to = 0, from = 0, me = 0;
    std::vector<std::string> names;
    std::array<std::uint64_t, 2 + detail::shift_header_dims> header_out{}, header_in{};
    std::vector<MPI_Request> reqs;
    detail::clock::time_point start;
  };
  void cancel() noexcept {
    if (!st_) return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) detail::abandon(st_->reqs);
    st_.reset();
  }
  std::unique_ptr<state> st_;
};

namespace detail {
/// The header of a block: (code, element count, extents; past 8 dims the
/// eighth slot holds a hash of the rest).
template <class Tn>
std::array<std::uint64_t, 2 + shift_header_dims> shift_header(std::uint64_t code, const Tn& t) {
  std::array<std::uint64_t, 2 + shift_header_dims> h{};
  h[0] = code;
  h[1] = t.size();
  const auto e = t.extents();
  for (std::size_t i = 0; i < e.size() && i < shift_header_dims; ++i) h[2 + i] = e[i];
  if (e.size() > shift_header_dims) {
    std::uint64_t x = 14695981039346656037ull;
    for (std::size_t i = shift_header_dims - 1; i < e.size(); ++i) x = (x ^ e[i]) * 1099511628211ull;
    h[2 + shift_header_dims - 1] = x;
  }
  return h;
}
template <class Tn>
std::vector<std::string> dim_names_of() {
  using L = dims_of_t<Tn>;
  std::vector<std::string> n;
  for (auto s : L::names) n.emplace_back(s);
  return n;
}
/// The ranks `steps` ahead of and behind `me` on an axis of `size` ranks.
inline std::pair<int, int> ring_peers(int me, int size, int steps) {
  const int s = ((steps % size) + size) % size;
  return {(me + s) % size, (me - s + size) % size};
}
}  // namespace detail

/// Starts a ring shift along mesh axis A: `send` goes to the rank `steps`
/// ahead along A (coordinate c + steps, mod A's size) and the block of the
/// rank `steps` behind arrives in `recv` (which must have the extents of
/// every rank's `send`). Returns at once; `wait()` on the result completes
/// the exchange, so compute placed between the two overlaps it. Neither
/// buffer may be touched until then. With one rank along A, `send` is
/// copied into `recv`. Traffic: one message of `send`'s bytes (plus an
/// 80-byte header) to one peer, counted in `dist::traffic_counter()` as
/// payload and ring bytes alike.
template <axis A, class T, dimension... Ds, axis... Axes>
transfer ring_shift(const mesh<Axes...>& m, const tensor<T, Ds...>& send, tensor<T, Ds...>& recv, int steps = 1) {
  const auto& c = *m.comms();
  const std::size_t a = c.axis_index(A::name.view());
  const int size = c.sizes[a];
  const std::string what = detail::over_axis("ring_shift", A::name.view());
  if (send.extents() != recv.extents())
    throw shape_error(what + ": the receive buffer's extents differ from the block sent (they must be equal)");
  if (size == 1) {
    std::copy(send.data(), send.data() + send.size(), recv.data());
    return {};
  }
  const auto [to, from] = detail::ring_peers(c.coords[a], size, steps);
  traffic& tr = traffic_counter();
  ++tr.calls;
  tr.payload_bytes += send.size() * sizeof(T);
  tr.ring_bytes += send.size() * sizeof(T);
  return transfer::start(c.axis_comms[a], c.cart, what, send.data(), recv.data(), send.size(), detail::mpi_type<T>(),
                         to, from, detail::shift_header(1, send), detail::dim_names_of<tensor<T, Ds...>>());
}

}  // namespace dimsum::dist
