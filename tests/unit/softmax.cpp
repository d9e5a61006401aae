// softmax<D>: against a double-precision loop, along any dim, and the
// numeric edge cases of the seeds (all -inf gives NaN, -1e9 gives uniform,
// scores in the thousands stay finite).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "support.hpp"

namespace {
DIMSUM_DIM(q_posn);
DIMSUM_DIM(k_posn);
DIMSUM_DIM(nheads);
}  // namespace

using namespace dimsum;

TEST_CASE("softmax: along the named dim, whatever its position", "[softmax]") {
  tensor<float, nheads, k_posn, q_posn> s(nheads{2}, k_posn{5}, q_posn{3});
  test::fill_pattern(s, 1.7, -4.0);
  auto p = eval(softmax<k_posn>(s));
  for (std::size_t h = 0; h < 2; ++h)
    for (std::size_t q = 0; q < 3; ++q) {
      double mx = -1e300, den = 0;
      for (std::size_t k = 0; k < 5; ++k) mx = std::max(mx, double(s(nheads{h}, k_posn{k}, q_posn{q})));
      for (std::size_t k = 0; k < 5; ++k) den += std::exp(double(s(nheads{h}, k_posn{k}, q_posn{q})) - mx);
      for (std::size_t k = 0; k < 5; ++k)
        CHECK(p(nheads{h}, k_posn{k}, q_posn{q}) ==
              Approx(std::exp(double(s(nheads{h}, k_posn{k}, q_posn{q})) - mx) / den).margin(1e-7));
    }
}

TEST_CASE("softmax: numeric edge cases", "[softmax]") {
  const float inf = std::numeric_limits<float>::infinity();
  tensor<float, q_posn, k_posn> s(q_posn{4}, k_posn{4});
  const float rows[4][4] = {{1000, 2000, 3000, -1000}, {-inf, -inf, -inf, -inf}, {-1e9f, -1e9f, -1e9f, -1e9f},
                            {1, -inf, 3, -inf}};
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 4; ++j) s(q_posn{i}, k_posn{j}) = rows[i][j];
  auto p = eval(softmax<k_posn>(s));
  // Scores in the thousands: finite and exact.
  CHECK(p(q_posn{0}, k_posn{0}) == 0.0f);
  CHECK(p(q_posn{0}, k_posn{2}) == 1.0f);
  // A row of -inf: NaN everywhere, as torch.softmax gives.
  for (std::size_t j = 0; j < 4; ++j) CHECK(std::isnan(p(q_posn{1}, k_posn{j})));
  // A row of -1e9: uniform.
  for (std::size_t j = 0; j < 4; ++j) CHECK(p(q_posn{2}, k_posn{j}) == 0.25f);
  // Partly masked: the masked entries are exactly 0.
  CHECK(p(q_posn{3}, k_posn{1}) == 0.0f);
  CHECK(p(q_posn{3}, k_posn{0}) == Approx(1.0 / (1.0 + std::exp(2.0))));
}
