// Sequence parallelism under mpirun: dist::ring_shift (point-to-point along
// a mesh axis, with the deadline) and dist::ring_attention on sharded
// tensors and sharded vars. Every number is checked against plain loops in
// double over the whole sequence (forward output, and the gradients of q,
// k and v derived by hand: D = rowsum(dO * O), dS = P (dO v^T - D)), at
// p = 4096 split over the ranks: causal, sliding windows narrower and wider
// than a rank's block (the forward also against the single-process fused
// attention on the whole sequence), and full (non-causal) attention with heads and
// queries and keys of different lengths. Uneven blocks and causal blocks of
// different lengths are refused with shape_error on every rank; a rank that
// never enters a ring shift ends the others' wait with dist_error at the
// deadline.
#include <mpi.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <dimsum/dimsum.hpp>
#include <dimsum/distributed/dist.hpp>
#include <dimsum/grad/grad.hpp>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "world.hpp"

namespace dist = dimsum::dist;
namespace grad = dimsum::grad;
using dimsum::tensor;

namespace {
DIMSUM_MESH_AXIS(seq);
DIMSUM_DIM(q_posn);
DIMSUM_DIM(k_posn);
DIMSUM_DIM(d_head, 8);
DIMSUM_DIM(d_v, 4);
DIMSUM_DIM(nheads);
DIMSUM_DIM(slot);

std::vector<double> draw(std::size_t n, unsigned seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> x(n);
  for (auto& e : x) e = static_cast<double>(static_cast<float>(u(gen)));  // values a float holds exactly
  return x;
}

/// Attention over one head in plain loops (double): q (nq x dk), k (nk x dk),
/// v (nk x dv), row-major; query i at position i sees key j when `kept`.
struct reference {
  std::size_t nq, nk, dk, dv;
  double scale;
  bool causal;
  std::size_t window;  // 0: none
  std::vector<double> out, lse;
  std::vector<double> dq, dk_, dv_;

