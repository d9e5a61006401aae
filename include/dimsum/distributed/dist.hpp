#pragma once
/// \file
/// The umbrella header of dimsum's distributed layer (MPI): meshes with
/// named axes, sharded tensors, collectives, ring shifts and ring
/// attention. Link MPI (CMake: MPI::MPI_CXX)
/// and start programs with mpirun. See docs/reference.md, "distributed/".

#include <dimsum/distributed/abort_on_error.hpp>
#include <dimsum/distributed/mesh.hpp>
#include <dimsum/distributed/sharded.hpp>
#include <dimsum/distributed/sharded_var.hpp>
#include <dimsum/distributed/data_parallel.hpp>
#include <dimsum/distributed/gradient_reducer.hpp>
#include <dimsum/distributed/checkpoint.hpp>
#include <dimsum/distributed/zero.hpp>
#include <dimsum/distributed/ring_shift.hpp>
#include <dimsum/distributed/ring_attention.hpp>
