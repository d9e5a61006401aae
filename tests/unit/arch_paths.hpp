// Shared by the kernel tests: the arch paths (scalar, AVX2, AVX2+FMA,
// AVX-512) a test can run on this build and CPU, and a thread-count guard.
#pragma once

#include <type_traits>

#include <dimsum/kernels/gemm.hpp>
#include <dimsum/kernels/threads.hpp>

#include <catch2/catch.hpp>

namespace test {

namespace dk = dimsum::kernels;

template <class Arch>
bool runnable() {
  if constexpr (!Arch::supported()) {
    return false;
  } else if constexpr (std::is_same_v<Arch, dk::scalar_arch>) {
    return true;
  } else {
    const auto cpu = xsimd::available_architectures();
    if constexpr (std::is_same_v<Arch, xsimd::avx512f>) return cpu.avx512f != 0;
    if constexpr (std::is_same_v<Arch, xsimd::fma3<xsimd::avx2>>) return cpu.fma3_avx2 != 0;
    if constexpr (std::is_same_v<Arch, xsimd::avx2>) return cpu.avx2 != 0;
    return false;
  }
}

template <class Arch>
bool& skip_reported() {
  static bool reported = false;
  return reported;
}

template <class Arch, class F>
void run_on(F& f) {
  if constexpr (Arch::supported()) {
    if (runnable<Arch>()) {
      f(Arch{});
      return;
    }
  }
  if (!skip_reported<Arch>()) {
    WARN("dimsum kernel path '" << Arch::name() << "' skipped: "
                              << (Arch::supported() ? "this CPU lacks it"
                                                    : "not enabled at compile time"));
    skip_reported<Arch>() = true;
  }
}

// Calls f(arch_tag) for every kernel path this build and CPU can run.
template <class F>
void for_each_arch(F&& f) {
  run_on<dk::scalar_arch>(f);
  run_on<xsimd::avx2>(f);
  run_on<xsimd::fma3<xsimd::avx2>>(f);
  run_on<xsimd::avx512f>(f);
}

/// Sets dimsum's kernel thread count for a scope, then restores the default.
struct thread_count_guard {
  explicit thread_count_guard(int n) { dimsum::set_num_threads(n); }
  ~thread_count_guard() { dimsum::set_num_threads(0); }
};

}  // namespace test
