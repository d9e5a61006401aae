#pragma once
/// \file
/// The name-free description of one (batched) contraction that the einsum
/// planner hands to the kernels: extents and element strides only.

#include <array>
#include <cstddef>

namespace dimsum::kernels {

/// Most dims one role (batch, M, N or K) of a contraction may have.
inline constexpr std::size_t max_group_rank = 6;

/// The dims playing one role in a contraction, flattened row-major (last dim
/// fastest) into one logical index. The extents are shared by the operands;
/// each operand has its own element strides, which may be anything (permuted,
/// non-contiguous, negative, zero for an input broadcast along a dim). The
/// strides of an operand that lacks the role are ignored: A has no N dims, B
/// no M dims, C no K dims.
struct dim_group {
  std::size_t rank = 0;
  std::array<std::size_t, max_group_rank> extents{};
  std::array<std::ptrdiff_t, max_group_rank> stride_a{}, stride_b{}, stride_c{};

  /// Number of logical indices: the product of the extents, 1 when rank == 0.
  constexpr std::size_t size() const noexcept {
    std::size_t s = 1;
    for (std::size_t d = 0; d < rank; ++d) s *= extents[d];
    return s;
  }
};

/// `C[b,m,n] = alpha * sum_k A[b,m,k] * B[b,k,n] + beta * C[b,m,n] + bias[n]`,
/// where b, m, n, k are the flat indices of the four groups. `beta == 0`
/// means C is write-only: it is never read, so NaNs already in C do not
/// leak. An empty K group (rank 0) is a single k: an outer product. Distinct
/// (b, m, n) must address distinct elements of C, and C must not overlap A
/// or B. `bias` (optional) varies along N only: `bias_n` holds its strides
/// along the N group's dims. It is added in the micro-kernel's store, as
/// `fma(alpha, acc, fma(beta, C, bias))` (with beta == 0: `fma(alpha, acc,
/// bias)`), the same arithmetic as writing the bias into C first and
/// accumulating with beta == 1 (the same bits), without that extra pass
/// over C. `TC` is the type of C (and of alpha, beta and the bias): T, or
/// float for bf16 operands (`contraction_args<bf16, float>`), whose sums
/// are float32.
template <class T, class TC = T>
struct contraction_args {
  const T* a = nullptr;
  const T* b = nullptr;
  TC* c = nullptr;
  dim_group batch, m, n, k;
  TC alpha = 1, beta = 0;
  const TC* bias = nullptr;
  std::array<std::ptrdiff_t, max_group_rank> bias_n{};
};

}  // namespace dimsum::kernels
