#pragma once
/// \file
/// Deprecated: forwards to <dimsum/distributed/data_parallel.hpp>, with a compiler
/// warning. The namespace is dimsum::dist under either path.
#pragma GCC warning "dimsum: <dimsum/dist/data_parallel.hpp> is deprecated, include <dimsum/distributed/data_parallel.hpp>"
#include <dimsum/distributed/data_parallel.hpp>
