// nn::linear built PyTorch's way, nn.Linear(30, 10), from plain numbers:
// one dimsum error naming the layer's dims and what was given (it was
// "no matching function", 23 lines on g++). The dims swapped,
// linear(d_head{}, d_model{}), gives the same checker.
// EXPECT: dimsum: nn::linear<T, In, Out> is built as linear\(In\{in\}, Out\{out\}\)
// EXPECT: linear_is_built_from_its_in_then_its_out_dim<d_model, d_head, int, int>
#include "common.hpp"
#include <dimsum/nn/nn.hpp>

int main() {
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::nn::linear<float, d_model, d_head> lin(30, 10);
#else
  dimsum::nn::linear<float, d_model, d_head> lin(d_model{}, d_head{});
#endif
  (void)lin;
}
