// include/dimsum/version.hpp states the version that CMakeLists.txt's
// project(dimsum VERSION ...) gives (tests/CMakeLists.txt passes CMake's
// numbers as DIMSUM_CMAKE_VERSION_*).
#include <string_view>

#include <dimsum/version.hpp>

static_assert(DIMSUM_VERSION_MAJOR == DIMSUM_CMAKE_VERSION_MAJOR, "version.hpp's major version differs from CMake's");
static_assert(DIMSUM_VERSION_MINOR == DIMSUM_CMAKE_VERSION_MINOR, "version.hpp's minor version differs from CMake's");
static_assert(DIMSUM_VERSION_PATCH == DIMSUM_CMAKE_VERSION_PATCH, "version.hpp's patch version differs from CMake's");
static_assert(std::string_view(DIMSUM_VERSION_STRING) == DIMSUM_CMAKE_VERSION, "DIMSUM_VERSION_STRING differs from CMake's");
static_assert(DIMSUM_VERSION ==
              DIMSUM_CMAKE_VERSION_MAJOR * 10000 + DIMSUM_CMAKE_VERSION_MINOR * 100 + DIMSUM_CMAKE_VERSION_PATCH);
