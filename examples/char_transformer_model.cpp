// The character transformer's forward pass and loss, compiled on their own:
// the translation unit that instantiates the gradient rules, beside
// train_char_transformer.cpp (the training program), so that the two
// compile in parallel (docs/performance.md, "Compile time").
#include "char_transformer_forward.hpp"
