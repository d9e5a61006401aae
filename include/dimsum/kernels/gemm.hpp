#pragma once
/// \file
/// The name-free contraction kernel: a batched GEMM over dim groups, with the
/// operands gathered through their strides while packing (BLIS style). The
/// einsum planner classifies dims into batch / M / N / K groups and calls
/// `contract`; nothing here knows a dim's name.

#include <type_traits>

#include "dimsum/core/bf16.hpp"
#include "dimsum/kernels/contraction_args.hpp"
#include "dimsum/kernels/detail/gemm_bf16.hpp"
#include "dimsum/kernels/detail/gemm_threads.hpp"
#include "dimsum/kernels/detail/gemm_micro.hpp"
#include "dimsum/kernels/simd.hpp"
#include "dimsum/kernels/threads.hpp"

namespace dimsum::kernels {

/// `contract` on an explicitly chosen arch: `xsimd::avx512f`,
/// `xsimd::fma3<xsimd::avx2>`, `xsimd::avx2` or `scalar_arch`. The arch must
/// be enabled at compile time (a static_assert says so otherwise) and present
/// on the CPU at run time (the caller's job; see
/// `xsimd::available_architectures()`).
template <class Arch, class T>
void contract_on(const contraction_args<T>& args) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "dimsum: contract supports float and double");
  detail::contract_blocked<T, Arch, detail::contract_blocking<T, Arch>>(args);
}

/// Computes `C[b,m,n] = alpha * sum_k A[b,m,k] * B[b,k,n] + beta * C[b,m,n]`
/// over the flat indices of the args' groups (see `contraction_args`), on
/// up to `num_threads()` threads, with `best_gemm_arch`. Results do not
/// depend on the thread count. Allocates nothing once the calling threads'
/// packing buffers have grown to the problem size (none at all for small
/// problems; see detail/gemm_scratch.hpp).
template <class T>
void contract(const contraction_args<T>& args) {
  contract_on<best_gemm_arch>(args);
}

/// `contract` on bf16 operands with float32 sums into a float C, on an
/// explicitly chosen path: `avx512_bf16_arch` (`vdpbf16ps`), or any arch
/// `contract_on` takes for float, on operands converted to float while
/// packing. Same enabled / present rule as above.
template <class Arch>
void contract_on(const contraction_args<bf16, float>& args) {
  static_assert(Arch::supported(), "dimsum: this SIMD arch is not enabled in this translation unit");
  detail::contract_bf16<Arch>(args);
}

/// The bf16 GEMM's path on this machine: `amx_bf16_arch` where it is
/// compiled in and available, else `best_bf16_gemm_arch`.
inline bool bf16_gemm_on_amx() { return amx_bf16_arch::supported() && amx_bf16_arch::available(); }

/// The name of the path `contract` takes for bf16 operands on this machine:
/// "amx-bf16", "avx512bf16", or the float kernels' arch.
inline const char* bf16_gemm_kernel() {
  return bf16_gemm_on_amx() ? amx_bf16_arch::name() : best_bf16_gemm_arch::name();
}

/// `C[b,m,n] = alpha * sum_k A[b,m,k] * B[b,k,n] + beta * C[b,m,n]` for bf16
/// A and B and a float C, every product and sum in float32: on AMX tiles
/// where `bf16_gemm_on_amx()`, else with `best_bf16_gemm_arch`
/// (AVX512-BF16's dot product where it is compiled in, else the float
/// kernels on operands converted while packing).
inline void contract(const contraction_args<bf16, float>& args) {
  if constexpr (amx_bf16_arch::supported()) {
    if (bf16_gemm_on_amx()) return contract_on<amx_bf16_arch>(args);
  }
  contract_on<best_bf16_gemm_arch>(args);
}

/// Whether `contract_rounded` runs for a bf16 product of nk summed and nn
/// N values per output row: where the bf16 GEMM runs on AMX tiles or on the
/// vdpbf16ps path and K fits one cache block of that path (so each
/// element's sum is complete when the micro-kernel stores it).
inline bool bf16_rounds_in_store(std::size_t nk, std::size_t nn) {
#if defined(__AVX512BF16__) && defined(__AVX512F__) && defined(__AVX512BW__)  // as gemm_bf16.hpp's vdpbf16ps path
  if (nk == 0 || nn == 0) return false;
  if constexpr (amx_bf16_arch::supported()) {
    if (bf16_gemm_on_amx()) {
      using Blk = detail::bf16_gemm_path<amx_bf16_arch>::blocking;
      return detail::block_plan<bf16, Blk>(nk, nn).kc >= nk;
    }
  }
  using Blk = detail::bf16_gemm_path<avx512_bf16_arch>::blocking;
  return detail::block_plan<bf16, Blk>(nk, nn).kc >= nk;
#else
  (void)nk;
  (void)nn;
  return false;
#endif
}

/// `C = alpha * A·B (+ bias)` for bf16 A and B into a bf16 C at `c` (the
/// args' C strides; args.c and args.beta unused), each element's float32
/// result rounded once to bf16 in the micro-kernel's store, with no float
/// C in memory: the values of the float32 sums rounded afterwards. Runs,
/// and returns true, where `bf16_rounds_in_store` says; returns false,
/// doing nothing, otherwise.
inline bool contract_rounded(const contraction_args<bf16, float>& args, bf16* c) {
  if (!bf16_rounds_in_store(args.k.size(), args.n.size())) return false;
#if defined(__AVX512BF16__) && defined(__AVX512F__) && defined(__AVX512BW__)
  contraction_args<bf16, float> a = args;
  a.c = nullptr;
  a.beta = 0.0f;
  if constexpr (amx_bf16_arch::supported()) {
    if (bf16_gemm_on_amx()) {
      detail::contract_bf16<amx_bf16_arch>(a, c);
      return true;
    }
  }
  detail::contract_bf16<avx512_bf16_arch>(a, c);
  return true;
#else
  (void)c;
  return false;
#endif
}

}  // namespace dimsum::kernels
