// split_dim and merge_dims on vars (grad/rules/regroup.hpp): the gradient
// of a reshape is the output's gradient reshaped back. Checked by hand
// (a split or merge times a known tensor: the gradient is that tensor's
// elements at the reshaped positions), against central finite differences,
// and against PyTorch's view/reshape autograd in float64
// (tests/reference/make_nn_fixtures.py, fixtures/nn/tape/regroup/).
#include <catch2/catch.hpp>

#include <array>
#include <string>

#include <dimsum/grad/grad.hpp>
#include <dimsum/io/npy.hpp>

#include "grad_check.hpp"

namespace {
DIMSUM_DIM(a);
DIMSUM_DIM(p);
DIMSUM_DIM(f);
DIMSUM_DIM(h);
DIMSUM_DIM(d);

using dimsum::dim_list;
using dimsum::parameter;
using dimsum::tensor;
namespace grad = dimsum::grad;
using heads = dim_list<h, d>;

std::string fixture(const std::string& name) {
  return std::string(DIMSUM_SOURCE_DIR) + "/tests/reference/fixtures/nn/tape/regroup/" + name + ".npy";
}
}  // namespace

TEST_CASE("grad split_dim: the value is the split and the gradient lands at the unsplit positions", "[grad][regroup]") {
  tensor<double, a, f> x(a{2}, f{6});
  for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = double(i) * 0.5 - 1.0;
  tensor<double, h, d> w(h{2}, d{3});
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 3; ++j) w(h{i}, d{j}) = 10.0 * double(i) + double(j);
  grad::tape t;
  auto xv = t.watch(x);
  auto y = dimsum::split_dim<1, heads>(xv, {2, 3});
  static_assert(std::is_same_v<decltype(y), grad::var<double, a, h, d>>);
  for (std::size_t n = 0; n < 2; ++n)
    for (std::size_t i = 0; i < 2; ++i)
      for (std::size_t j = 0; j < 3; ++j) CHECK(y.value()(a{n}, h{i}, d{j}) == x(a{n}, f{3 * i + j}));
  t.backward(dimsum::sum<a, h, d>(y * w));
  // d/dx[n, f] sum(y * w) = w[f / 3, f % 3] = 10 (f / 3) + f % 3
  const auto& gx = dimsum::gradient<a, f>(xv);
  for (std::size_t n = 0; n < 2; ++n)
    for (std::size_t k = 0; k < 6; ++k) CHECK(gx(a{n}, f{k}) == 10.0 * double(k / 3) + double(k % 3));
}

TEST_CASE("grad merge_dims: the value is the merge and the gradient is split back", "[grad][regroup]") {
  tensor<double, a, h, d> x(a{2}, h{2}, d{3});
  for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = double(i) + 0.25;
  tensor<double, f> c(f{6});
  for (std::size_t k = 0; k < 6; ++k) c(f{k}) = double(k) + 1.0;
  grad::tape t;
  auto xv = t.watch(x);
  auto m = dimsum::merge_dims<1, 2, f>(xv);
  static_assert(std::is_same_v<decltype(m), grad::var<double, a, f>>);
  CHECK(m.extent<f>() == 6);
  for (std::size_t n = 0; n < 2; ++n)
    for (std::size_t k = 0; k < 6; ++k) CHECK(m.value()(a{n}, f{k}) == x(a{n}, h{k / 3}, d{k % 3}));
  t.backward(dimsum::sum<a, f>(m * c));
  // d/dx[n, i, j] sum(m * c) = c[3 i + j] = 3 i + j + 1
  const auto& gx = dimsum::gradient<a, h, d>(xv);
  for (std::size_t n = 0; n < 2; ++n)
    for (std::size_t i = 0; i < 2; ++i)
      for (std::size_t j = 0; j < 3; ++j) CHECK(gx(a{n}, h{i}, d{j}) == double(3 * i + j + 1));
}

TEST_CASE("grad split_dim: a var used by a split and by another operation gets both gradients", "[grad][regroup]") {
  // x (f = 4) split into (h = 2, d = 2): loss = sum(split(x) * w) + sum(x * x)
  // gives dx[k] = w[k / 2, k % 2] + 2 x[k], in either order of recording.
  tensor<double, f> x(f{4});
  for (std::size_t k = 0; k < 4; ++k) x(f{k}) = double(k) - 1.5;
  tensor<double, h, d> w(h{2}, d{2});
  for (std::size_t i = 0; i < w.size(); ++i) w.data()[i] = 3.0 * double(i) + 1.0;
  for (bool split_first : {true, false}) {
    INFO("split recorded first: " << split_first);
    grad::tape t;
    auto xv = t.watch(x);
    auto loss = split_first ? dimsum::sum<h, d>(dimsum::split_dim<0, heads>(xv, {2, 2}) * w) + dimsum::sum<f>(xv * xv)
                            : dimsum::sum<f>(xv * xv) + dimsum::sum<h, d>(dimsum::split_dim<0, heads>(xv, {2, 2}) * w);
    t.backward(loss);
    const auto& gx = dimsum::gradient<f>(xv);
    for (std::size_t k = 0; k < 4; ++k) CHECK(gx(f{k}) == w.data()[k] + 2.0 * x(f{k}));
  }
}

TEST_CASE("grad split_dim and merge_dims: the gradient equals central finite differences", "[grad][regroup]") {
  auto x = grad_check::random_parameter<parameter<double, a, p, f>>(3, 1.0, a{2}, p{3}, f{6});
  auto s = grad_check::random_parameter<parameter<double, h, d>>(4, 1.0, h{2}, d{3});
  // a split in the middle, a softmax over one of the new dims (so the order
  // of the split matters), a merge back, a broadcast weight on the split dims
  grad_check::check(
      [](grad::tape&, auto xv, auto sv) {
        auto y = dimsum::softmax<d>(dimsum::split_dim<2, heads>(xv, {2, 3})) * sv;
        return grad_check::loss_of(dimsum::merge_dims<2, 2, f>(y));
      },
      x, s);
}

TEST_CASE("grad split_dim and merge_dims: PyTorch's view and reshape gradients", "[grad][regroup]") {
  const auto x = dimsum::load_npy<tensor<double, a, p, f>>(fixture("x"));
  const auto c = dimsum::load_npy<tensor<double, f>>(fixture("c"));
  const auto r = dimsum::load_npy<tensor<double, a, p, f>>(fixture("r"));
  grad::tape t;
  auto xv = t.watch(x);
  // torch.softmax(x.view(2, 4, 2, 3), -1).reshape(2, 4, 6) * c
  auto y = dimsum::merge_dims<2, 2, f>(dimsum::softmax<d>(dimsum::split_dim<2, heads>(xv, {2, 3}))) * c;
  t.backward(dimsum::sum<a, p, f>(y * r));
  const auto want = dimsum::load_npy<tensor<double, a, p, f>>(fixture("grad_x"));
  const auto& gx = dimsum::gradient<a, p, f>(xv);
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(gx.data()[i] == Approx(want.data()[i]).margin(1e-14));
}

TEST_CASE("grad split_dim: extents whose product differs throw shape_error, as on tensors", "[grad][regroup]") {
  grad::tape t;
  auto xv = t.watch(tensor<double, a, f>(a{2}, f{6}));
  CHECK_THROWS_AS((dimsum::split_dim<1, heads>(xv, {4, 2})), dimsum::shape_error);
  CHECK_THROWS_WITH((dimsum::split_dim<1, heads>(xv, {4, 2})), Catch::Contains("split of dim 'f' of extent 6"));
}
