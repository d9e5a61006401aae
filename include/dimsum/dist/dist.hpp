#pragma once
/// \file
/// Deprecated: forwards to <dimsum/distributed/dist.hpp>, with a compiler
/// warning. The namespace is dimsum::dist under either path.
#pragma GCC warning "dimsum: <dimsum/dist/dist.hpp> is deprecated, include <dimsum/distributed/dist.hpp>"
#include <dimsum/distributed/dist.hpp>
