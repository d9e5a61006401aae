// Seed 000 (einops HiddenAttention) against PyTorch: every intermediate of
// examples/attention.hpp with the fixture's weights, and the causal-mask
// test cases (square and non-square).
#include "golden.hpp"

#include <limits>

#include "../../examples/attention.hpp"

using namespace seed000;
using dimsum::tensor;

namespace {
DIMSUM_DIM(d_model, 30);
DIMSUM_DIM(nheads, 2);
DIMSUM_DIM(d_head, 10);
}  // namespace

TEST_CASE("golden seed 000: q, k, v, scores, mask, pattern, z, out", "[golden][seed000]") {
  attention_weights<d_model, nheads, d_head> w;
  dimsum::load_npy_dir(golden::fixture("seed000"), w, dimsum::non_strict);  // W_Q.npy ... b_O.npy beside x.npy, q.npy, ...
  auto x = golden::load<tensor<float, batch, posn, d_model>>("seed000/x.npy");

  auto t = attention(x, w);
  golden::check(t.q, "seed000/q.npy");
  golden::check(t.k, "seed000/k.npy");
  golden::check(t.v, "seed000/v.npy");
  golden::check(t.raw_scores, "seed000/attn_scores.npy");
  golden::check(t.scores, "seed000/attn_scores_scaled.npy");
  golden::check(t.masked, "seed000/attn_scores_masked.npy");
  golden::check(t.pattern, "seed000/pattern.npy");
  golden::check(t.z, "seed000/z.npy");
  golden::check(t.out, "seed000/out.npy");
}

TEST_CASE("golden seed 000: apply_causal_mask on the seed's 3x3 case and non-square cases", "[golden][seed000]") {
  const float inf = std::numeric_limits<float>::infinity();
  for (const char* shape : {"3x3", "3x5", "5x3"}) {
    auto in = golden::load<tensor<float, q_posn, k_posn>>(std::string("seed000/causal_mask_") + shape + "_in.npy");
    golden::check(dimsum::causal_mask<q_posn, k_posn>(in, -inf),
                  std::string("seed000/causal_mask_") + shape + "_out.npy");
  }
}
