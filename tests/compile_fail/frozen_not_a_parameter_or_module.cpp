// nn::frozen<X> of a plain tensor member: only a parameter or a module can be
// frozen (a tensor member is a buffer, never trained).
// EXPECT: dimsum: nn::frozen<X> takes a parameter<T, Dims...> or a module
// EXPECT: frozen_takes_a_parameter_or_a_module<dimsum::tensor<float, nheads, d_head> ?>
#include "common.hpp"
#include <dimsum/grad/grad.hpp>
#include <dimsum/nn/module.hpp>

struct model {
#ifdef DIMSUM_SHOULD_FAIL
  BOOST_HANA_DEFINE_STRUCT(model, (dimsum::nn::frozen<dimsum::tensor<float, nheads, d_head>>, table));
#else
  BOOST_HANA_DEFINE_STRUCT(model, (dimsum::nn::frozen<dimsum::parameter<float, nheads, d_head>>, table));
#endif
};

int main() {
  model m;
  (void)m;
}
