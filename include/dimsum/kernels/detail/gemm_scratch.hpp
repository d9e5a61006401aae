#pragma once
/// \file
/// Packing buffers of the GEMM kernel. Policy: a call whose packed panels fit
/// in `small_scratch_bytes` packs into a buffer on the stack (no heap at all);
/// larger calls pack into one 64-byte aligned buffer per thread
/// (`thread_local`) that grows to the largest size requested on that thread
/// and is then reused, so after the first large call a thread never allocates
/// again. Block sizes cap what a call requests (MC*KC + KC*NC elements).

#include <cstddef>
#include <cstdint>
#include <new>

namespace dimsum::kernels::detail {

inline constexpr std::size_t scratch_alignment = 64;
inline constexpr std::size_t small_scratch_bytes = 16 * 1024;

/// A growable, aligned, uninitialised byte buffer.
class aligned_scratch {
 public:
  aligned_scratch() = default;
  aligned_scratch(const aligned_scratch&) = delete;
  aligned_scratch& operator=(const aligned_scratch&) = delete;
  ~aligned_scratch() { release(); }

  /// At least `bytes` bytes, aligned to `scratch_alignment`; earlier contents
  /// are lost when it grows.
  void* reserve(std::size_t bytes) {
    ++reservations_;
    if (bytes > capacity_) {
      release();
      // Round up to whole pages so near-equal requests do not reallocate.
      const std::size_t rounded = (bytes + 4095) / 4096 * 4096;
      data_ = ::operator new(rounded, std::align_val_t{scratch_alignment});
      capacity_ = rounded;
    }
    return data_;
  }
  /// How many times `reserve` was called: a user that finds one more than
  /// when it last reserved knows nobody else wrote the buffer in between.
  std::uint64_t reservations() const noexcept { return reservations_; }

 private:
  void release() noexcept {
    if (data_ != nullptr) ::operator delete(data_, std::align_val_t{scratch_alignment});
    data_ = nullptr;
    capacity_ = 0;
  }
  void* data_ = nullptr;
  std::size_t capacity_ = 0;
  std::uint64_t reservations_ = 0;
};

/// The calling thread's packing buffer.
inline aligned_scratch& thread_scratch() {
  thread_local aligned_scratch scratch;
  return scratch;
}

}  // namespace dimsum::kernels::detail
