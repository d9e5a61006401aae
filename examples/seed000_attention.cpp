// Seed 000: the einops HiddenAttention as contractions (examples/attention.hpp),
// run with the weights and input that PyTorch used, every intermediate
// compared with PyTorch's.
#include "attention.hpp"
#include "seed_fixtures.hpp"

using namespace seed000;
using dimsum::tensor;

DIMSUM_DIM(d_model, 30);
DIMSUM_DIM(nheads, 2);
DIMSUM_DIM(d_head, 10);

int main() {
  std::cout << "kernels: " << dimsum::kernel_isa() << "\n";
  attention_weights<d_model, nheads, d_head> w;  // nn.Parameters, zeros of the static extents
  dimsum::load_npy_dir(seeds::fixture("seed000"), w, dimsum::non_strict);  // W_Q.npy ... b_O.npy, by member name
  auto x = seeds::load<tensor<float, batch, posn, d_model>>("seed000/x.npy");

  auto t = attention(x, w);

  double worst = 0;
  worst = std::max(worst, seeds::report("q", t.q, "seed000/q.npy"));
  worst = std::max(worst, seeds::report("k", t.k, "seed000/k.npy"));
  worst = std::max(worst, seeds::report("v", t.v, "seed000/v.npy"));
  worst = std::max(worst, seeds::report("scores", t.scores, "seed000/attn_scores_scaled.npy"));
  worst = std::max(worst, seeds::report("masked", t.masked, "seed000/attn_scores_masked.npy"));
  worst = std::max(worst, seeds::report("pattern", t.pattern, "seed000/pattern.npy"));
  worst = std::max(worst, seeds::report("z", t.z, "seed000/z.npy"));
  worst = std::max(worst, seeds::report("out", t.out, "seed000/out.npy"));
  std::printf(worst < 1e-5 ? "passed all tests!\n" : "Uh oh your model doesn't give the same outputs\n");
  return worst < 1e-5 ? 0 : 1;
}
