// Helpers of the mpirun tests: this process's rank in MPI_COMM_WORLD, the
// world's size, and a scratch directory every rank sees.
#pragma once
#include <mpi.h>

#include <filesystem>
#include <random>
#include <string>

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
inline int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

/// A fresh directory every rank sees (rank 0 makes it and broadcasts its name).
inline std::string shared_dir(const std::string& tag) {
  std::string dir;
  if (world_rank() == 0) {
    std::random_device rd;
    dir = (std::filesystem::temp_directory_path() / ("dimsum-ckpt-" + tag + "-" + std::to_string(rd()) + "-" +
                                        std::to_string(world_size())))
              .string();
    std::filesystem::remove_all(dir);
  }
  int len = static_cast<int>(dir.size());
  MPI_Bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD);
  dir.resize(static_cast<std::size_t>(len));
  MPI_Bcast(dir.data(), len, MPI_CHAR, 0, MPI_COMM_WORLD);
  return dir;
}
/// The first n ranks of the world as a communicator (MPI_COMM_NULL on the others).
inline MPI_Comm first_ranks(int n) {
  MPI_Comm c = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, world_rank() < n ? 0 : MPI_UNDEFINED, world_rank(), &c);
  return c;
}
inline void remove_dir(const std::string& dir) {
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) std::filesystem::remove_all(dir);
}
