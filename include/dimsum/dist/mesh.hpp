#pragma once
/// \file
/// Deprecated: forwards to <dimsum/distributed/mesh.hpp>, with a compiler
/// warning. The namespace is dimsum::dist under either path.
#pragma GCC warning "dimsum: <dimsum/dist/mesh.hpp> is deprecated, include <dimsum/distributed/mesh.hpp>"
#include <dimsum/distributed/mesh.hpp>
