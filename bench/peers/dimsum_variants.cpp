// Attention variants on the fused path, the dimsum entry of
// `bench/compare --variants`: the attention core z = softmax(f(q kᵀ)) v
// over q, k, v (b, p, h, d) for
//   causal   causal_mask
//   window   window_mask of 256 positions
//   alibi    scores * scale + alibi(nheads, q_posn, k_posn) (slope times distance), then causal_mask
//   padding  where(keep, scores, -inf) with the last p/8 keys padded, then causal_mask
//   gqa      4 key/value heads shared by groups of h/4 query heads, causal_mask
//   document 8 documents of p/8 tokens packed in each row: masked_fill(scores,
//            doc_q != doc_k, -inf) (document ids per position, broadcast by
//            name), then causal_mask; the block mask skips the other documents
//   softcap  50 * tanh(scores / 50) (Gemma 2), then causal_mask
//   temperature  scores * temp, a temperature per head, then causal_mask
//   sinks    causal_mask, then a softmax with one sink logit per head
//   map      a user's function of the scores with its derivative,
//            s + 0.01 s^3, then causal_mask
//   prefix   prefix-LM: keys before each row's prefix (p/4) seen by every
//            query, causal after it: masked_fill(!((ki < prefix) || (ki <= qi)))
//   chunked  causal within chunks of p/8 positions (Llama 4's chunked local
//            attention): masked_fill((qi / c != ki / c)), then causal_mask
//   t5       T5's learned relative-position bias (decoder: causal buckets,
//            32 of them, max distance 128): scores + lookup<bucket>(table,
//            t5_relative_bucket(k - q)), then causal_mask; the table
//            (bucket, nheads) holds 0.05 ((7 bucket + 3 head) mod 11 - 5)
//
//   dimsum_variants VARIANT B P M H D [reps] [--out file.f32] [--train] [--bf16]
//
// (M is unused: the inputs are q, k, v). Prints peak_extra_mib and
// median_ms; --out writes z (b, p, h, d) as raw float32. With --train the
// timed call is a training step of the attention core on grad::vars: the
// forward on the tape (one fused node), then backward of sum(z * r) (r a
// fixed input); the learned tensors (temp, ALiBi's slopes, sinks) are vars
// too, and --out writes z, dq, dk, dv and then the learned tensor's
// gradient, if any (T5's table included), as raw float32. With --bf16 (the causal variant only)
// q, k, v (and r) are bf16 tensors, or bf16 vars with --train: the fused
// kernel's bf16 path (float32 sums, bf16 in memory); --out writes the
// same outputs converted to float32.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <dimsum/dimsum.hpp>
#include <dimsum/grad/grad.hpp>
#include <dimsum/ops/alibi.hpp>
#include <dimsum/ops/lookup.hpp>
#include <dimsum/ops/relative_bucket.hpp>
#include <dimsum/ops/sink_softmax.hpp>
#include <dimsum/ops/with_derivative.hpp>
#include <dimsum/ops/window_mask.hpp>

#include "inputs.hpp"

using dimsum::einsum;
using dimsum::tensor;

DIMSUM_DIM(batch);
DIMSUM_DIM(posn);
DIMSUM_DIM(q_posn);
DIMSUM_DIM(k_posn);
DIMSUM_DIM(nheads);
DIMSUM_DIM(kv_heads);
DIMSUM_DIM(group);
DIMSUM_DIM(d_head);
DIMSUM_DIM(bucket);

using qkv_t = tensor<float, batch, q_posn, nheads, d_head>;
using kv_t = tensor<float, batch, k_posn, nheads, d_head>;
using head_t = tensor<float, nheads>;
using table_t = tensor<float, bucket, nheads>;

