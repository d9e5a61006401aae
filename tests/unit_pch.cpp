// The translation unit the unit tests' precompiled header is built with
// (tests/CMakeLists.txt, DIMSUM_UNIT_PCH).
