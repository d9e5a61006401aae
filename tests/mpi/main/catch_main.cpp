// The main() of the mpirun tests, compiled once (with Catch2's runner) and
// linked into every tests/mpi/<name> executable: every rank runs the Catch2
// session, and the job fails if any rank failed (each rank's result reduced
// with MAX).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int rc = Catch::Session().run(argc, argv);
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
