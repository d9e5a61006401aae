// The character transformer's forward pass and loss, compiled on their own:
// the translation unit that instantiates the gradient rules, beside
// train_char_transformer.cpp (the training program), so that the two
// compile in parallel (docs/performance.md, "Compile time").
#include "char_transformer_forward.hpp"

namespace char_lm {

// The mixed-precision loss: the bf16 forward pass, its logits cast to
// float32 for the cross entropy (declared in char_transformer_model.hpp).
var<float> loss_bf16(tape& t, model& m, const ids_t& x, const ids_t& y) {
  return dimsum::cross_entropy<vocab>(dimsum::cast<float>(forward_as<dimsum::bf16>(t, m, x)), y);
}

}  // namespace char_lm
