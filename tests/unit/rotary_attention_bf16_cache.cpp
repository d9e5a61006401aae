// nn::rotary_attention<float> decoding with a bf16 key/value cache
// (`make_cache<bf16>`): a prompt, then one token at a time, against the
// float64 module's causal forward without a cache (tested against PyTorch
// in tests/unit/nn_transformer.cpp) on the same input, the weights of the
// PyTorch fixture, the input the fixture's scaled by 1/4 (scores of a few
// units, so that the bound below is tight enough to tell).
//
// Tolerance (per output element, derived). The bf16 path rounds the
// queries, the cached keys and values to bf16 (relative error at most
// u = 2^-8 each) and the attention's output z once; everything else is
// float32 (relative 2^-24 per operation, covered by 1e-5 (1 + |want|)).
// RoPE keeps each head's Euclidean norm, so for query row i of head h the
// scores s_ij = scale q_i·k_j move by at most
// scale sum_d |q_d k_d| ((1 + u)^2 - 1) <= 2.01 u S_i, with
// S_i = scale ||q_i|| max_j ||k_j|| (Cauchy-Schwarz; the norms read from
// the float64 projections q_proj(x), k_proj(x), head by head). A softmax
// weight of the row moves by a relative exp(2 * 2.01 u S_i) - 1 <= 4.1 u S_i
// (its score and the row's normaliser); with v rounded (u) and z rounded
// (u), |dz_c| <= (4.1 u S_i + 2.1 u) Vmax, Vmax = max |v|. The output is
// o_proj(z): |dout_m| <= sum_(h, c) |W_o[m, (h, c)]| |dz_(h, c)|. We check
// against that sum with (5 u S_i + 3 u) Vmax per head, + 1e-5 (1 + |want|).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>

#include <dimsum/dimsum.hpp>
#include <dimsum/io/npy_dir.hpp>
#include <dimsum/nn/rotary_attention.hpp>
#include <dimsum/ops/slice.hpp>

#include "golden.hpp"

namespace {

using namespace dimsum;

DIMSUM_DIM(batch);
DIMSUM_DIM(posn);
DIMSUM_DIM(d_model);
DIMSUM_DIM(heads);
DIMSUM_DIM(kv_heads);
DIMSUM_DIM(d_head);

using xm_t = tensor<double, batch, posn, d_model>;
template <class T>
using module_t = nn::rotary_attention<T, posn, d_model, heads, kv_heads, d_head>;

/// The Euclidean norm of head h's slice (`width` features from h * width)
/// of row r of the projections p (rows of n_heads * width features).
template <class P>
double head_norm(const P& p, std::size_t r, std::size_t h, std::size_t n_heads, std::size_t width) {
  double s = 0;
  for (std::size_t d = 0; d < width; ++d) {
    const double x = p.data()[(r * n_heads + h) * width + d];
    s += x * x;
  }
  return std::sqrt(s);
}

}  // namespace

