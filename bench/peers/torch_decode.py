"""Incremental decoding of the seed-000 attention layer in PyTorch 1.13 with
its own key/value cache (preallocated tensors filled position by position,
as a hand-written generate loop keeps them), the peer of
bench/peers/dimsum_decode.cpp in `bench/compare --decode`. Inputs follow
bench/peers/inputs.hpp (torch_attention.inputs).

    /usr/bin/python3 torch_decode.py B P M H D [reps] [--out file.f32]
"""
import math
import os
import sys

import numpy as np
import torch

from torch_attention import inputs, kernel, timed


def decode(w, cache_k, cache_v, out):
    x = w["x"]
    p = x.shape[1]
    d = w["W_Q"].shape[-1]
    for t in range(p):
        xt = x[:, t:t + 1]  # (b, 1, m)
        q = torch.einsum("bpm,hmd->bphd", xt, w["W_Q"]) + w["b_Q"]
        cache_k[:, t:t + 1] = torch.einsum("bpm,hmd->bphd", xt, w["W_K"]) + w["b_K"]
        cache_v[:, t:t + 1] = torch.einsum("bpm,hmd->bphd", xt, w["W_V"]) + w["b_V"]
        k, v = cache_k[:, :t + 1], cache_v[:, :t + 1]
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d)
        z = torch.einsum("bhqk,bkhd->bqhd", scores.softmax(-1), v)
        out[:, t:t + 1] = torch.einsum("bqhd,hdm->bqm", z, w["W_O"]) + w["b_O"]
    return out


def main():
    b, p, m, h, d = (int(a) for a in sys.argv[1:6])
    rest = sys.argv[6:]
    reps = int(rest[0]) if rest and not rest[0].startswith("-") else 5
    path = rest[rest.index("--out") + 1] if "--out" in rest else None
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    w = inputs(b, p, m, h, d)
    cache_k, cache_v, out = torch.zeros(b, p, h, d), torch.zeros(b, p, h, d), torch.zeros(b, p, m)
    run = lambda: decode(w, cache_k, cache_v, out)
    print(f"kernel={kernel()}")
    y = timed(run, reps)
    if path:
        y.numpy().astype(np.float32).tofile(path)


if __name__ == "__main__":
    main()
