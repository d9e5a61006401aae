// Reading the PyTorch fixtures in the examples, and comparing with them.
#pragma once
#include <cmath>
#include <cstdio>
#include <string>

#include <dimsum/dimsum.hpp>
#include <dimsum/io/npy.hpp>
#include <dimsum/io/npy_dir.hpp>

namespace seeds {

inline std::string fixture(const std::string& name) { return std::string(DIMSUM_FIXTURES_DIR) + name; }

template <class TT>
TT load(const std::string& name) {
  return dimsum::load_npy<TT>(fixture(name));
}

/// Prints the largest difference from PyTorch's value for `name`.
template <class E>
double report(const char* what, const E& expr, const std::string& name) {
  auto got = dimsum::eval(expr);
  auto want = dimsum::load_npy<decltype(got)>(fixture(name));
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = double(got.data()[i]), w = double(want.data()[i]);
    if (!(std::isnan(g) && std::isnan(w)) && g != w) worst = std::max(worst, std::abs(g - w));
  }
  std::printf("%-10s %-40s max |dimsum - pytorch| = %.2e\n", what, dimsum::shape_string(got).c_str(), worst);
  return worst;
}

}  // namespace seeds
