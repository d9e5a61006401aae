// load_npy<Tensor>(path, dims...) given the extent of a dim the tensor type
// lacks: reported at compile time, before the file is opened.
// EXPECT: dimsum: argument names a dim that the tensor does not have
// EXPECT: argument_is_not_a_dim_of_the_tensor<nheads, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"

int main(int argc, char**) {
  if (argc > 1) {  // compiled, never run: there is no file
#ifdef DIMSUM_SHOULD_FAIL
    auto t = dimsum::load_npy<x_t>("x.npy", nheads{2});
#else
    auto t = dimsum::load_npy<x_t>("x.npy", batch{2});
#endif
    (void)t;
  }
}
