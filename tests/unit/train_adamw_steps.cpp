// Ten AdamW steps of the example's transformer (examples/char_transformer_model.hpp,
// at vocab 11, context 8, d_model 16, 2 heads, d_mlp 32, 2 blocks, batch 3)
// against PyTorch: tests/reference/make_train_fixtures.py builds a replica of
// the same model op for op, starts from the same float32 parameters
// (fixtures/train/init/<dotted name>.npy), runs forward, backward and
// torch.optim.AdamW(lr 1e-2, eps 1e-6, weight_decay 1e-2) on ten fixed
// batches in float64, and saves the loss before each update and every
// parameter after the tenth. Here dimsum runs the same ten steps in float32
// (the model's parameters are float) with the tape, nn::zero_grad and
// optim::adamw, and must reproduce both. The first step's gradients are
// compared too (fixtures/train/grad0/), so that a failure says whether the
// gradients or the optimizer went wrong.
//
// Tolerances. The reference is float64; dimsum runs in float32, so the
// comparison measures float32 rounding carried through ten steps, plus any
// real difference. The script also runs PyTorch's own float32 kernels on the
// same steps: they land 2.9e-7 from the float64 losses and 1.3e-6 from the
// float64 parameters. Adam is the delicate part: its update
// lr * m / (sqrt(v) + eps) is normalised, so an element whose gradient is
// near zero moves by up to lr whatever the gradient's size, and float32
// noise in a gradient of size ~eps could flip or scale a whole step. eps is
// therefore 1e-6 rather than torch's 1e-8: an element takes a full step of
// lr only when its gradient is well above float32 rounding noise, and below
// eps the step is lr * g / eps, proportional to g (so noise in g moves it
// proportionally, not by a whole lr). lr is 1e-2 so that the
// parameters travel far (up to 0.09 over the ten steps) compared with the
// tolerance. Measured when the test was written: dimsum's float32 run is
// within 3.1e-7 of the float64 losses and 1.1e-6 of the float64 parameters,
// the same as PyTorch's own float32 run. The bounds are 2e-6 for each loss
// (the loss is ~2.5: 8e-7 relative) and 1e-5 for each parameter (0.1% of one
// step of size lr), about 7x and 9x the measured spread, leaving room for a
// different summation order in the kernels. The first step's gradients:
// each element within 1e-5 of its tensor's largest element (measured 3e-7;
// PyTorch's own float32 8e-7). What the loss and parameter bounds exclude
// (each perturbation tried in the float64 script, largest loss / parameter
// change over the ten steps): layer-norm eps 1e-6 instead of 1e-5
// (1.2e-5 / 4.3e-4), GELU's tanh form instead of erf (4.1e-5 / 4.2e-4),
// no weight decay (3.8e-4 / 1.2e-3), Adam eps 1e-8 instead of 1e-6
// (8.7e-5 / 1.7e-3), attention scale 1/4 instead of 1/sqrt(8) (2.4e-2 /
// 7.2e-2); a wrong sign or bias correction moves elements by ~lr = 1e-2.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include <dimsum/io/npy.hpp>
#include <dimsum/io/state_dict.hpp>
#include <dimsum/nn/module.hpp>
#include <dimsum/optim/adamw.hpp>

#include "../../examples/char_transformer_forward.hpp"

namespace {
DIMSUM_DIM(step);

const std::string dir = std::string(DIMSUM_SOURCE_DIR) + "/tests/reference/fixtures/train/";
constexpr std::size_t steps = 10;

/// Compares every parameter's `value` (or `grad`) with the float64
/// <subdir>/<dotted name>.npy: each element within abs_tol plus rel_tol
/// times the largest |element| of that reference tensor. Returns the number
/// of parameters compared.
template <class M, class Get>
std::size_t expect_parameters(M& m, const std::string& subdir, Get get, double abs_tol, double rel_tol) {
  std::size_t compared = 0;
  dimsum::nn::for_each_parameter(m, [&](const std::string& name, const auto& p) {
    const auto& got = get(p);
    using W = dimsum::tensor_for_t<double, dimsum::dims_of_t<std::remove_cvref_t<decltype(got)>>>;
    const W want = dimsum::load_npy<W>(dir + subdir + "/" + name + ".npy");
    REQUIRE(want.extents() == got.extents());
    double scale = 0, worst = 0;
    for (std::size_t i = 0; i < want.size(); ++i) scale = std::max(scale, std::abs(want.data()[i]));
    std::size_t bad = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      const double d = std::abs(double(got.data()[i]) - want.data()[i]);
      worst = std::max(worst, d);
      if (!(d <= abs_tol + rel_tol * scale)) ++bad;
    }
    INFO(subdir << "/" << name << ": " << bad << " of " << want.size() << " elements off; largest difference " << worst
                << ", largest reference element " << scale);
    CHECK(bad == 0);
    ++compared;
  });
  return compared;
}

/// Batch `s` of a (step, batch, posn) file as a (batch, posn) tensor.
char_lm::ids_t batch_of(const dimsum::tensor<std::int64_t, step, char_lm::batch, char_lm::posn>& all, std::size_t s) {
  const std::size_t b = all.extent<char_lm::batch>(), p = all.extent<char_lm::posn>();
  char_lm::ids_t out(char_lm::batch{b}, char_lm::posn{p});
  for (std::size_t i = 0; i < b * p; ++i) out.data()[i] = all.data()[s * b * p + i];
  return out;
}
}  // namespace

TEST_CASE("ten AdamW steps of the char transformer reproduce PyTorch's losses and parameters", "[train][e2e]") {
  using ids3 = dimsum::tensor<std::int64_t, step, char_lm::batch, char_lm::posn>;
  const ids3 xs = dimsum::load_npy<ids3>(dir + "x.npy");
  const ids3 ys = dimsum::load_npy<ids3>(dir + "y.npy");
  const auto want_losses = dimsum::load_npy<dimsum::tensor<double, step>>(dir + "losses.npy");
  REQUIRE(xs.extent<step>() == steps);
  REQUIRE(want_losses.extent<step>() == steps);

  char_lm::model m = char_lm::make_model(
      {.vocab = 11, .context = 8, .d_model = 16, .n_layers = 2, .n_heads = 2, .d_mlp = 32});
  dimsum::load_npy_dir(dir + "init", m);  // every name must match the model's: 32 files

  dimsum::optim::adamw opt({.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-6, .weight_decay = 1e-2});
  for (std::size_t s = 0; s < steps; ++s) {
    dimsum::nn::zero_grad(m);
    double loss = 0;
    {
      char_lm::tape t;
      auto l = char_lm::loss(t, m, batch_of(xs, s), batch_of(ys, s));
      loss = l.item();
      t.backward(l);
    }
    if (s == 0) CHECK(expect_parameters(m, "grad0", [](const auto& p) -> const auto& { return p.grad; }, 0.0, 1e-5) == 32);
    opt.step(m);
    INFO("step " << s << ": dimsum " << loss << ", PyTorch float64 " << want_losses.data()[s]);
    CHECK(std::abs(loss - want_losses.data()[s]) <= 2e-6);
  }

  // 2 embeddings, 13 per block, ln_f (2), W_U, b_U
  CHECK(expect_parameters(m, "final", [](const auto& p) -> const auto& { return p.value; }, 1e-5, 0.0) == 32);
}
