// The headers the distributed compile-fail cases include (common.hpp),
// precompiled once per build (tests/mpi/CMakeLists.txt) and force-included
// into every case by tests/compile_fail/check.cmake. The cases still include
// what they use; the include guards make that free. (No #pragma once: g++
// warns about it in a header compiled as the main file.)
#include <dimsum/dimsum.hpp>
#include <dimsum/distributed/dist.hpp>
#include <dimsum/grad/grad.hpp>
#include <dimsum/training.hpp>