TEST_CASE("nn::rotary_attention<float> with a bf16 key/value cache: a prompt then one token at a time equals the "
          "float64 causal forward within bf16's rounding",
          "[nn][modules][kv_cache][bf16]") {
  for (const std::size_t window : {std::size_t{0}, std::size_t{3}}) {
    const std::string dir = std::string("transformer/") + (window ? "rotary_attention_window/" : "rotary_attention/");
    INFO(dir);
    module_t<double> m64(d_model{8}, heads{4}, kv_heads{2}, d_head{4});
    m64.window = window;
    dimsum::load_npy_dir(golden::fixture(dir + "params"), m64);
    module_t<float> m(d_model{8}, heads{4}, kv_heads{2}, d_head{4});
    m.window = window;
    m.q_proj.weight.value = cast<float>(m64.q_proj.weight.value);
    m.k_proj.weight.value = cast<float>(m64.k_proj.weight.value);
    m.v_proj.weight.value = cast<float>(m64.v_proj.weight.value);
    m.o_proj.weight.value = cast<float>(m64.o_proj.weight.value);
    const xm_t x = golden::load<xm_t>(dir + "x.npy") * 0.25;  // (batch 2, posn 5, d_model 8)
    const xm_t want = m64(x);
    const tensor<float, batch, posn, d_model> x32 = cast<float>(x);

    // the bound of the file comment, from the float64 projections (rows b * 5 + i)
    const double scale = 0.5, u = 1.0 / 256;  // 1 / sqrt(d_head); bf16's unit roundoff
    const auto qp = eval(m64.q_proj(x));
    const auto kp = eval(m64.k_proj(x));
    const auto vp = eval(m64.v_proj(x));
    double kmax = 0, vmax = 0;
    for (std::size_t r = 0; r < 10; ++r)
      for (std::size_t g = 0; g < 2; ++g) kmax = std::max(kmax, head_norm(kp, r, g, 2, 4));
    for (std::size_t i = 0; i < vp.size(); ++i) vmax = std::max(vmax, std::abs(vp.data()[i]));
    auto tolerance = [&](std::size_t b, std::size_t i, std::size_t out, double w) {
      double t = 0;  // W_o laid out (d_model, q_features), q_features = (heads, d_head)
      for (std::size_t h = 0; h < 4; ++h) {
        const double dz = (5 * u * scale * head_norm(qp, b * 5 + i, h, 4, 4) * kmax + 3 * u) * vmax;
        for (std::size_t c = 0; c < 4; ++c) t += std::abs(m64.o_proj.weight.value.data()[out * 16 + h * 4 + c]) * dz;
      }
      return t + 1e-5 * (1 + std::abs(w));
    };

    auto cache = m.make_cache<bf16>(5, batch{2});
    static_assert(std::is_same_v<decltype(cache), kv_cache<bf16, module_t<float>::key_posn, batch,
                                                           module_t<float>::key_posn, kv_heads, d_head>>);
    const std::size_t bounds[] = {0, 2, 3, 4, 5};  // positions [0, 2) as a prompt, then 2, 3 and 4
    std::size_t bad = 0;
    double worst = 0;
    for (std::size_t c = 0; c + 1 < std::size(bounds); ++c) {
      const std::size_t p0 = bounds[c], p1 = bounds[c + 1];
      const tensor<float, batch, posn, d_model> y = m(slice<posn>(x32, p0, p1), cache);
      CHECK(cache.size() == p1);
      REQUIRE(y.extent<posn>() == p1 - p0);
      for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t p = p0; p < p1; ++p)
          for (std::size_t d = 0; d < 8; ++d) {
            const double got = y(batch{b}, posn{p - p0}, d_model{d}), w = want(batch{b}, posn{p}, d_model{d});
            const double tol = tolerance(b, p, d, w);
            worst = std::max(worst, std::abs(got - w) / tol);
            if (!(std::abs(got - w) <= tol)) {
              if (bad < 5) UNSCOPED_INFO("b " << b << " p " << p << " d " << d << ": got " << got << ", want " << w);
              ++bad;
            }
          }
    }
    UNSCOPED_INFO("worst error " << worst << " of its tolerance");
    double ymax = 0, tmax = 0;
    for (std::size_t b = 0; b < 2; ++b)
      for (std::size_t p = 0; p < 5; ++p)
        for (std::size_t d = 0; d < 8; ++d) {
          ymax = std::max(ymax, std::abs(want(batch{b}, posn{p}, d_model{d})));
          tmax = std::max(tmax, tolerance(b, p, d, 0));
        }
    UNSCOPED_INFO("largest |y| " << ymax << ", largest tolerance " << tmax);
    CHECK(bad == 0);
    // the cache holds bf16: half the bytes of a float cache
    CHECK(sizeof(decltype(cache)::value_type) * 2 == sizeof(float));
  }
}
