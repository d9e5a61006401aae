// a mesh that names one axis twice.
// EXPECT: dimsum: a mesh names an axis twice
// EXPECT: mesh_names_an_axis_twice<model, model ?>
#include "common.hpp"

int main() {
#ifdef DIMSUM_SHOULD_FAIL
  dist::mesh<model, model> m(MPI_COMM_WORLD, model{1}, model{1});
#else
  dist::mesh<model, data> m(MPI_COMM_WORLD, model{1}, data{1});
#endif
  (void)m.size();
}
