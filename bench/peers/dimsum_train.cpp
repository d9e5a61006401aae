// One training step of seed 000's causal attention layer with dimsum:
// forward on grad vars (the attention written as its three lines, recorded
// as one fused node), backward, AdamW (PyTorch defaults) -- the dimsum
// entry of bench/compare's "train" kind.
//
//   dimsum_train [bf16] B P M H D [reps] [--out file.f32]
//
// With `bf16` (bench/compare's "train_bf16" kind) the step runs in mixed
// precision: the float32 parameters watched as bf16 copies
// (grad::watch_as), x rounded to bf16, every contraction and the attention
// on bf16 operands with float32 sums; the loss and the parameters'
// gradients are float32.
//
// The loss is sum(out * R) with R from bench/peers/inputs.hpp's generator
// (salt 9). Prints peak_extra_mib and median_ms of one step; with --out,
// writes the first step's gradients as raw float32 in the order W_Q, W_K,
// W_V, W_O, b_Q, b_K, b_V, b_O (bench/compare checks them against PyTorch).
// Also prints heap_peak_mib and forward_heap_peak_mib: the most heap
// memory live at once during a step and during the forward alone (recorded
// on the tape, the loss computed, no backward) beyond what was live
// before, counted by this program's operator new and delete. Unlike the
// RSS peak, which misses buffers the allocator reuses from an earlier
// step, they count every buffer the step holds.
#include <malloc.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <new>
#include <limits>
#include <vector>

#include <dimsum/dimsum.hpp>
#include <dimsum/training.hpp>

#include "inputs.hpp"
#include "seed000_layer.hpp"

using dimsum::einsum;
using dimsum::parameter;
using dimsum::rename;
using dimsum::tensor;



namespace heap {
std::atomic<std::size_t> live{0}, high{0};
void* counted(void* p) {
  if (!p) throw std::bad_alloc();
  const std::size_t now = live.fetch_add(malloc_usable_size(p)) + malloc_usable_size(p);
  std::size_t h = high.load();
  while (now > h && !high.compare_exchange_weak(h, now)) {
  }
  return p;
}
void release(void* p) noexcept {
  if (p) live.fetch_sub(malloc_usable_size(p));
  std::free(p);
}
void* aligned(std::size_t n, std::align_val_t a) {
  const auto al = static_cast<std::size_t>(a);
  return counted(std::aligned_alloc(al, (n + al - 1) / al * al));
}
/// The most heap memory live at once while f runs, beyond what was live before, in MiB.
template <class F>
double peak_mib(F&& f) {
  const std::size_t before = live.load();
  high.store(before);
  f();
  return double(high.load() - before) / (1024.0 * 1024.0);
}
}  // namespace heap

