#pragma once
/// \file
/// The one place dimsum includes xsimd. Every kernel includes this header
/// instead of <xsimd/xsimd.hpp>, so the workaround below lives in one spot.

// g++ 12 with AVX-512 enabled warns inside its own avx512fintrin.h, where
// `_mm512_undefined_ps()` and friends are written `__m512 __Y = __Y;` on
// purpose: -Wmaybe-uninitialized, and, once xsimd's exp/log inline them,
// -Wuninitialized too. Both are false positives that would break -Werror
// builds. Only those two warnings, only for g++, only around the include:
// clang does not warn here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <xsimd/xsimd.hpp>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
