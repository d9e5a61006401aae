#pragma once
/// \file
/// Deprecated: forwards to <dimsum/distributed/abort_on_error.hpp>, with a compiler
/// warning. The namespace is dimsum::dist under either path.
#pragma GCC warning "dimsum: <dimsum/dist/abort_on_error.hpp> is deprecated, include <dimsum/distributed/abort_on_error.hpp>"
#include <dimsum/distributed/abort_on_error.hpp>
