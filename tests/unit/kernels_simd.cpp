// Tests of kernels/simd.hpp's choice of kernel path: kernel_isa() and the
// vector width of the element-wise math follow the compiler's target flags.
// The expected values come from the compiler's own predefined macros
// (__AVX512F__, __AVX2__, __FMA__, __AVX__, __SSE2__), not from xsimd's
// detection that the code under test uses; a build may also name the path
// it must run (CMake: DIMSUM_EXPECT_KERNEL_ISA, set by the `arch` stage of
// scripts/test), so a flag that silently fails to reach the tests fails here.
#include <dimsum/kernels/simd.hpp>
#include <dimsum/kernels/vector_math.hpp>

#include <cstddef>
#include <string>

#include <catch2/catch.hpp>

namespace {

// The kernel path the predefined macros imply, by the rule documented at
// dimsum::kernel_isa: AVX-512F, else AVX2 with FMA, else AVX2, else scalar.
std::string isa_from_macros() {
#if defined(__AVX512F__)
  return "avx512f";
#elif defined(__AVX2__) && defined(__FMA__)
  return "fma3+avx2";
#elif defined(__AVX2__)
  return "avx2";
#else
  return "scalar";
#endif
}

// Floats per register of the widest vector unit the macros enable (the
// element-wise math runs xsimd's default arch, which reaches down to SSE2).
constexpr std::size_t float_lanes_from_macros() {
#if defined(__AVX512F__)
  return 16;
#elif defined(__AVX__)
  return 8;
#elif defined(__SSE2__) || defined(__aarch64__)
  return 4;
#else
  return 1;
#endif
}

}  // namespace

TEST_CASE("kernels/simd: kernel_isa names the path the target flags enable", "[kernels][simd]") {
  const std::string isa = dimsum::kernel_isa();
  INFO("kernel_isa() = " << isa);
  CHECK(isa == isa_from_macros());
#if defined(DIMSUM_EXPECTED_KERNEL_ISA)
  CHECK(isa == DIMSUM_EXPECTED_KERNEL_ISA);
#endif
}

TEST_CASE("kernels/simd: the kernels' vector width follows kernel_isa", "[kernels][simd]") {
  using ops = dimsum::kernels::detail::simd_ops<float, dimsum::kernels::best_gemm_arch>;
  const std::string isa = dimsum::kernel_isa();
  const std::size_t expected = isa == "avx512f" ? 16 : isa == "scalar" ? 1 : 8;
  CHECK(ops::width == expected);
  CHECK(dimsum::kernels::detail::simd_ops<double, dimsum::kernels::best_gemm_arch>::width == (expected + 1) / 2);
}

TEST_CASE("kernels/simd: element-wise math runs the widest vectors the target flags enable", "[kernels][simd]") {
  using batch = xsimd::batch<float, dimsum::kernels::vector_math_arch>;
  CHECK(batch::size == float_lanes_from_macros());
}
