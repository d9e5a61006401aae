// Seed 000's forward pass (examples/attention.hpp) against an independent
// plain-loops implementation in double, on random weights, at the seed's
// test shape and at a second shape with other dynamic batch and posn.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "../../examples/attention.hpp"

using namespace seed000;

namespace {

// Row-major flat copy of a tensor in its own dims order.
template <class T>
std::vector<double> flat(const T& t) {
  return std::vector<double>(t.data(), t.data() + t.size());
}

struct reference {
  std::vector<double> q, k, v, scores, masked, pattern, z, out;
};

// HiddenAttention.forward in plain loops (double), from the seed's code.
reference plain_attention(const std::vector<double>& x, const std::vector<double>& WQ, const std::vector<double>& WK,
                          const std::vector<double>& WV, const std::vector<double>& WO,
                          const std::vector<double>& bQ, const std::vector<double>& bK,
                          const std::vector<double>& bV, const std::vector<double>& bO, std::size_t B,
                          std::size_t P, std::size_t M, std::size_t H, std::size_t D) {
  reference r;
  auto proj = [&](const std::vector<double>& W, const std::vector<double>& b) {
    std::vector<double> y(B * P * H * D);
    for (std::size_t bi = 0; bi < B; ++bi)
      for (std::size_t p = 0; p < P; ++p)
        for (std::size_t h = 0; h < H; ++h)
          for (std::size_t d = 0; d < D; ++d) {
            double s = 0;
            for (std::size_t m = 0; m < M; ++m) s += x[(bi * P + p) * M + m] * W[(h * M + m) * D + d];
            y[((bi * P + p) * H + h) * D + d] = s + b[h * D + d];
          }
    return y;
  };
  r.q = proj(WQ, bQ);
  r.k = proj(WK, bK);
  r.v = proj(WV, bV);
  r.scores.assign(B * H * P * P, 0);
  r.masked = r.scores;
  r.pattern = r.scores;
  for (std::size_t bi = 0; bi < B; ++bi)
    for (std::size_t h = 0; h < H; ++h)
      for (std::size_t i = 0; i < P; ++i) {
        double mx = -std::numeric_limits<double>::infinity();
        for (std::size_t j = 0; j < P; ++j) {
          double s = 0;
          for (std::size_t d = 0; d < D; ++d)
            s += r.q[((bi * P + i) * H + h) * D + d] * r.k[((bi * P + j) * H + h) * D + d];
          s /= std::sqrt(double(D));
          const std::size_t o = ((bi * H + h) * P + i) * P + j;
          r.scores[o] = s;
          r.masked[o] = j > i ? -std::numeric_limits<double>::infinity() : s;
          mx = std::max(mx, r.masked[o]);
        }
        double den = 0;
        for (std::size_t j = 0; j < P; ++j) den += std::exp(r.masked[((bi * H + h) * P + i) * P + j] - mx);
        for (std::size_t j = 0; j < P; ++j) {
          const std::size_t o = ((bi * H + h) * P + i) * P + j;
          r.pattern[o] = std::exp(r.masked[o] - mx) / den;
        }
      }
  r.z.assign(B * P * H * D, 0);
  for (std::size_t bi = 0; bi < B; ++bi)
    for (std::size_t i = 0; i < P; ++i)
      for (std::size_t h = 0; h < H; ++h)
        for (std::size_t d = 0; d < D; ++d) {
          double s = 0;
          for (std::size_t j = 0; j < P; ++j)
            s += r.v[((bi * P + j) * H + h) * D + d] * r.pattern[((bi * H + h) * P + i) * P + j];
          r.z[((bi * P + i) * H + h) * D + d] = s;
        }
  r.out.assign(B * P * M, 0);
  for (std::size_t bi = 0; bi < B; ++bi)
    for (std::size_t i = 0; i < P; ++i)
      for (std::size_t m = 0; m < M; ++m) {
        double s = 0;
        for (std::size_t h = 0; h < H; ++h)
          for (std::size_t d = 0; d < D; ++d) s += r.z[((bi * P + i) * H + h) * D + d] * WO[(h * D + d) * M + m];
        r.out[(bi * P + i) * M + m] = s + bO[m];
      }
  return r;
}

void require_close(const std::vector<double>& got, const std::vector<double>& want, double atol) {
  REQUIRE(got.size() == want.size());
  std::size_t bad = 0;
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(want[i])) {
      if (got[i] != want[i]) ++bad;
      continue;
    }
    const double e = std::abs(got[i] - want[i]);
    worst = std::max(worst, e);
    if (!(e <= atol)) ++bad;
  }
  INFO("worst abs error " << worst);
  REQUIRE(bad == 0);
}

template <class DModel, class NHeads, class DHead>
void check_against_loops(std::size_t B, std::size_t P, DModel m, NHeads h, DHead d, std::uint64_t seed) {
  auto w = attention_weights<DModel, NHeads, DHead>::random(seed, m, h, d);
  auto x = tensor<float, batch, posn, DModel>::random_uniform(seed + 100, batch{B}, posn{P}, m);
  auto t = attention(x, w);
  auto r = plain_attention(flat(x), flat(w.W_Q.value), flat(w.W_K.value), flat(w.W_V.value), flat(w.W_O.value),
                           flat(w.b_Q.value), flat(w.b_K.value), flat(w.b_V.value), flat(w.b_O.value), B, P, m.value,
                           h.value, d.value);
  const double atol = 1e-5;
  SECTION("q, k, v") {
    require_close(flat(t.q), r.q, atol);
    require_close(flat(t.k), r.k, atol);
    require_close(flat(t.v), r.v, atol);
  }
  SECTION("scores, masked scores, pattern") {
    require_close(flat(t.scores), r.scores, atol);
    require_close(flat(t.masked), r.masked, atol);
    require_close(flat(t.pattern), r.pattern, atol);
  }
  SECTION("z and out") {
    require_close(flat(t.z), r.z, atol);
    require_close(flat(t.out), r.out, atol);
  }
}

DIMSUM_DIM(d_model, 30);
DIMSUM_DIM(nheads, 2);
DIMSUM_DIM(d_head, 10);

}  // namespace

TEST_CASE("seed 000 attention equals plain loops at the seed's test shape", "[attention]") {
  check_against_loops(12, 20, d_model{}, nheads{}, d_head{}, 1);
}

TEST_CASE("seed 000 attention equals plain loops with other dynamic batch and posn", "[attention]") {
  check_against_loops(3, 33, d_model{}, nheads{}, d_head{}, 2);
}

TEST_CASE("seed 000 attention equals plain loops with every dim dynamic", "[attention]") {
  // The model is generic over its dims: here the widths are run-time values.
  // The einsum strings still say d_model, nheads, d_head, so the dims must
  // carry those names.
  using dm = dimsum::dim<"d_model">;
  using nh = dimsum::dim<"nheads">;
  using dh = dimsum::dim<"d_head">;
  check_against_loops(2, 9, dm{16}, nh{4}, dh{5}, 3);
}
