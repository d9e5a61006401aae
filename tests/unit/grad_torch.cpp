// Gradients against PyTorch autograd: fixtures written by
// tests/reference/make_grad_fixtures.py (float64, loss = sum(y * r) with a
// fixed random r). Each op case runs in double and must agree to 1e-10;
// the seed-000 attention layer runs in float32 on the seed's own fixture
// and every parameter's gradient must agree within float32 tolerance.
#include "grad_check.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include <dimsum/io/npy.hpp>

using dimsum::parameter;
using dimsum::tensor;
namespace grad = dimsum::grad;
using namespace grad_check;

namespace {
DIMSUM_DIM(a);
DIMSUM_DIM(b);
DIMSUM_DIM(c);
DIMSUM_DIM(e);
DIMSUM_DIM(h);
DIMSUM_DIM(d);
DIMSUM_DIM(hd);
DIMSUM_DIM(q);
DIMSUM_DIM(k);

}  // namespace

TEST_CASE("grad vs torch: einsum with a grouped input axis and three operands", "[grad][torch]") {
  auto x = load_parameter<parameter<double, a, hd>>("einsum_group_x");
  auto w = load_parameter<parameter<double, h, d, c>>("einsum_group_w");
  const auto s = load<tensor<double, c>>("einsum_group_s");
  torch_case("einsum_group", [&](grad::tape&, auto x, auto w) {
    return dimsum::einsum<"a (h d), h d c, c -> a">(x, w, s);
  }, {"x", "w"}, x, w);
}

TEST_CASE("grad vs torch: einsum into a named output group", "[grad][torch]") {
  auto x = load_parameter<parameter<double, a, c>>("einsum_out_group_x");
  auto w = load_parameter<parameter<double, c, h, d>>("einsum_out_group_w");
  torch_case("einsum_out_group", [](grad::tape&, auto x, auto w) {
    return dimsum::einsum<"a c, c h d -> a hd(h d)">(x, w);
  }, {"x", "w"}, x, w);
}

TEST_CASE("grad vs torch: einsum of three operands (named form)", "[grad][torch]") {
  auto x = load_parameter<parameter<double, a, b>>("einsum_three_x");
  auto y = load_parameter<parameter<double, b, c>>("einsum_three_y");
  auto z = load_parameter<parameter<double, c, e>>("einsum_three_z");
  torch_case("einsum_three", [](grad::tape&, auto x, auto y, auto z) { return dimsum::einsum<a, e>(x, y, z); },
             {"x", "y", "z"}, x, y, z);
}

TEST_CASE("grad vs torch: element-wise with broadcasting by name", "[grad][torch]") {
  auto x = load_parameter<parameter<double, a, b>>("broadcast_x");
  auto bias = load_parameter<parameter<double, b>>("broadcast_bias");
  auto col = load_parameter<parameter<double, a>>("broadcast_col");
  torch_case("broadcast", [](grad::tape&, auto x, auto bias, auto col) { return (x + bias) * x / col - bias; },
             {"x", "bias", "col"}, x, bias, col);
}

TEST_CASE("grad vs torch: scalars, exp and sqrt", "[grad][torch]") {
  auto x = load_parameter<parameter<double, a, b>>("scalars_x");
  torch_case("scalars", [](grad::tape&, auto x) { return 2.5 * x - 1.0 / (x * x + 1.0); }, {"x"}, x);
  auto y = load_parameter<parameter<double, a, b>>("exp_sqrt_x");
  torch_case("exp_sqrt", [](grad::tape&, auto x) { return dimsum::exp(x) + dimsum::sqrt(x * x + 1.0); }, {"x"}, y);
}

TEST_CASE("grad vs torch: sum, mean, max (amax)", "[grad][torch]") {
  using p3 = parameter<double, a, b, c>;
  auto x = load_parameter<p3>("sum_b_x");
  torch_case("sum_b", [](grad::tape&, auto x) { return dimsum::sum<b>(x); }, {"x"}, x);
  auto y = load_parameter<p3>("mean_c_x");
  torch_case("mean_c", [](grad::tape&, auto x) { return dimsum::mean<c>(x); }, {"x"}, y);
  auto z = load_parameter<p3>("max_a_x");
  torch_case("max_a", [](grad::tape&, auto x) { return dimsum::max<a>(x); }, {"x"}, z);
}

TEST_CASE("grad vs torch: softmax, causal mask, a fully masked row", "[grad][torch]") {
  auto x = load_parameter<parameter<double, a, k>>("softmax_k_x");
  torch_case("softmax_k", [](grad::tape&, auto x) { return dimsum::softmax<k>(x); }, {"x"}, x);
  auto s = load_parameter<parameter<double, a, q, k>>("causal_softmax_s");
  torch_case("causal_softmax", [](grad::tape&, auto s) {
    return dimsum::softmax<k>(dimsum::causal_mask<q, k>(s, -std::numeric_limits<double>::infinity()));
  }, {"s"}, s);
  auto m = load_parameter<parameter<double, a, q, k>>("masked_softmax_s");
  const auto mask = load<tensor<bool, q, k>>("masked_softmax_mask");
  torch_case("masked_softmax", [&](grad::tape&, auto s) { return dimsum::softmax<k>(dimsum::masked_fill(s, mask, -1e9)); },
             {"s"}, m);
}

TEST_CASE("grad vs torch: where and rearrange", "[grad][torch]") {
  auto x = load_parameter<parameter<double, a, b>>("where_x");
  auto y = load_parameter<parameter<double, b>>("where_y");
  const auto cond = load<tensor<bool, a, b>>("where_cond");
  torch_case("where", [&](grad::tape&, auto x, auto y) { return dimsum::where(cond, x, y); }, {"x", "y"}, x, y);
  auto r = load_parameter<parameter<double, a, hd>>("rearrange_x");
  torch_case("rearrange", [](grad::tape&, auto x) { return dimsum::rearrange<"a (h d) -> h a d">(x, h{2}); }, {"x"}, r);
}
