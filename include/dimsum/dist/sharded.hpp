#pragma once
/// \file
/// Deprecated: forwards to <dimsum/distributed/sharded.hpp>, with a compiler
/// warning. The namespace is dimsum::dist under either path.
#pragma GCC warning "dimsum: <dimsum/dist/sharded.hpp> is deprecated, include <dimsum/distributed/sharded.hpp>"
#include <dimsum/distributed/sharded.hpp>
