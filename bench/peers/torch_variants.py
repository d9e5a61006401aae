"""Attention variants in PyTorch 1.13 as its users write them (einsum,
masked_fill, softmax; repeat_interleave for grouped-query heads), the peer of
bench/peers/dimsum_variants.cpp in `bench/compare --variants`; and the same
code in float64 as the reference. Inputs follow bench/peers/inputs.hpp.

    /usr/bin/python3 torch_variants.py VARIANT B P M H D [reps] [--out file.f32]
"""
import math
import os
import sys

import numpy as np
import torch

from torch_attention import kernel, make, timed  # noqa: E402

WINDOW = 256
KV_HEADS = 4


def alibi_slopes(n):
    def power_of_two(m):
        start = 2 ** (-8 / m)
        return [start ** (i + 1) for i in range(m)]
    m = 2 ** int(math.floor(math.log2(n)))
    s = power_of_two(m)
    return s + power_of_two(2 * m)[0::2][: n - m]


def inputs(variant, b, p, h, d, dtype=torch.float32):
    t = lambda a, *shape: torch.from_numpy(a.reshape(shape)).to(dtype)
    kvh = KV_HEADS if variant == "gqa" else h
    return dict(q=t(make(b * p * h * d, 1, 1.0), b, p, h, d),
                k=t(make(b * p * kvh * d, 2, 1.0), b, p, kvh, d),
                v=t(make(b * p * kvh * d, 3, 1.0), b, p, kvh, d),
                slopes=torch.tensor(alibi_slopes(h), dtype=dtype),
                keep=torch.arange(p).expand(b, p) < p - p // 8,
                doc=(torch.arange(p) // (p // 8)).expand(b, p))


def forward(variant, w):
    q, k, v = w["q"], w["k"], w["v"]
    p, d = q.shape[1], q.shape[-1]
    if variant == "gqa":
        k = k.repeat_interleave(q.shape[2] // k.shape[2], dim=2)
        v = v.repeat_interleave(q.shape[2] // v.shape[2], dim=2)
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d)
    causal = torch.triu(torch.ones(p, p, dtype=torch.bool), diagonal=1)
    if variant == "window":
        causal = causal | torch.tril(torch.ones(p, p, dtype=torch.bool), diagonal=-WINDOW)
    if variant == "alibi":
        distance = (torch.arange(p)[None, :] - torch.arange(p)[:, None]).to(scores.dtype)
        scores = scores + w["slopes"][:, None, None] * distance
    if variant == "padding":
        scores = scores.masked_fill(~w["keep"][:, None, None, :], float("-inf"))
    if variant == "document":  # packed documents: each attends within itself
        doc = w["doc"]
        scores = scores.masked_fill(doc[:, None, :, None] != doc[:, None, None, :], float("-inf"))
    scores = scores.masked_fill(causal, float("-inf"))
    return torch.einsum("bhqk,bkhd->bqhd", scores.softmax(-1), v)


def main():
    variant = sys.argv[1]
    b, p, m, h, d = (int(a) for a in sys.argv[2:7])
    rest = sys.argv[7:]
    reps = int(rest[0]) if rest and not rest[0].startswith("-") else 5
    out = rest[rest.index("--out") + 1] if "--out" in rest else None
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    w = inputs(variant, b, p, h, d)
    run = lambda: forward(variant, w)
    print(f"kernel={kernel()}")
    y = timed(run, reps)
    if out:
        y.numpy().astype(np.float32).tofile(out)


if __name__ == "__main__":
    main()
