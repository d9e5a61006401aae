// Numeric edge cases of softmax and masking against torch.softmax: scores
// in the thousands, rows masked with -inf (NaN, as PyTorch) and with -1e9
// (uniform), partly masked rows.
#include "golden.hpp"

#include <limits>

using dimsum::tensor;

namespace {
DIMSUM_DIM(q_posn);
DIMSUM_DIM(k_posn);
}  // namespace

TEST_CASE("golden edge: softmax rows", "[golden][edge]") {
  for (const char* name : {"softmax_large", "softmax_near_large", "softmax_all_neginf", "softmax_all_neg1e9",
                           "softmax_partial_neginf"}) {
    auto in = golden::load<tensor<float, k_posn>>(std::string("edge/") + name + "_in.npy");
    golden::check(dimsum::softmax<k_posn>(in), std::string("edge/") + name + "_out.npy");
  }
  auto rows = golden::load<tensor<float, q_posn, k_posn>>("edge/softmax_rows_in.npy");
  golden::check(dimsum::softmax<k_posn>(rows), "edge/softmax_rows_out.npy");
}

TEST_CASE("golden edge: a fully masked query row", "[golden][edge]") {
  auto scores = golden::load<tensor<float, q_posn, k_posn>>("edge/masked_scores_in.npy");
  // true = attend, as in seed 003 (masked_fill(mask == 0, value)).
  auto keep = golden::load<tensor<bool, q_posn, k_posn>>("edge/masked_mask.npy");
  auto mask = dimsum::eval(!keep);
  const float inf = std::numeric_limits<float>::infinity();
  auto filled_inf = dimsum::eval(dimsum::masked_fill(scores, mask, -inf));
  golden::check(filled_inf, "edge/masked_neginf_filled.npy");
  golden::check(dimsum::softmax<k_posn>(filled_inf), "edge/masked_neginf_softmax.npy");
  auto filled_fin = dimsum::eval(dimsum::masked_fill(scores, mask, -1e9f));
  golden::check(filled_fin, "edge/masked_neg1e9_filled.npy");
  golden::check(dimsum::softmax<k_posn>(filled_fin), "edge/masked_neg1e9_softmax.npy");
}
