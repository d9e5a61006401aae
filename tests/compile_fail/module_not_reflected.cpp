// Calling a module function on a struct whose members Hana cannot see.
// EXPECT: dimsum: a module must declare its members with BOOST_HANA_DEFINE_STRUCT
// EXPECT: module_is_not_a_reflected_struct<plain>
#include <dimsum/optim/optim.hpp>

DIMSUM_DIM(d_model, 4);

struct plain {
  dimsum::parameter<float, d_model> w;
};
struct reflected {
  BOOST_HANA_DEFINE_STRUCT(reflected, (dimsum::parameter<float, d_model>, w));
};

int main() {
#ifdef DIMSUM_SHOULD_FAIL
  plain m;
#else
  reflected m;
#endif
  dimsum::nn::zero_grad(m);
  dimsum::optim::sgd opt({.lr = 0.1});
  opt.step(m);
  return int(dimsum::nn::parameter_count(m)) - 4;
}
