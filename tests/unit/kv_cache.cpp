// kv_cache (ops/kv_cache.hpp): appending positions, views of the filled
// prefix, errors that leave the cache unchanged, and incremental decoding
// (one new query attending the cache) against causal attention over the
// whole sequence written as plain loops.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include <dimsum/dimsum.hpp>
#include <dimsum/ops/kv_cache.hpp>

using dimsum::kv_cache;
using dimsum::rope_pairs;
using dimsum::tensor;

namespace {
DIMSUM_DIM(batch);
DIMSUM_DIM(q_posn);
DIMSUM_DIM(k_posn);
DIMSUM_DIM(nheads);
DIMSUM_DIM(d_head);

using cache_t = kv_cache<double, k_posn, batch, k_posn, nheads, d_head>;
using kv_t = tensor<double, batch, k_posn, nheads, d_head>;
}  // namespace

TEST_CASE("kv_cache appends positions and views the filled prefix", "[kv_cache]") {
  cache_t cache(batch{2}, k_posn{6}, nheads{3}, d_head{4});
  CHECK(cache.size() == 0);
  CHECK(cache.capacity() == 6);
  CHECK(cache.keys().extent<k_posn>() == 0);
  const auto k1 = kv_t::random_normal(1, batch{2}, k_posn{3}, nheads{3}, d_head{4});
  const auto v1 = kv_t::random_normal(2, batch{2}, k_posn{3}, nheads{3}, d_head{4});
  cache.append(k1, v1);
  // The second chunk arrives in another dim order (and lazily): by name.
  const auto k2 = tensor<double, d_head, nheads, k_posn, batch>::random_normal(3, d_head{4}, nheads{3}, k_posn{2}, batch{2});
  const auto v2 = tensor<double, nheads, batch, k_posn, d_head>::random_normal(4, nheads{3}, batch{2}, k_posn{2}, d_head{4});
  cache.append(k2 * 1.0, v2);
  REQUIRE(cache.size() == 5);
  const auto keys = cache.keys();
  const auto values = cache.values();
  REQUIRE(keys.extent<k_posn>() == 5);
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t p = 0; p < 5; ++p)
      for (std::size_t h = 0; h < 3; ++h)
        for (std::size_t d = 0; d < 4; ++d) {
          const double want_k = p < 3 ? k1(batch{b}, k_posn{p}, nheads{h}, d_head{d})
                                      : k2(batch{b}, k_posn{p - 3}, nheads{h}, d_head{d});
          const double want_v = p < 3 ? v1(batch{b}, k_posn{p}, nheads{h}, d_head{d})
                                      : v2(batch{b}, k_posn{p - 3}, nheads{h}, d_head{d});
          CHECK(keys(batch{b}, k_posn{p}, nheads{h}, d_head{d}) == want_k);
          CHECK(values(batch{b}, k_posn{p}, nheads{h}, d_head{d}) == want_v);
        }
  cache.clear();
  CHECK(cache.size() == 0);
}

TEST_CASE("kv_cache refuses what does not fit and stays unchanged", "[kv_cache][errors]") {
  cache_t cache(batch{1}, k_posn{4}, nheads{2}, d_head{2});
  const auto k3 = kv_t::random_normal(5, batch{1}, k_posn{3}, nheads{2}, d_head{2});
  cache.append(k3, k3);
  const double before = cache.keys()(batch{0}, k_posn{2}, nheads{1}, d_head{1});
  const auto k2 = kv_t::random_normal(6, batch{1}, k_posn{2}, nheads{2}, d_head{2});
  auto overflow = [&] { cache.append(k2, k2); };
  CHECK_THROWS_AS(overflow(), dimsum::shape_error);
  CHECK_THROWS_WITH(overflow(), Catch::Contains("k_posn") && Catch::Contains("capacity 4"));
  const auto wide = kv_t::random_normal(7, batch{1}, k_posn{1}, nheads{3}, d_head{2});
  auto other_heads = [&] { cache.append(wide, wide); };
  CHECK_THROWS_WITH(other_heads(), Catch::Contains("nheads"));
  const auto k1 = kv_t::random_normal(8, batch{1}, k_posn{1}, nheads{2}, d_head{2});
  auto uneven = [&] { cache.append(k1, k2); };
  CHECK_THROWS_AS(uneven(), dimsum::shape_error);
  CHECK(cache.size() == 3);
  CHECK(cache.keys()(batch{0}, k_posn{2}, nheads{1}, d_head{1}) == before);
  cache.append(k1, k1);  // exactly full
  CHECK(cache.size() == 4);
}