// One training step of the variant's attention core (see the file's
// comment), timed as bench::time_and_write times a forward.
template <class Core>
int train(const bench::peer_args& args, const std::string& variant, const qkv_t& q0, const kv_t& k0, const kv_t& v0,
          const head_t& temp0, const head_t& slopes0, const head_t& sinks0, const table_t& table0, Core& core) {
  const bench::attention_shape s = args.shape;
  const std::size_t n = s.b * s.p * s.h * s.d;
  const auto r = bench::from(bench::make_input(n, 4, 1.0), qkv_t(batch{s.b}, q_posn{s.p}, nheads{s.h}, d_head{s.d}));
  std::vector<float> out;
  bool capture = false;
  auto step = [&] {
    dimsum::grad::tape t;
    auto q = t.watch(q0);
    auto k = t.watch(k0);
    auto v = t.watch(v0);
    auto temp = t.watch(temp0);
    auto slopes = t.watch(slopes0);
    auto sinks = t.watch(sinks0);
    auto table = t.watch(table0);
    auto z = core(q, k, v, temp, slopes, sinks, table);
    t.backward(dimsum::sum<batch, q_posn, nheads, d_head>(z * r));
    if (!capture) return;
    out.clear();
    auto put = [&](const auto& x) { out.insert(out.end(), x.data(), x.data() + x.size()); };
    put(z.value());
    put(gradient(q));
    put(gradient(k));
    put(gradient(v));
    if (variant == "temperature") put(gradient(temp));
    if (variant == "alibi") put(gradient(slopes));
    if (variant == "sinks") put(gradient(sinks));
    if (variant == "t5") put(gradient(table));
  };
  capture = true;  // the outputs of one step, written by --out
  step();
  capture = false;
  return bench::time_and_write(args, step, [&] { return out.data(); }, out.size());
}