  bool kept(std::size_t i, std::size_t j) const {
    if (!causal && window == 0) return true;
    if (j > i) return false;
    return window == 0 || i - j < window;
  }
  std::size_t first_key(std::size_t i) const { return window == 0 || i + 1 <= window ? 0 : i + 1 - window; }
  std::size_t end_key(std::size_t i) const { return causal || window > 0 ? std::min(nk, i + 1) : nk; }
  double score(const std::vector<double>& q, const std::vector<double>& k, std::size_t i, std::size_t j) const {
    double s = 0;
    for (std::size_t d = 0; d < dk; ++d) s += q[i * dk + d] * k[j * dk + d];
    return s * scale;
  }
  void forward(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v) {
    out.assign(nq * dv, 0.0);
    lse.assign(nq, 0.0);
    std::vector<double> s(nk);
    for (std::size_t i = 0; i < nq; ++i) {
      double m = -std::numeric_limits<double>::infinity();
      for (std::size_t j = first_key(i); j < end_key(i); ++j) m = std::max(m, s[j] = score(q, k, i, j));
      double l = 0;
      for (std::size_t j = first_key(i); j < end_key(i); ++j) {
        const double p = std::exp(s[j] - m);
        l += p;
        for (std::size_t c = 0; c < dv; ++c) out[i * dv + c] += p * v[j * dv + c];
      }
      for (std::size_t c = 0; c < dv; ++c) out[i * dv + c] /= l;
      lse[i] = m + std::log(l);
    }
  }
  /// The gradients for dO = dout (call forward first).
  void backward(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                const std::vector<double>& dout) {
    dq.assign(nq * dk, 0.0);
    dk_.assign(nk * dk, 0.0);
    dv_.assign(nk * dv, 0.0);
    for (std::size_t i = 0; i < nq; ++i) {
      double D = 0;
      for (std::size_t c = 0; c < dv; ++c) D += dout[i * dv + c] * out[i * dv + c];
      for (std::size_t j = first_key(i); j < end_key(i); ++j) {
        const double p = std::exp(score(q, k, i, j) - lse[i]);
        double dp = 0;
        for (std::size_t c = 0; c < dv; ++c) {
          dv_[j * dv + c] += p * dout[i * dv + c];
          dp += dout[i * dv + c] * v[j * dv + c];
        }
        const double ds = p * (dp - D) * scale;
        for (std::size_t d = 0; d < dk; ++d) {
          dq[i * dk + d] += ds * k[j * dk + d];
          dk_[j * dk + d] += ds * q[i * dk + d];
        }
      }
    }
  }
};

/// Rows [lo, hi) of a row-major (rows x cols) array as a tensor with dims (R, C).
template <class R, class C, class T = float>
tensor<T, R, C> rows_of(const std::vector<double>& x, std::size_t cols, std::size_t lo, std::size_t hi) {
  auto t = tensor<T, R, C>::from_extents({hi - lo, cols});
  for (std::size_t i = 0; i < (hi - lo) * cols; ++i) t.data()[i] = static_cast<T>(x[lo * cols + i]);
  return t;
}

/// Largest |a - b| over rows [lo, hi) of b (a holds those rows only).
template <class T>
double max_error(const T* a, const std::vector<double>& b, std::size_t cols, std::size_t lo, std::size_t hi) {
  double e = 0;
  for (std::size_t i = 0; i < (hi - lo) * cols; ++i) e = std::max(e, std::abs(double(a[i]) - b[lo * cols + i]));
  return e;
}
double max_abs(const std::vector<double>& x) {
  double m = 0;
  for (double e : x) m = std::max(m, std::abs(e));
  return m;
}

/// One sequence of p positions split over every rank: forward on sharded
/// tensors, forward and backward on sharded vars, against the reference
/// (tolerance `tol`, relative to the largest gradient for gradients).
template <class T>
void check_sequence(std::size_t p, bool causal, std::size_t window, unsigned seed, double tol = 2e-6) {
  const int n = world_size(), me = world_rank();
  dist::mesh<seq> m(MPI_COMM_WORLD, seq{n});
  const std::size_t dk = d_head::static_extent, dv = d_v::static_extent;
  const auto q = draw(p * dk, seed), k = draw(p * dk, seed + 1), v = draw(p * dv, seed + 2),
             dout = draw(p * dv, seed + 3);
  reference ref{p, p, dk, dv, 1.0 / std::sqrt(double(dk)), causal, window, {}, {}, {}, {}, {}};
  ref.forward(q, k, v);
  ref.backward(q, k, v, dout);

  const std::size_t blk = p / static_cast<std::size_t>(n), lo = blk * static_cast<std::size_t>(me), hi = lo + blk;
  const dist::ring_attention_options opt{ref.scale, causal, window};
  auto qs = dist::from_local<dist::split<q_posn, seq>>(m, rows_of<q_posn, d_head, T>(q, dk, lo, hi));
  auto ks = dist::from_local<dist::split<k_posn, seq>>(m, rows_of<k_posn, d_head, T>(k, dk, lo, hi));
  auto vs = dist::from_local<dist::split<k_posn, seq>>(m, rows_of<k_posn, d_v, T>(v, dv, lo, hi));

  dist::reset_traffic();
  dist::sharded<tensor<T, q_posn, d_v>, dist::split<q_posn, seq>> o = dist::ring_attention<d_head>(qs, ks, vs, opt);
  INFO((sizeof(T) == 8 ? "double" : "float")
       << " p " << p << " causal " << causal << " window " << window << " ranks " << n);
  CHECK(max_error(o.local().data(), ref.out, dv, lo, hi) < tol);
  // and equals the single-process fused attention on the whole sequence, rows [lo, hi)
  {
    const auto qf = rows_of<q_posn, d_head, T>(q, dk, 0, p);
    const auto kf = rows_of<k_posn, d_head, T>(k, dk, 0, p);
    const auto vf = rows_of<k_posn, d_v, T>(v, dv, 0, p);
    const T inf = std::numeric_limits<T>::infinity();
    auto scores = dimsum::einsum<"q_posn d_head, k_posn d_head -> q_posn k_posn">(qf, kf) * T(ref.scale);
    tensor<T, q_posn, d_v> single;
    if (window > 0)
      single = dimsum::einsum<"q_posn k_posn, k_posn d_v -> q_posn d_v">(
          dimsum::softmax<k_posn>(dimsum::window_mask<q_posn, k_posn>(scores, window, -inf)), vf);
    else if (causal)
      single = dimsum::einsum<"q_posn k_posn, k_posn d_v -> q_posn d_v">(
          dimsum::softmax<k_posn>(dimsum::causal_mask<q_posn, k_posn>(scores, -inf)), vf);
    else
      single = dimsum::einsum<"q_posn k_posn, k_posn d_v -> q_posn d_v">(dimsum::softmax<k_posn>(scores), vf);
    double e = 0;
    for (std::size_t i = 0; i < blk * dv; ++i)
      e = std::max(e, double(std::abs(o.local().data()[i] - single.data()[lo * dv + i])));
    INFO("against the single-process fused attention: " << e);
    CHECK(e < tol / 2);
  }
  // each K/V block travels p - 1 hops: (p - 1) x this rank's K and V bytes
  const std::uint64_t kv_bytes = blk * (dk + dv) * sizeof(T);
  CHECK(dist::traffic_counter().ring_bytes == static_cast<std::uint64_t>(n - 1) * kv_bytes);

  grad::tape t;
  dimsum::parameter<T, q_posn, d_head> pq(rows_of<q_posn, d_head, T>(q, dk, lo, hi));
  dimsum::parameter<T, k_posn, d_head> pk(rows_of<k_posn, d_head, T>(k, dk, lo, hi));
  dimsum::parameter<T, k_posn, d_v> pv(rows_of<k_posn, d_v, T>(v, dv, lo, hi));
  auto qv = dist::watch<dist::split<q_posn, seq>>(t, m, pq);
  auto kv = dist::watch<dist::split<k_posn, seq>>(t, m, pk);
  auto vv = dist::watch<dist::split<k_posn, seq>>(t, m, pv);
  auto ov = dist::ring_attention<d_head>(qv, kv, vv, opt);
  CHECK(max_error(ov.local().value().data(), ref.out, dv, lo, hi) < tol);
  const auto r = rows_of<q_posn, d_v, T>(dout, dv, lo, hi);  // this rank's block of dL/dO: L = sum(O * dout)
  dist::reset_traffic();
  t.backward(dimsum::einsum<>(ov.local() * r));
  // backward: K/V blocks again (p - 1 hops) and their gradients' partial sums (p - 1 hops, to their owner)
  CHECK(dist::traffic_counter().ring_bytes == static_cast<std::uint64_t>(2 * (n - 1)) * kv_bytes);
  const double gtol = tol * std::max({1.0, max_abs(ref.dq), max_abs(ref.dk_), max_abs(ref.dv_)});
  const double eq = max_error(pq.grad.data(), ref.dq, dk, lo, hi), ek = max_error(pk.grad.data(), ref.dk_, dk, lo, hi),
               ev = max_error(pv.grad.data(), ref.dv_, dv, lo, hi);
  INFO("max error dq " << eq << " dk " << ek << " dv " << ev << " tolerance " << gtol);
  CHECK(eq < gtol);
  CHECK(ek < gtol);
  CHECK(ev < gtol);
}
}  // namespace