void* operator new(std::size_t n) { return heap::counted(std::malloc(n ? n : 1)); }
void* operator new[](std::size_t n) { return heap::counted(std::malloc(n ? n : 1)); }
void* operator new(std::size_t n, std::align_val_t a) { return heap::aligned(n ? n : 1, a); }
void* operator new[](std::size_t n, std::align_val_t a) { return heap::aligned(n ? n : 1, a); }
void operator delete(void* p) noexcept { heap::release(p); }
void operator delete[](void* p) noexcept { heap::release(p); }
void operator delete(void* p, std::size_t) noexcept { heap::release(p); }
void operator delete[](void* p, std::size_t) noexcept { heap::release(p); }
void operator delete(void* p, std::align_val_t) noexcept { heap::release(p); }
void operator delete[](void* p, std::align_val_t) noexcept { heap::release(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { heap::release(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { heap::release(p); }


int main(int argc, char** argv) {
  const bool mixed = argc > 1 && std::strcmp(argv[1], "bf16") == 0;
  if (mixed) {
    --argc;
    ++argv;
  }
  const bench::peer_args args = bench::parse_args(argc, argv);
  if (!args.ok) return 2;
  // bf16: the contractions on AMX tiles where the CPU has them, else on vdpbf16ps where compiled in,
  // the attention's products, forward and backward, on vdpbf16ps where bf16_attention_on_pairs() (else
  // in float); the softmax arithmetic in float
  if (mixed && dimsum::kernels::avx512_bf16_arch::supported())
    std::printf("kernel=dimsum %s GEMM, %s attention, %s softmax\n", dimsum::kernels::bf16_gemm_kernel(),
                dimsum::kernels::bf16_attention_on_pairs() ? "avx512bf16" : dimsum::kernel_isa(), dimsum::kernel_isa());
  else
    std::printf("kernel=dimsum %s\n", dimsum::kernel_isa());
  const bench::attention_shape s = args.shape;
  bench::attention_inputs in(s);
  const batch B{s.b};
  const posn P{s.p};
  const d_model M{s.m};
  const auto x = bench::filled(in.x, tensor<float, batch, posn, d_model>(B, P, M));
  const auto R = bench::filled(bench::make_input(s.b * s.p * s.m, 9, 1.0), tensor<float, batch, posn, d_model>(B, P, M));
  bench::seed000_layer w = bench::full_layer(in, s);
  const float scale = 1.0f / std::sqrt(float(s.d));
  const float inf = std::numeric_limits<float>::infinity();
  dimsum::optim::adamw opt;
  std::vector<float> grads;
  // The layer's forward on tape t and the loss, in compute type C (float,
  // or bf16 copies of the float32 parameters).
  auto forward_as = [&]<class C>(dimsum::grad::tape& t, C) {
    auto param = [&](auto& p) {
      if constexpr (std::is_same_v<C, float>)
        return t.watch(p);
      else
        return dimsum::grad::watch_as<C>(t, p);
    };
    auto xv = t.constant(dimsum::cast<C>(x));
    auto q = rename<posn, q_posn>(einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(xv, param(w.W_Q)) + param(w.b_Q));
    auto k = rename<posn, k_posn>(einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(xv, param(w.W_K)) + param(w.b_K));
    auto v = rename<posn, k_posn>(einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(xv, param(w.W_V)) + param(w.b_V));
    auto z = einsum<"batch nheads q_posn k_posn, batch k_posn nheads d_head -> batch q_posn nheads d_head">(
        dimsum::softmax<k_posn>(dimsum::causal_mask<q_posn, k_posn>(
            einsum<"batch q_posn nheads d_head, batch k_posn nheads d_head -> batch nheads q_posn k_posn">(q, k) * scale,
            -inf)),
        v);
    if constexpr (std::is_same_v<C, float>) static_assert(dimsum::uses_fused_attention_v<decltype(z)>);
    auto out = einsum<"batch q_posn nheads d_head, nheads d_head d_model -> batch q_posn d_model">(z, param(w.W_O)) +
               param(w.b_O);
    return dimsum::sum<batch, q_posn, d_model>(dimsum::cast<float>(out) * rename<posn, q_posn>(R));
  };
  auto forward = [&](dimsum::grad::tape& t) {
    if (mixed) return forward_as(t, dimsum::bf16{});
    return forward_as(t, 0.0f);
  };
  auto step = [&] {
    dimsum::nn::zero_grad(w);
    dimsum::grad::tape t;
    t.backward(forward(t));
    if (grads.empty())
      dimsum::nn::for_each_parameter(w, [&](const auto&, auto& p) {
        grads.insert(grads.end(), p.grad.data(), p.grad.data() + p.grad.size());
      });
    opt.step(w);
  };
  step();  // the first step's gradients, before any update
  const std::vector<float> first = grads;
  std::printf("forward_heap_peak_mib=%.1f\n", heap::peak_mib([&] {
                dimsum::grad::tape t;
                const auto loss = forward(t);
                (void)loss;
              }));
  std::printf("heap_peak_mib=%.1f\n", heap::peak_mib(step));
  // The tape keeps the memory a step frees for the next one (grad/tape.hpp);
  // hand it back first, so that peak_extra_mib counts what one step needs,
  // as it does for the other peers, rather than 0.
  malloc_trim(0);
  const int rc = bench::time_and_write(args, step, [&] { return first.data(); }, first.size());
  return rc;
}