// The causal attention core on bf16 q, k, v (tensors, or vars with
// --train), timed like the float one; the inputs are the float ones
// rounded, and only the bf16 copies are kept (the process's peak memory is
// then comparable with the float run's).
int run_bf16(const bench::peer_args& args, bool train_mode) {
  using dimsum::bf16;
  using dimsum::causal_mask;
  using dimsum::softmax;
  const bench::attention_shape s = args.shape;
  const std::size_t n = s.b * s.p * s.h * s.d;
  const float scale = 1.0f / std::sqrt(float(s.d));
  const float inf = std::numeric_limits<float>::infinity();
  auto to_bf16 = [](const auto& t) { return dimsum::tensor_for_t<bf16, dimsum::dims_of_t<decltype(t)>>(dimsum::cast<bf16>(t)); };
  const auto q = to_bf16(bench::from(bench::make_input(n, 1, 1.0), qkv_t(batch{s.b}, q_posn{s.p}, nheads{s.h}, d_head{s.d})));
  const auto k = to_bf16(bench::from(bench::make_input(n, 2, 1.0), kv_t(batch{s.b}, k_posn{s.p}, nheads{s.h}, d_head{s.d})));
  const auto v = to_bf16(bench::from(bench::make_input(n, 3, 1.0), kv_t(batch{s.b}, k_posn{s.p}, nheads{s.h}, d_head{s.d})));
  auto core = [&](const auto& q, const auto& k, const auto& v) {
    auto e = einsum<batch, q_posn, nheads, d_head>(
        softmax<k_posn>(causal_mask<q_posn, k_posn>(
            einsum<"batch q_posn nheads d_head, batch k_posn nheads d_head -> batch nheads q_posn k_posn">(q, k) * scale,
            -inf)),
        v);
    static_assert(dimsum::uses_fused_attention_v<decltype(e)>);
    return e;
  };
  std::vector<float> out;
  auto put = [&](const auto& x) {
    for (std::size_t i = 0; i < x.size(); ++i) out.push_back(static_cast<float>(x.data()[i]));
  };
  if (!train_mode) {
    tensor<bf16, batch, q_posn, nheads, d_head> z(batch{s.b}, q_posn{s.p}, nheads{s.h}, d_head{s.d});
    auto forward = [&] { z = core(q, k, v); };
    return bench::time_and_write(args, forward, [&] { return put(z), out.data(); }, n);
  }
  const auto r = to_bf16(bench::from(bench::make_input(n, 4, 1.0), qkv_t(batch{s.b}, q_posn{s.p}, nheads{s.h}, d_head{s.d})));
  bool capture = true;
  auto step = [&] {
    dimsum::grad::tape t;
    auto vq = t.watch(q);
    auto vk = t.watch(k);
    auto vv = t.watch(v);
    auto z = core(vq, vk, vv);
    t.backward(dimsum::sum<batch, q_posn, nheads, d_head>(z * r));
    if (!capture) return;
    put(z.value());
    put(gradient(vq));
    put(gradient(vk));
    put(gradient(vv));
  };
  step();
  capture = false;
  return bench::time_and_write(args, step, [&] { return out.data(); }, out.size());
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string variant = argv[1];
  const bench::peer_args args = bench::parse_args(argc - 1, argv + 1);
  if (!args.ok) return 2;
  bool train_mode = false, bf16_mode = false;
  for (int i = 2; i < argc; ++i) train_mode = train_mode || std::strcmp(argv[i], "--train") == 0;
  for (int i = 2; i < argc; ++i) bf16_mode = bf16_mode || std::strcmp(argv[i], "--bf16") == 0;
  if (bf16_mode && variant != "causal") {
    std::fprintf(stderr, "--bf16: the causal variant only\n");
    return 2;
  }
  const bench::attention_shape s = args.shape;
  if (bf16_mode) {
    // the bf16 attention's products: vdpbf16ps, forward and backward, where bf16_attention_on_pairs()
    const bool dot = dimsum::kernels::bf16_attention_on_pairs();
    std::printf("kernel=dimsum %s\n", dot ? "avx512bf16 forward and backward" : dimsum::kernel_isa());
    return run_bf16(args, train_mode);
  }
  std::printf("kernel=dimsum %s\n", dimsum::kernel_isa());
  const std::size_t n = s.b * s.p * s.h * s.d;
  const float scale = 1.0f / std::sqrt(float(s.d));
  const float inf = std::numeric_limits<float>::infinity();
  const auto q = bench::from(bench::make_input(n, 1, 1.0), qkv_t(batch{s.b}, q_posn{s.p}, nheads{s.h}, d_head{s.d}));
  const auto k = bench::from(bench::make_input(n, 2, 1.0), kv_t(batch{s.b}, k_posn{s.p}, nheads{s.h}, d_head{s.d}));
  const auto v = bench::from(bench::make_input(n, 3, 1.0), kv_t(batch{s.b}, k_posn{s.p}, nheads{s.h}, d_head{s.d}));
  qkv_t z(batch{s.b}, q_posn{s.p}, nheads{s.h}, d_head{s.d});

  auto scores = [&] {
    return einsum<"batch q_posn nheads d_head, batch k_posn nheads d_head -> batch nheads q_posn k_posn">(q, k) * scale;
  };
  auto attend = [&](auto&& pattern) {
    auto e = einsum<batch, q_posn, nheads, d_head>(dimsum::softmax<k_posn>(std::move(pattern)), v);
    static_assert(dimsum::uses_fused_attention_v<decltype(e)>);
    z = std::move(e);
  };

  // ALiBi's bias, lazily: h slopes, the distances computed when read (no
  // p x p table); the kernel computes slope * distance a vector at a time.
  const auto bias = dimsum::alibi<float>(nheads{s.h}, q_posn{s.p}, k_posn{s.p});
  tensor<bool, batch, k_posn> keep(batch{s.b}, k_posn{s.p});
  for (std::size_t b = 0; b < s.b; ++b)
    for (std::size_t j = 0; j < s.p; ++j) keep(batch{b}, k_posn{j}) = j < s.p - s.p / 8;
  // Packed documents: 8 of p/8 tokens in each batch row.
  tensor<int, batch, posn> doc(batch{s.b}, posn{s.p});
  for (std::size_t b = 0; b < s.b; ++b)
    for (std::size_t i = 0; i < s.p; ++i) doc(batch{b}, posn{i}) = int(i / (s.p / 8));
  // Position ids (for the prefix-LM and chunked masks) and each row's prefix.
  tensor<int, batch, posn> pos(batch{s.b}, posn{s.p});
  for (std::size_t b = 0; b < s.b; ++b)
    for (std::size_t i = 0; i < s.p; ++i) pos(batch{b}, posn{i}) = int(i);
  tensor<int, batch> prefix(batch{s.b});
  for (std::size_t b = 0; b < s.b; ++b) prefix(batch{b}) = int(s.p / 4);
  const int chunk = int(std::max<std::size_t>(s.p / 8, 1));
  const auto qi = dimsum::rename<posn, q_posn>(pos);
  const auto ki = dimsum::rename<posn, k_posn>(pos);
  // Learned tensors, one value per head (constants here, vars with --train).
  tensor<float, nheads> temp(nheads{s.h}), sinks(nheads{s.h});
  for (std::size_t h = 0; h < s.h; ++h) {
    temp(nheads{h}) = 1.0f + 0.05f * float(h);
    sinks(nheads{h}) = -1.0f + 0.1f * float(h);
  }
  const auto slopes = dimsum::alibi_slopes<float>(nheads{s.h});
  table_t table(bucket{32}, nheads{s.h});
  for (std::size_t bk = 0; bk < 32; ++bk)
    for (std::size_t h = 0; h < s.h; ++h) table(bucket{bk}, nheads{h}) = 0.05f * float(int((7 * bk + 3 * h) % 11) - 5);
  const auto cubic = dimsum::with_derivative([](float x) { return x + 0.01f * x * x * x; },
                                             [](float x) { return 1.0f + 0.03f * x * x; });
  // The variant's attention core on q, k, v (tensors or vars) and the
  // learned tensors t, sl, sk, tb (temperature, slopes, sinks, T5's table:
  // tensors or vars).
  auto core = [&](const auto& q, const auto& k, const auto& v, const auto& t, const auto& sl, const auto& sk,
                  const auto& tb) {
    auto sc = [&] {
      return einsum<"batch q_posn nheads d_head, batch k_posn nheads d_head -> batch nheads q_posn k_posn">(q, k) * scale;
    };
    auto att = [&](auto&& w) {
      return einsum<batch, q_posn, nheads, d_head>(std::forward<decltype(w)>(w), v);  // operands' dims in any order
    };
    using dimsum::causal_mask;
    using dimsum::masked_fill;
    using dimsum::softmax;
    const std::string& x = variant;
    // Every variant's result as one type: the output tensor, or a var on the tape.
    using R = std::conditional_t<std::is_same_v<std::remove_cvref_t<decltype(q)>, qkv_t>, qkv_t,
                                 dimsum::grad::var<float, batch, q_posn, nheads, d_head>>;
    auto fused = [](auto&& e) -> R {
      static_assert(dimsum::uses_fused_attention_v<std::remove_cvref_t<decltype(e)>>);
      return R(std::forward<decltype(e)>(e));
    };
    if (x == "window") return fused(att(softmax<k_posn>(dimsum::window_mask<q_posn, k_posn>(sc(), 256, -inf))));
    if (x == "alibi")
      return fused(att(softmax<k_posn>(causal_mask<q_posn, k_posn>(
          sc() + dimsum::outer(sl, dimsum::relative_positions<float>(q_posn{s.p}, k_posn{s.p})), -inf))));
    if (x == "padding")
      return fused(att(softmax<k_posn>(causal_mask<q_posn, k_posn>(dimsum::where(keep, sc(), -inf), -inf))));
    if (x == "document")
      return fused(att(softmax<k_posn>(causal_mask<q_posn, k_posn>(
          masked_fill(sc(), dimsum::rename<posn, q_posn>(doc) != dimsum::rename<posn, k_posn>(doc), -inf), -inf))));
    if (x == "softcap")
      return fused(att(softmax<k_posn>(causal_mask<q_posn, k_posn>(50.0f * dimsum::tanh(sc() / 50.0f), -inf))));
    if (x == "temperature") return fused(att(softmax<k_posn>(causal_mask<q_posn, k_posn>(sc() * t, -inf))));
    if (x == "sinks") return fused(att(softmax<k_posn>(causal_mask<q_posn, k_posn>(sc(), -inf), sk)));
    if (x == "map") return fused(att(softmax<k_posn>(causal_mask<q_posn, k_posn>(dimsum::map(cubic, sc()), -inf))));
    if (x == "prefix") return fused(att(softmax<k_posn>(masked_fill(sc(), !((ki < prefix) || (ki <= qi)), -inf))));
    if (x == "t5")
      return fused(att(softmax<k_posn>(causal_mask<q_posn, k_posn>(
          sc() + dimsum::lookup<bucket>(tb, dimsum::t5_relative_bucket(
                                                dimsum::relative_positions<int>(q_posn{s.p}, k_posn{s.p}), false, 32, 128)),
          -inf))));
    if (x == "chunked")
      return fused(att(softmax<k_posn>(causal_mask<q_posn, k_posn>(masked_fill(sc(), qi / chunk != ki / chunk, -inf), -inf))));
    return fused(att(softmax<k_posn>(causal_mask<q_posn, k_posn>(sc(), -inf))));  // causal
  };
  if (train_mode) return train(args, variant, q, k, v, temp, slopes, sinks, table, core);

  // GQA: q's heads split as (kv_heads group), 4 key/value heads.
  const std::size_t kvh = 4, g = variant == "gqa" ? s.h / kvh : 0;  // the gqa inputs are empty otherwise
  if (variant == "gqa" && s.h % kvh != 0) {
    std::fprintf(stderr, "gqa needs a multiple of %zu heads\n", kvh);
    return 2;
  }
  using gq_t = tensor<float, batch, q_posn, kv_heads, group, d_head>;
  using gkv_t = tensor<float, batch, k_posn, kv_heads, d_head>;
  const std::size_t nkv = g == 0 ? 0 : s.b * s.p * kvh * s.d;
  const auto gq = bench::from(bench::make_input(g == 0 ? 0 : n, 1, 1.0), gq_t(batch{s.b}, q_posn{s.p}, kv_heads{kvh}, group{g}, d_head{s.d}));
  const auto gk = bench::from(bench::make_input(nkv, 2, 1.0), gkv_t(batch{s.b}, k_posn{s.p}, kv_heads{kvh}, d_head{s.d}));
  const auto gv = bench::from(bench::make_input(nkv, 3, 1.0), gkv_t(batch{s.b}, k_posn{s.p}, kv_heads{kvh}, d_head{s.d}));
  gq_t gz(batch{s.b}, q_posn{s.p}, kv_heads{kvh}, group{g}, d_head{s.d});

  auto forward = [&] {
    if (variant == "alibi") {  // ALiBi's own lazy bias: slopes and distances, no table
      attend(dimsum::causal_mask<q_posn, k_posn>(scores() + bias, -inf));
    } else if (variant == "gqa") {
      auto sc = einsum<"batch q_posn kv_heads group d_head, batch k_posn kv_heads d_head -> batch kv_heads group q_posn k_posn">(
          gq, gk);
      auto e = einsum<"batch kv_heads group q_posn k_posn, batch k_posn kv_heads d_head -> batch q_posn kv_heads group d_head">(
          dimsum::softmax<k_posn>(dimsum::causal_mask<q_posn, k_posn>(std::move(sc) * scale, -inf)), gv);
      static_assert(dimsum::uses_fused_attention_v<decltype(e)>);
      gz = std::move(e);
    } else {
      z = core(q, k, v, temp, slopes, sinks, table);
    }
  };
  return bench::time_and_write(args, forward, [&] { return variant == "gqa" ? gz.data() : z.data(); }, n);
}
