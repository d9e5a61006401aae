// The deprecated include paths <dimsum/dist/*.hpp> still compile: each
// forwards to <dimsum/distributed/*.hpp> with one warning naming the new
// path, and code written against them (namespace dimsum::dist, the mesh
// axis macro) is unchanged. Checked by tests/mpi/deprecated/check.cmake.
#include <dimsum/dist/abort_on_error.hpp>
#include <dimsum/dist/checkpoint.hpp>
#include <dimsum/dist/data_parallel.hpp>
#include <dimsum/dist/dist.hpp>
#include <dimsum/dist/mesh.hpp>
#include <dimsum/dist/sharded.hpp>

#include <dimsum/dimsum.hpp>

namespace dist = dimsum::dist;

namespace {
DIMSUM_MESH_AXIS(model);
DIMSUM_DIM(nheads);
DIMSUM_DIM(d_model);
}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int rc = dist::abort_on_error(MPI_COMM_WORLD, [&] {
    dist::mesh<model> m(MPI_COMM_WORLD, model{1});
    dimsum::tensor<float, nheads, d_model> w(nheads{2}, d_model{3});
    w.fill(1.0f);
    const auto s = dist::shard<dist::split<nheads, model>>(m, w);
    const dimsum::tensor<float, d_model> total = dist::all_reduce(dist::einsum<"nheads d_model -> d_model">(s));
    return total(d_model{0}) == 2.0f ? 0 : 1;
  });
  MPI_Finalize();
  return rc;
}