TEST_CASE("ring_attention: causal, p = 4096, equals plain loops in double, forward and gradients") {
  check_sequence<float>(4096, true, 0, 11);
}

TEST_CASE("ring_attention: sliding window narrower than a block (300) and wider (1500), p = 4096") {
  check_sequence<float>(4096, false, 300, 21);  // a window implies causal
  check_sequence<float>(4096, true, 1500, 31);
}

TEST_CASE("ring_attention in double: causal, window 5 and full, p = 512, within 1e-12") {
  check_sequence<double>(512, true, 0, 41, 1e-12);
  check_sequence<double>(512, true, 5, 51, 1e-12);
  check_sequence<double>(512, false, 0, 61, 1e-12);
}

TEST_CASE("ring_attention: full attention with heads, queries and keys of other lengths and layouts") {
  // q (nheads, q_posn, d_head), k (k_posn, nheads, d_head), v (nheads, d_v, k_posn): 2 heads, 512 queries, 256 keys
  const int n = world_size(), me = world_rank();
  dist::mesh<seq> m(MPI_COMM_WORLD, seq{n});
  const std::size_t H = 2, NQ = 512, NK = 256, dk = 8, dv = 4;
  const std::size_t bq = NQ / static_cast<std::size_t>(n), bk = NK / static_cast<std::size_t>(n);
  std::vector<std::vector<double>> q(H), k(H), v(H), dout(H);
  std::vector<reference> ref(H);
  for (std::size_t h = 0; h < H; ++h) {
    q[h] = draw(NQ * dk, 100 + unsigned(h));
    k[h] = draw(NK * dk, 200 + unsigned(h));
    v[h] = draw(NK * dv, 300 + unsigned(h));
    dout[h] = draw(NQ * dv, 400 + unsigned(h));
    ref[h] = reference{NQ, NK, dk, dv, 0.3, false, 0, {}, {}, {}, {}, {}};
    ref[h].forward(q[h], k[h], v[h]);
    ref[h].backward(q[h], k[h], v[h], dout[h]);
  }
  const std::size_t q0 = bq * std::size_t(me), k0 = bk * std::size_t(me);
  tensor<float, nheads, q_posn, d_head> ql(nheads{H}, q_posn{bq});
  tensor<float, k_posn, nheads, d_head> kl(k_posn{bk}, nheads{H});
  tensor<float, nheads, d_v, k_posn> vl(nheads{H}, k_posn{bk});
  tensor<float, nheads, q_posn, d_v> rl(nheads{H}, q_posn{bq});
  for (std::size_t h = 0; h < H; ++h) {
    for (std::size_t i = 0; i < bq; ++i) {
      for (std::size_t d = 0; d < dk; ++d) ql.data()[(h * bq + i) * dk + d] = float(q[h][(q0 + i) * dk + d]);
      for (std::size_t c = 0; c < dv; ++c) rl.data()[(h * bq + i) * dv + c] = float(dout[h][(q0 + i) * dv + c]);
    }
    for (std::size_t j = 0; j < bk; ++j) {
      for (std::size_t d = 0; d < dk; ++d) kl.data()[(j * H + h) * dk + d] = float(k[h][(k0 + j) * dk + d]);
      for (std::size_t c = 0; c < dv; ++c) vl.data()[(h * dv + c) * bk + j] = float(v[h][(k0 + j) * dv + c]);
    }
  }
  grad::tape t;
  dimsum::parameter<float, nheads, q_posn, d_head> pq(ql);
  dimsum::parameter<float, k_posn, nheads, d_head> pk(kl);
  dimsum::parameter<float, nheads, d_v, k_posn> pv(vl);
  auto qv = dist::watch<dist::split<q_posn, seq>>(t, m, pq);
  auto kv = dist::watch<dist::split<k_posn, seq>>(t, m, pk);
  auto vv = dist::watch<dist::split<k_posn, seq>>(t, m, pv);
  auto o = dist::ring_attention<d_head>(qv, kv, vv, {.scale = 0.3});
  STATIC_REQUIRE(
      std::is_same_v<decltype(o), dist::sharded<grad::var<float, nheads, q_posn, d_v>, dist::split<q_posn, seq>>>);
  t.backward(dimsum::einsum<>(o.local() * rl));
  double eo = 0, eq = 0, ek = 0, ev = 0;
  for (std::size_t h = 0; h < H; ++h) {
    for (std::size_t i = 0; i < bq; ++i) {
      for (std::size_t c = 0; c < dv; ++c)
        eo = std::max(eo, std::abs(o.local().value().data()[(h * bq + i) * dv + c] - ref[h].out[(q0 + i) * dv + c]));
      for (std::size_t d = 0; d < dk; ++d)
        eq = std::max(eq, std::abs(pq.grad.data()[(h * bq + i) * dk + d] - ref[h].dq[(q0 + i) * dk + d]));
    }
    for (std::size_t j = 0; j < bk; ++j) {
      for (std::size_t d = 0; d < dk; ++d)
        ek = std::max(ek, std::abs(pk.grad.data()[(j * H + h) * dk + d] - ref[h].dk_[(k0 + j) * dk + d]));
      for (std::size_t c = 0; c < dv; ++c)
        ev = std::max(ev, std::abs(pv.grad.data()[(h * dv + c) * bk + j] - ref[h].dv_[(k0 + j) * dv + c]));
    }
  }
  INFO("errors out " << eo << " dq " << eq << " dk " << ek << " dv " << ev);
  CHECK(eo < 2e-6);
  CHECK(eq < 2e-6);
  CHECK(ek < 2e-6);
  CHECK(ev < 2e-6);
}

