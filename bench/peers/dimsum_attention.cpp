// Seed 000's causal attention forward written with dimsum contractions, the
// dimsum entry of bench/compare.
//
//   dimsum_attention B P M H D [reps] [--out file.f32]
//
// Prints "median_ms=<x>" over the repetitions and, with --out, writes the
// output (b, p, m) as raw float32.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <dimsum/dimsum.hpp>

#include "inputs.hpp"

using dimsum::einsum;
using dimsum::rename;
using dimsum::tensor;

DIMSUM_DIM(batch);
DIMSUM_DIM(posn);
DIMSUM_DIM(q_posn);
DIMSUM_DIM(k_posn);
DIMSUM_DIM(d_model);
DIMSUM_DIM(nheads);
DIMSUM_DIM(d_head);

template <class T>
T from(const std::vector<float>& v, T t) {
  std::copy(v.begin(), v.end(), t.data());
  return t;
}

int main(int argc, char** argv) {
  const bench::peer_args args = bench::parse_args(argc, argv);
  if (!args.ok) return 2;
  std::printf("kernel=dimsum %s\n", dimsum::kernel_isa());
  const bench::attention_shape s = args.shape;

  bench::attention_inputs in(s);
  const batch B{s.b};
  const posn P{s.p};
  const d_model M{s.m};
  const nheads H{s.h};
  const d_head D{s.d};
  auto x = from(in.x, tensor<float, batch, posn, d_model>(B, P, M));
  auto W_Q = from(in.W_Q, tensor<float, nheads, d_model, d_head>(H, M, D));
  auto W_K = from(in.W_K, tensor<float, nheads, d_model, d_head>(H, M, D));
  auto W_V = from(in.W_V, tensor<float, nheads, d_model, d_head>(H, M, D));
  auto W_O = from(in.W_O, tensor<float, nheads, d_head, d_model>(H, D, M));
  auto b_Q = from(in.b_Q, tensor<float, nheads, d_head>(H, D));
  auto b_K = from(in.b_K, tensor<float, nheads, d_head>(H, D));
  auto b_V = from(in.b_V, tensor<float, nheads, d_head>(H, D));
  auto b_O = from(in.b_O, tensor<float, d_model>(M));
  const float scale = 1.0f / std::sqrt(float(s.d));
  const float inf = std::numeric_limits<float>::infinity();

  tensor<float, batch, posn, d_model> out;
  auto forward = [&] {
    // q, k, v live only as long as the attention needs them.
    tensor<float, batch, posn, nheads, d_head> z;
    {
      tensor<float, batch, posn, nheads, d_head> q =
          einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, W_Q) + b_Q;
      tensor<float, batch, posn, nheads, d_head> k =
          einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, W_K) + b_K;
      tensor<float, batch, posn, nheads, d_head> v =
          einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, W_V) + b_V;
      auto scores = einsum<"batch q_posn nheads d_head, batch k_posn nheads d_head -> batch nheads q_posn k_posn">(
          rename<posn, q_posn>(q), rename<posn, k_posn>(k));
      auto pattern = dimsum::softmax<k_posn>(dimsum::causal_mask<q_posn, k_posn>(scores * scale, -inf));
      auto zq = einsum<"batch nheads q_posn k_posn, batch k_posn nheads d_head -> batch q_posn nheads d_head">(
          pattern, rename<posn, k_posn>(v));
      static_assert(decltype(zq)::uses_fused_attention);
      z = rename<q_posn, posn>(zq);
    }
    out = einsum<"batch posn nheads d_head, nheads d_head d_model -> batch posn d_model">(z, W_O) + b_O;
  };

  return bench::time_and_write(args, forward, [&] { return out.data(); }, s.b * s.p * s.m);
}
