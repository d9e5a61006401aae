#pragma once
/// \file
/// `dist::abort_on_error(comm, f)`: an exception on one rank ends the whole
/// job with a message and a non-zero exit, instead of leaving the other
/// ranks waiting forever in their next collective.

#include <cstdio>
#include <exception>
#include <utility>

#include <dimsum/distributed/mesh.hpp>

namespace dimsum::dist {

/// Runs f() and returns its result. If f throws on this rank, prints
/// "rank R of N: <what>" to stderr and calls MPI_Abort on
/// `comm` with exit code 1: mpirun then stops every rank and exits
/// non-zero. (A rank that dies outright is stopped the same way by mpirun
/// itself.) Wrap the body of an MPI program's main in it:
/// `return dist::abort_on_error(MPI_COMM_WORLD, [&] { ...; return 0; });`
template <class F>
decltype(auto) abort_on_error(MPI_Comm comm, F&& f) {
  try {
    return std::forward<F>(f)();
  } catch (const std::exception& e) {
    int rank = 0, size = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    std::fprintf(stderr, "rank %d of %d: %s\n", rank, size, e.what());
    std::fflush(stderr);
    MPI_Abort(comm, 1);
    throw;  // not reached: MPI_Abort does not return
  }
}

}  // namespace dimsum::dist
