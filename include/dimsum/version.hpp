#pragma once
/// \file
/// dimsum's version, as CMake's `project(dimsum VERSION ...)` states it
/// (tests/static/version.cpp checks that the two agree). dimsum follows
/// semantic versioning; CHANGELOG.md lists what each version changed.
///
///     #if DIMSUM_VERSION >= 200  // 0.2.0 or later
///     #endif

#define DIMSUM_VERSION_MAJOR 0
#define DIMSUM_VERSION_MINOR 2
#define DIMSUM_VERSION_PATCH 0
/// MAJOR * 10000 + MINOR * 100 + PATCH (0.2.0 is 200), for `#if` comparisons.
#define DIMSUM_VERSION (DIMSUM_VERSION_MAJOR * 10000 + DIMSUM_VERSION_MINOR * 100 + DIMSUM_VERSION_PATCH)
/// The version as a string, "MAJOR.MINOR.PATCH".
#define DIMSUM_VERSION_STRING "0.2.0"
