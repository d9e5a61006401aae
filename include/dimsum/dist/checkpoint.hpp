#pragma once
/// \file
/// Deprecated: forwards to <dimsum/distributed/checkpoint.hpp>, with a compiler
/// warning. The namespace is dimsum::dist under either path.
#pragma GCC warning "dimsum: <dimsum/dist/checkpoint.hpp> is deprecated, include <dimsum/distributed/checkpoint.hpp>"
#include <dimsum/distributed/checkpoint.hpp>