TEST_CASE("decoding with the cache equals causal attention over the whole sequence", "[kv_cache][attention]") {
  constexpr std::size_t P = 9, H = 2, D = 6, prompt = 4;
  const auto q = tensor<double, batch, q_posn, nheads, d_head>::random_normal(11, batch{1}, q_posn{P}, nheads{H}, d_head{D});
  const auto k = kv_t::random_normal(12, batch{1}, k_posn{P}, nheads{H}, d_head{D});
  const auto v = kv_t::random_normal(13, batch{1}, k_posn{P}, nheads{H}, d_head{D});
  const double scale = 1.0 / std::sqrt(double(D));

  // Reference: RoPE over the whole sequence (positions 0..P-1), then causal
  // attention in plain loops.
  const auto qr = dimsum::rope<q_posn, d_head>(q, rope_pairs::half_split);
  const auto kr = dimsum::rope<k_posn, d_head>(k, rope_pairs::half_split);
  std::vector<double> want(P * H * D);
  for (std::size_t h = 0; h < H; ++h)
    for (std::size_t i = 0; i < P; ++i) {
      std::vector<double> s(i + 1);
      double mx = -1e300, z = 0;
      for (std::size_t j = 0; j <= i; ++j) {
        double dot = 0;
        for (std::size_t d = 0; d < D; ++d)
          dot += qr(batch{0}, q_posn{i}, nheads{h}, d_head{d}) * kr(batch{0}, k_posn{j}, nheads{h}, d_head{d});
        s[j] = dot * scale;
        mx = std::max(mx, s[j]);
      }
      for (auto& x : s) z += (x = std::exp(x - mx));
      for (std::size_t d = 0; d < D; ++d) {
        double o = 0;
        for (std::size_t j = 0; j <= i; ++j) o += s[j] / z * v(batch{0}, k_posn{j}, nheads{h}, d_head{d});
        want[(i * H + h) * D + d] = o;
      }
    }

  // Prefill the prompt's keys and values, then decode one position at a
  // time: RoPE at the position's offset, append, attend the whole cache.
  cache_t cache(batch{1}, k_posn{P}, nheads{H}, d_head{D});
  cache.append(dimsum::rope<k_posn, d_head>(dimsum::slice<k_posn>(k, 0, prompt), rope_pairs::half_split),
               dimsum::slice<k_posn>(v, 0, prompt));
  for (std::size_t t = prompt; t < P; ++t) {
    cache.append(dimsum::rope<k_posn, d_head>(dimsum::slice<k_posn>(k, t, t + 1), rope_pairs::half_split, 10000.0, t),
                 dimsum::slice<k_posn>(v, t, t + 1));
    const auto q_new = dimsum::rope<q_posn, d_head>(dimsum::slice<q_posn>(q, t, t + 1), rope_pairs::half_split, 10000.0, t);
    const auto scores = dimsum::einsum<"batch q_posn nheads d_head, batch k_posn nheads d_head -> batch nheads q_posn k_posn">(
        q_new, cache.keys());
    const tensor<double, batch, q_posn, nheads, d_head> out =
        dimsum::einsum<"batch nheads q_posn k_posn, batch k_posn nheads d_head -> batch q_posn nheads d_head">(
            dimsum::softmax<k_posn>(scores * scale), cache.values());
    for (std::size_t h = 0; h < H; ++h)
      for (std::size_t d = 0; d < D; ++d)
        CHECK(std::abs(out(batch{0}, q_posn{0}, nheads{h}, d_head{d}) - want[(t * H + h) * D + d]) < 1e-12);
  }
  CHECK(cache.size() == P);
}

TEST_CASE("kv_cache with an empty dim appends positions and holds no values", "[kv_cache]") {
  cache_t cache(batch{0}, k_posn{4}, nheads{2}, d_head{2});
  const auto k = kv_t::zeros(batch{0}, k_posn{2}, nheads{2}, d_head{2});
  cache.append(k, k);
  cache.append(k * 2.0, k);
  CHECK(cache.size() == 4);
  CHECK(cache.keys().extent<k_posn>() == 4);
  CHECK(cache.keys().extent<batch>() == 0);
  CHECK(cache.values().extent<batch>() == 0);
  auto overflow = [&] { cache.append(k, k); };
  CHECK_THROWS_WITH(overflow(), Catch::Contains("capacity 4"));
}
