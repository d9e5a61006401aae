// Saving a parameter whose value type has no .safetensors dtype.
// EXPECT: dimsum: a .safetensors checkpoint holds parameters of float, double or std::int8_t
// EXPECT: parameter_type_has_no_safetensors_dtype<long double>
#include <dimsum/io/state_dict.hpp>

DIMSUM_DIM(d_model, 4);

#ifdef DIMSUM_SHOULD_FAIL
using value = long double;
#else
using value = double;
#endif

struct net {
  BOOST_HANA_DEFINE_STRUCT(net, (dimsum::parameter<value, d_model>, w));
};

int main() {
  net m;
  dimsum::save_safetensors("unused.safetensors", m);
  dimsum::load_safetensors("unused.safetensors", m);
}
