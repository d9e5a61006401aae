// Seed 000's causal attention forward hand-written on OpenBLAS: per-head
// sgemm for q, k, v; for each (batch, head) and block of 64 query rows, the
// score block against only the keys it can see (fully masked key blocks are
// skipped), softmax, and the block of z; then z @ W_O. One score block per
// thread: memory linear in sequence length.
//
//   openblas_attention B P M H D [reps] [--out file.f32]
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "inputs.hpp"

int main(int argc, char** argv) {
  const bench::peer_args args = bench::parse_args(argc, argv);
  if (!args.ok) return 2;
  std::printf("kernel=OpenBLAS %s\n", openblas_get_corename());
  const bench::attention_shape s = args.shape;
  bench::attention_inputs in(s);
  const int B = int(s.b), P = int(s.p), M = int(s.m), H = int(s.h), D = int(s.d), HD = H * D;
  // Working buffers are sized on the first call, so they count in its peak
  // memory as every other peer's do.
  std::vector<float> q, k, v, z, out, scores;
  const int block = 64;
  const float scale = 1.0f / std::sqrt(float(D));

  auto project = [&](const std::vector<float>& W, const std::vector<float>& bias, std::vector<float>& y) {
    // y (b p, h d) = x (b p, m) @ W[h] (m, d) + bias[h], one sgemm per head.
    for (int h = 0; h < H; ++h) {
      for (int r = 0; r < B * P; ++r) std::copy_n(&bias[std::size_t(h) * D], D, &y[std::size_t(r) * HD + h * D]);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B * P, D, M, 1.0f, in.x.data(), M,
                  &W[std::size_t(h) * M * D], D, 1.0f, &y[std::size_t(h) * D], HD);
    }
  };
  auto forward = [&] {
    if (q.empty()) {
      for (auto* buf : {&q, &k, &v, &z}) buf->resize(std::size_t(B) * P * HD);
      out.resize(std::size_t(B) * P * M);
      scores.resize(std::size_t(block) * P);
    }
    project(in.W_Q, in.b_Q, q);
    project(in.W_K, in.b_K, k);
    project(in.W_V, in.b_V, v);
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < H; ++h)
        for (int i0 = 0; i0 < P; i0 += block) {
          const int rows = std::min(block, P - i0), keys = i0 + rows;  // keys past the block's last row are masked
          const float* qb = &q[(std::size_t(b) * P + i0) * HD + h * D];
          const float* kb = &k[std::size_t(b) * P * HD + h * D];
          const float* vb = &v[std::size_t(b) * P * HD + h * D];
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, D, scale, qb, HD, kb, HD, 0.0f,
                      scores.data(), keys);
          for (int r = 0; r < rows; ++r) {
            float* row = &scores[std::size_t(r) * keys];
            const int visible = i0 + r + 1;
            float mx = row[0];
            for (int j = 1; j < visible; ++j) mx = std::max(mx, row[j]);
            float sum = 0;
            for (int j = 0; j < visible; ++j) sum += (row[j] = std::exp(row[j] - mx));
            const float inv = 1.0f / sum;
            for (int j = 0; j < visible; ++j) row[j] *= inv;
            for (int j = visible; j < keys; ++j) row[j] = 0.0f;
          }
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, D, keys, 1.0f, scores.data(), keys, vb, HD,
                      0.0f, &z[(std::size_t(b) * P + i0) * HD + h * D], HD);
        }
    for (int r = 0; r < B * P; ++r) std::copy_n(in.b_O.data(), M, &out[std::size_t(r) * M]);
    // out (b p, m) = z (b p, h d) @ W_O (h d, m) + b_O
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B * P, M, HD, 1.0f, z.data(), HD, in.W_O.data(), M, 1.0f,
                out.data(), M);
  };

  return bench::time_and_write(args, forward, [&] { return out.data(); }, s.b * s.p * s.m);
}
