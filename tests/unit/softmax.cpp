// softmax<D>: against a double-precision loop, along any dim, and the
// numeric edge cases of the seeds (all -inf gives NaN, -1e9 gives uniform,
// scores in the thousands stay finite); the vectorised rows on every arch
// path, and the row-by-row evaluation of a scaled, masked operand.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <dimsum/kernels/softmax.hpp>

#include "arch_paths.hpp"
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

namespace {
// Softmax of each row of n values in double (the reference loop).
std::vector<double> softmax_rows(const std::vector<double>& x, std::size_t n) {
  std::vector<double> out(x.size());
  for (std::size_t r = 0; r < x.size() / n; ++r) {
    double mx = -std::numeric_limits<double>::infinity(), den = 0;
    for (std::size_t j = 0; j < n; ++j) mx = std::max(mx, x[r * n + j]);
    for (std::size_t j = 0; j < n; ++j) den += std::exp(x[r * n + j] - mx);
    for (std::size_t j = 0; j < n; ++j) out[r * n + j] = std::exp(x[r * n + j] - mx) / den;
  }
  return out;
}
}  // namespace

TEMPLATE_TEST_CASE("softmax: the vectorised rows on every arch path, every length up to three vectors and more",
                   "[softmax][kernels]", float, double) {
  using T = TestType;
  test::for_each_arch([](auto arch) {
    using Arch = decltype(arch);
    for (std::size_t n = 1; n <= 70; n += (n < 50 ? 1 : 19)) {
      INFO("arch " << Arch::name() << ", n " << n);
      std::vector<T> row(n);
      std::vector<double> x(n);
      for (std::size_t j = 0; j < n; ++j) row[j] = T(x[j] = std::sin(1.3 * double(j) + double(n)) * 30.0);
      kernels::softmax_contiguous_on<Arch>(row.data(), n);
      const auto want = softmax_rows(x, n);
      for (std::size_t j = 0; j < n; ++j) CHECK(double(row[j]) == Approx(want[j]).margin(1e-6).epsilon(1e-5));
      // A row of -inf is NaN everywhere; a NaN makes the row NaN.
      std::fill(row.begin(), row.end(), -std::numeric_limits<T>::infinity());
      kernels::softmax_contiguous_on<Arch>(row.data(), n);
      for (std::size_t j = 0; j < n; ++j) CHECK(std::isnan(row[j]));
      std::fill(row.begin(), row.end(), T(1));
      row[n / 2] = std::numeric_limits<T>::quiet_NaN();
      kernels::softmax_contiguous_on<Arch>(row.data(), n);
      for (std::size_t j = 0; j < n; ++j) CHECK(std::isnan(row[j]));
    }
  });
}

TEMPLATE_TEST_CASE("softmax: scaled and masked scores evaluated row by row equal the loops", "[softmax]", float,
                   double) {
  using T = TestType;
  const T inf = std::numeric_limits<T>::infinity();
  for (std::size_t n : {1u, 7u, 33u, 130u}) {
    INFO("k_posn " << n);
    tensor<T, nheads, q_posn, k_posn> s(nheads{3}, q_posn{5}, k_posn{n});
    test::fill_pattern(s, 0.9, -8.0);
    std::vector<double> x;
    for (std::size_t h = 0; h < 3; ++h)
      for (std::size_t i = 0; i < 5; ++i)
        for (std::size_t j = 0; j < n; ++j) x.push_back(j > i ? -INFINITY : double(s(nheads{h}, q_posn{i}, k_posn{j})) * double(T(0.125)));
    const auto want = softmax_rows(x, n);
    // Element-wise operand: evaluated and softmaxed one row at a time.
    auto p = eval(softmax<k_posn>(causal_mask<q_posn, k_posn>(s * T(0.125), -inf)));
    // A materialised operand (a tensor) and a view with the dim not innermost.
    tensor<T, nheads, q_posn, k_posn> masked = causal_mask<q_posn, k_posn>(s * T(0.125), -inf);
    auto p2 = eval(softmax<k_posn>(masked));
    tensor<T, k_posn, nheads, q_posn> p3 = softmax<k_posn>(masked);
    for (std::size_t h = 0, r = 0; h < 3; ++h)
      for (std::size_t i = 0; i < 5; ++i)
        for (std::size_t j = 0; j < n; ++j, ++r) {
          CHECK(double(p(nheads{h}, q_posn{i}, k_posn{j})) == Approx(want[r]).margin(1e-6));
          CHECK(double(p2(nheads{h}, q_posn{i}, k_posn{j})) == Approx(want[r]).margin(1e-6));
          CHECK(double(p3(k_posn{j}, nheads{h}, q_posn{i})) == Approx(want[r]).margin(1e-6));
        }
  }
}
