// dist::gradient_reducer over a mesh axis the mesh does not have (the data
// axis of a model-only mesh).
// EXPECT: dimsum: average_gradients over a mesh axis that the mesh does not have
// EXPECT: average_over_a_mesh_axis_the_mesh_lacks<data, dimsum::dist::detail::axes<model> ?>
#include "common.hpp"
#include <dimsum/training.hpp>

struct tiny {
  BOOST_HANA_DEFINE_STRUCT(tiny, (dimsum::parameter<float, d_model>, w));
};

int main(int argc, char**) {
  dist::mesh<model> m(MPI_COMM_WORLD, model{1});
  tiny t;
  if (argc > 5) {  // compiled, never run
#ifdef DIMSUM_SHOULD_FAIL
    dist::gradient_reducer<data> r(m, t);
#else
    dist::gradient_reducer<model> r(m, t);
#endif
    r.finish();
  }
}
