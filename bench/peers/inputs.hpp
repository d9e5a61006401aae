// Deterministic inputs shared by every implementation of the seed-000
// attention forward in bench/ (dimsum, Eigen, OpenBLAS; bench/compare
// mirrors it for PyTorch), so their outputs can be compared element by
// element. Flat row-major arrays of the seed's tensors.
#pragma once
#include <cmath>
#include <cstddef>
#include <vector>

namespace bench {

struct attention_shape {
  std::size_t b, p, m, h, d;
};

// Element i of tensor number `salt`, scaled.
inline float input_value(std::size_t i, int salt, double scale) {
  return static_cast<float>(scale * std::sin(0.7 * double(i % 100003) + 1.3 * salt + 0.1 * double(i % 7)));
}

inline std::vector<float> make_input(std::size_t n, int salt, double scale) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = input_value(i, salt, scale);
  return v;
}

// x (b,p,m); W_Q, W_K, W_V (h,m,d); W_O (h,d,m); b_Q, b_K, b_V (h,d); b_O (m).
struct attention_inputs {
  std::vector<float> x, W_Q, W_K, W_V, W_O, b_Q, b_K, b_V, b_O;
  explicit attention_inputs(const attention_shape& s)
      : x(make_input(s.b * s.p * s.m, 0, 1.0)),
        W_Q(make_input(s.h * s.m * s.d, 1, 1.0 / std::sqrt(double(s.m)))),
        W_K(make_input(s.h * s.m * s.d, 2, 1.0 / std::sqrt(double(s.m)))),
        W_V(make_input(s.h * s.m * s.d, 3, 1.0 / std::sqrt(double(s.m)))),
        W_O(make_input(s.h * s.d * s.m, 4, 1.0 / std::sqrt(double(s.h * s.d)))),
        b_Q(make_input(s.h * s.d, 5, 0.1)),
        b_K(make_input(s.h * s.d, 6, 0.1)),
        b_V(make_input(s.h * s.d, 7, 0.1)),
        b_O(make_input(s.m, 8, 0.1)) {}
};

}  // namespace bench
