// One training step (forward, backward, AdamW with PyTorch's defaults) of the
// example's decoder-only character transformer
// (examples/char_transformer_model.hpp, as examples/train_char_transformer
// trains it) -- the dimsum entry of bench/compare's "train_lm" kind;
// bench/peers/torch_train.py's "lm" mode is the same model in PyTorch.
//
//   dimsum_train_lm BATCH POSN D_MODEL HEADS LAYERS VOCAB D_MLP [reps] [--out file.f32]
//
// Parameter number k in the model's dotted-name order (nn::for_each_parameter)
// holds bench::input_value(i, 20 + k, 0.1) (an nn::linear's weight: the
// transpose of the (in, out) matrix filled so), layer-norm weights 1 plus that;
// the ids and targets are (7 i + 3) mod VOCAB and (5 i + 1) mod VOCAB over
// the flat (batch, posn) index. The loss is the mean cross entropy. Prints
// peak_extra_mib and median_ms of one step; with --out, writes the first
// step's gradients as raw float32, parameters in the same order.
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <dimsum/dimsum.hpp>
#include <dimsum/training.hpp>

#include "../../examples/char_transformer_forward.hpp"
#include "inputs.hpp"
#include "lm_inputs.hpp"

int main(int argc, char** argv) {
  if (argc < 8) {
    std::fprintf(stderr, "usage: %s BATCH POSN D_MODEL HEADS LAYERS VOCAB D_MLP [reps] [--out file.f32]\n", argv[0]);
    return 2;
  }
  std::size_t s[7];
  for (int i = 0; i < 7; ++i) s[i] = std::stoul(argv[i + 1]);
  bench::peer_args args;
  args.ok = true;
  if (argc > 8 && argv[8][0] != '-') args.reps = std::atoi(argv[8]);
  for (int i = 8; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--out") == 0) args.out_path = argv[i + 1];
  const std::size_t B = s[0], P = s[1];
  char_lm::model m = bench::lm_model(s);
  const auto [x, y] = bench::lm_batch(0, B, P, s[5]);
  dimsum::optim::adamw opt;
  std::vector<float> grads;
  auto step = [&] {
    dimsum::nn::zero_grad(m);
    dimsum::grad::tape t;
    t.backward(char_lm::loss(t, m, x, y));
    if (grads.empty())
      dimsum::nn::for_each_parameter(m, [&](const std::string&, auto& p) {
        grads.insert(grads.end(), p.grad.data(), p.grad.data() + p.grad.size());
      });
    opt.step(m);
  };
  step();  // the first step's gradients, before any update
  const std::vector<float> first = grads;
  std::printf("kernel=dimsum %s\n", dimsum::kernel_isa());
  // The tape keeps the memory a step frees for the next one (grad/tape.hpp);
  // hand it back first, so that peak_extra_mib counts what one step needs,
  // as it does for the other peers, rather than 0.
  malloc_trim(0);
  return bench::time_and_write(args, step, [&] { return first.data(); }, first.size());
}
