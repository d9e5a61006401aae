#pragma once
/// \file
/// The umbrella header of dimsum's distributed layer (MPI): meshes with
/// named axes, sharded tensors, collectives. Link MPI (CMake: MPI::MPI_CXX)
/// and start programs with mpirun. See docs/reference.md, "dist/".

#include <dimsum/dist/abort_on_error.hpp>
#include <dimsum/dist/mesh.hpp>
#include <dimsum/dist/sharded.hpp>
#include <dimsum/dist/data_parallel.hpp>
#include <dimsum/dist/checkpoint.hpp>
