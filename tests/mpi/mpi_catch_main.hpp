// The main() of the mpirun tests: every rank runs the Catch2 session, and
// the job fails if any rank failed (each rank's result reduced with MAX).
// Include once per test file, after the test cases.
#pragma once
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