TEST_CASE("ring_attention: uneven and non-divisible splits are refused with shape_error on every rank") {
  const int n = world_size(), me = world_rank();
  dist::mesh<seq> m(MPI_COMM_WORLD, seq{n});
  using qt = tensor<float, q_posn, d_head>;
  using kt = tensor<float, k_posn, d_head>;
  using vt = tensor<float, k_posn, d_v>;
  if (n > 1) {
    // 4097 positions do not split evenly over the ranks
    auto uneven = [&] { return dist::shard<dist::split<q_posn, seq>>(m, qt(q_posn{4097})); };
    CHECK_THROWS_WITH(uneven(), Catch::Contains("does not split evenly over mesh axis 'seq'"));
    // blocks of other lengths on the last rank (made without from_local's check)
    const std::size_t len = me == n - 1 ? 9 : 8;
    dist::sharded<qt, dist::split<q_posn, seq>> q(qt(q_posn{len}), m.comms());
    dist::sharded<kt, dist::split<k_posn, seq>> k(kt(k_posn{len}), m.comms());
    dist::sharded<vt, dist::split<k_posn, seq>> v(vt(k_posn{len}), m.comms());
    CHECK_THROWS_WITH(dist::ring_attention<d_head>(q, k, v, {.causal = true}),
                      Catch::Contains("ring_attention over mesh axis 'seq': dim 'q_posn' has extent 8 on rank") &&
                          Catch::Contains("but 9 on rank " + std::to_string(n - 1)));
  }
  // causal attention over query and key blocks of other lengths
  auto q = dist::from_local<dist::split<q_posn, seq>>(m, qt(q_posn{8}));
  auto k = dist::from_local<dist::split<k_posn, seq>>(m, kt(k_posn{6}));
  auto v = dist::from_local<dist::split<k_posn, seq>>(m, vt(k_posn{6}));
  CHECK_THROWS_WITH(dist::ring_attention<d_head>(q, k, v, {.causal = true}),
                    Catch::Contains("causal attention needs query and key blocks of one length") &&
                        Catch::Contains("8 positions of 'q_posn' and 6 of 'k_posn'"));
  // keys and values of other lengths
  auto v5 = dist::from_local<dist::split<k_posn, seq>>(m, vt(k_posn{5}));
  CHECK_THROWS_WITH(dist::ring_attention<d_head>(q, k, v5),
                    Catch::Contains("dim 'k_posn' has extent 6 in k but 5 in v"));
}

