#!/usr/bin/python3
"""PyTorch float64 fixtures for T5's learned relative-position bias inside
attention (tests/unit/t5_bias.cpp), written as HF transformers writes it
(T5Attention.compute_bias and _relative_position_bucket), as plain
unfused PyTorch with autograd:

    rel = k_pos[None, :] - q_pos[:, None]                       # (q, k)
    buckets = relative_position_bucket(rel, bidirectional, num_buckets, max_distance)
    bias = table(buckets).permute(2, 0, 1)                      # nn.Embedding(num_buckets, n_heads)
    scores = q @ k^T + bias ; (causal mask) ; softmax ; @ v     # T5 does not scale

Cases (each saves q, k, v, the table, a fixed random r of the output's
shape, the buckets, the output, and the gradients of sum(out * r) with
respect to q, k, v and the table, under fixtures/t5_bias/<case>_<name>.npy):

* bidirectional: encoder self-attention, batch 2, heads 3, p 48, d_head 8,
  d_value 5, 16 buckets, max_distance 20 (distances 4..19 log-spaced over
  4 buckets per direction, 20 and beyond in the last);
* causal: decoder self-attention with the causal mask, batch 1, heads 2,
  p 64, d_head 6, d_value 4, 12 buckets, max_distance 24.

buckets_<config>.npy holds the bucket of every distance in [-300, 300]
for a few (bidirectional, num_buckets, max_distance) configurations.
Deterministic:

    /usr/bin/python3 tests/reference/make_t5_bias_fixtures.py [OUTPUT_DIR]
"""

import math
import os
import sys

import numpy as np
import torch

torch.set_num_threads(1)
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(HERE, "fixtures", "t5_bias")
os.makedirs(OUT, exist_ok=True)
GEN = torch.Generator().manual_seed(20261202)


def relative_position_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    """HF transformers' T5Attention._relative_position_bucket, verbatim."""
    relative_buckets = 0
    if bidirectional:
        num_buckets //= 2
        relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
        relative_position = torch.abs(relative_position)
    else:
        relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    relative_position_if_large = max_exact + (
        torch.log(relative_position.float() / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).to(torch.long)
    relative_position_if_large = torch.min(
        relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1)
    )
    relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
    return relative_buckets


def save(name, a):
    a = a.detach().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
    np.save(os.path.join(OUT, name + ".npy"), np.array(a, order="C"), allow_pickle=False)


def rand(*shape, scale=1.0):
    return ((torch.rand(*shape, generator=GEN, dtype=torch.float64) * 2 - 1) * scale).requires_grad_()


def run(case, B, H, P, D, DV, bidirectional, num_buckets, max_distance):
    q, k, v = rand(B, H, P, D), rand(B, H, P, D), rand(B, H, P, DV)
    table = rand(num_buckets, H, scale=2.0)  # nn.Embedding(num_buckets, n_heads).weight
    r = torch.rand(B, H, P, DV, generator=GEN, dtype=torch.float64) * 2 - 1
    context_position = torch.arange(P, dtype=torch.long)[:, None]
    memory_position = torch.arange(P, dtype=torch.long)[None, :]
    relative_position = memory_position - context_position  # (q, k)
    buckets = relative_position_bucket(relative_position, bidirectional, num_buckets, max_distance)
    bias = torch.nn.functional.embedding(buckets, table).permute(2, 0, 1).unsqueeze(0)  # (1, h, q, k)
    scores = torch.einsum("bhid,bhjd->bhij", q, k) + bias
    if not bidirectional:
        scores = scores.masked_fill(memory_position > context_position, float("-inf"))
    out = torch.einsum("bhij,bhjc->bhic", torch.softmax(scores, dim=-1), v)
    (out * r).sum().backward()
    for name, t in (("q", q), ("k", k), ("v", v), ("table", table), ("r", r), ("out", out), ("buckets", buckets)):
        save(case + "_" + name, t)
    for name, t in (("q", q), ("k", k), ("v", v), ("table", table)):
        save(case + "_grad_" + name, t.grad)


run("bidirectional", 2, 3, 48, 8, 5, True, 16, 20)
run("causal", 1, 2, 64, 6, 4, False, 12, 24)

rel = torch.arange(-300, 301, dtype=torch.long)
save("distances", rel)
for bidirectional, num_buckets, max_distance in ((True, 32, 128), (False, 32, 128), (True, 16, 20), (False, 12, 24),
                                                 (True, 8, 6)):
    name = "buckets_%s_%d_%d" % ("bi" if bidirectional else "causal", num_buckets, max_distance)
    save(name, relative_position_bucket(rel, bidirectional, num_buckets, max_distance))