TEST_CASE("ring_shift: blocks move to the next rank along the axis, and back after a full turn") {
  const int n = world_size(), me = world_rank();
  dist::mesh<seq> m(MPI_COMM_WORLD, seq{n});
  tensor<float, slot> mine(slot{5}), got(slot{5});
  for (std::size_t i = 0; i < 5; ++i) mine.data()[i] = float(100 * me + int(i));
  for (int steps : {1, 2, -1}) {
    dist::transfer t = dist::ring_shift<seq>(m, mine, got, steps);
    t.wait();
    const int from = ((me - steps) % n + n) % n;
    for (std::size_t i = 0; i < 5; ++i) CHECK(got.data()[i] == float(100 * from + int(i)));
  }
  // p shifts of one step bring a block home
  tensor<float, slot> a = mine, b(slot{5});
  for (int s = 0; s < n; ++s) {
    auto t = dist::ring_shift<seq>(m, a, b);
    t.wait();
    std::swap(a, b);
  }
  for (std::size_t i = 0; i < 5; ++i) CHECK(a.data()[i] == mine.data()[i]);
}

TEST_CASE("ring_shift: a block of other extents is a shape_error on the rank that receives it") {
  const int n = world_size(), me = world_rank();
  dist::mesh<seq> m(MPI_COMM_WORLD, seq{n});  // its own communicator: the refused messages stay there
  const std::size_t len = n > 1 && me == n - 1 ? 6 : 5;
  tensor<float, slot> mine(slot{len}), got(slot{len});
  auto t = dist::ring_shift<seq>(m, mine, got);
  if (n > 1 && (me == 0 || me == n - 1)) {  // rank 0 receives 6 elements, the last rank 5
    CHECK_THROWS_WITH(t.wait(),
                      Catch::Contains("ring_shift over mesh axis 'seq': rank ") &&
                          Catch::Contains(" sent a block of " + std::to_string(me == 0 ? 6 : 5) + " elements, rank " +
                                          std::to_string(me) + " expects " + std::to_string(len)));
  } else {
    CHECK_NOTHROW(t.wait());
  }
  tensor<float, slot> other(slot{4});
  CHECK_THROWS_AS(dist::ring_shift<seq>(m, mine, other), dimsum::shape_error);
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("ring_shift and ring_attention: a rank that never enters ends the others' wait at the deadline") {
  const int n = world_size(), me = world_rank();
  const auto old = dist::deadline();
  dist::set_deadline(std::chrono::milliseconds(500));
  {
    dist::mesh<seq> m(MPI_COMM_WORLD, seq{n});  // its own communicator: the abandoned messages stay there
    tensor<float, slot> mine(slot{3}), got(slot{3});
    if (n == 1) {
      mine.fill(2.0f);
      auto t = dist::ring_shift<seq>(m, mine, got);  // one rank: a copy
      t.wait();
      CHECK(got.data()[2] == 2.0f);
    } else if (me == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // never enters the shift
    } else {
      const auto start = std::chrono::steady_clock::now();
      auto t = dist::ring_shift<seq>(m, mine, got);
      // a shift waits for its two peers only: rank 0 sends to rank 1 and rank 2 receives from it; on 4 ranks
      // rank 3's exchange (with ranks 2 and 0) completes
      const bool neighbour = me == 0 || me == 2;
      std::string what;
      try {
        t.wait();
      } catch (const dist::dist_error& e) {
        what = e.what();
      }
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      INFO(what);
      if (neighbour) {
        CHECK(what.find("dimsum: dist: ring_shift over mesh axis 'seq': rank 1 did not arrive within ") == 0);
        CHECK(what.find(" s (deadline 0.5 s; rank " + std::to_string(me) + " waited)") != std::string::npos);
        CHECK(waited < 1.2);
      } else {
        CHECK(what.empty());
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  {
    dist::mesh<seq> m(MPI_COMM_WORLD, seq{n});
    auto q = dist::from_local<dist::split<q_posn, seq>>(m, tensor<float, q_posn, d_head>(q_posn{4}));
    auto k = dist::from_local<dist::split<k_posn, seq>>(m, tensor<float, k_posn, d_head>(k_posn{4}));
    auto v = dist::from_local<dist::split<k_posn, seq>>(m, tensor<float, k_posn, d_v>(k_posn{4}));
    if (n > 1 && me == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // never enters the ring
    } else if (n > 1) {  // every other rank: the call starts with an exchange between all ranks of the axis
      const auto start = std::chrono::steady_clock::now();
      CHECK_THROWS_WITH(
          dist::ring_attention<d_head>(q, k, v),
          Catch::Contains("dimsum: dist: ring_attention over mesh axis 'seq': rank 1 did not arrive within") &&
              Catch::Contains("(deadline 0.5 s; rank " + std::to_string(me) + " waited)"));
      CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 1.2);
    } else {
      auto o = dist::ring_attention<d_head>(q, k, v);  // zeros in, zeros out
      CHECK(o.local().data()[0] == 0.0f);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  dist::set_deadline(old);
}

