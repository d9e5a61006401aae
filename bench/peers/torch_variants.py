"""Attention variants in PyTorch 1.13 as its users write them (einsum,
masked_fill, softmax; repeat_interleave for grouped-query heads), the peer of
bench/peers/dimsum_variants.cpp in `bench/compare --variants`; and the same
code in float64 as the reference. Inputs follow bench/peers/inputs.hpp.

    /usr/bin/python3 torch_variants.py VARIANT B P M H D [reps] [--out file.f32] [--train] [--bf16]

With --train the timed call is a training step of the attention core with
autograd: the forward, then backward of (z * r).sum() (r a fixed input), the
learned tensors (temp, ALiBi's slopes, sinks, T5's bias table) requiring gradients too;
--out writes z, dq, dk, dv and then the learned tensor's gradient, if any.
With --bf16 (the causal variant only) every input is torch.bfloat16 and the
same code runs in bf16 (PyTorch's CPU kernels for it); --out converts to float32.
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


LEARNED = {"temperature": "temp", "alibi": "slopes", "sinks": "sinks", "t5": "table"}  # variant: its learned tensor
T5_BUCKETS, T5_MAX_DISTANCE = 32, 128


def t5_bucket(relative_position, num_buckets=T5_BUCKETS, max_distance=T5_MAX_DISTANCE):
    """Hugging Face's T5Attention._relative_position_bucket, unidirectional (a decoder)."""
    n = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = n < max_exact
    large = max_exact + (torch.log(n.float() / max_exact) / math.log(max_distance / max_exact) *
                         (num_buckets - max_exact)).to(torch.long)
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    return torch.where(is_small, n, large)


def inputs(variant, b, p, h, d, dtype=torch.float32):
    t = lambda a, *shape: torch.from_numpy(a.reshape(shape)).to(dtype)
    kvh = KV_HEADS if variant == "gqa" else h
    return dict(q=t(make(b * p * h * d, 1, 1.0), b, p, h, d),
                k=t(make(b * p * kvh * d, 2, 1.0), b, p, kvh, d),
                v=t(make(b * p * kvh * d, 3, 1.0), b, p, kvh, d),
                r=t(make(b * p * h * d, 4, 1.0), b, p, h, d),
                slopes=torch.tensor(alibi_slopes(h), dtype=dtype),
                temp=torch.tensor([1.0 + 0.05 * i for i in range(h)], dtype=torch.float32).to(dtype),
                sinks=torch.tensor([-1.0 + 0.1 * i for i in range(h)], dtype=torch.float32).to(dtype),
                keep=torch.arange(p).expand(b, p) < p - p // 8,
                doc=(torch.arange(p) // (p // 8)).expand(b, p),
                prefix=torch.full((b,), p // 4),
                table=torch.tensor([[0.05 * (((7 * bk + 3 * hh) % 11) - 5) for hh in range(h)]
                                    for bk in range(T5_BUCKETS)], dtype=torch.float32).to(dtype))


def forward(variant, w):
    q, k, v = w["q"], w["k"], w["v"]
    b, p, h, d = q.shape
    if variant == "gqa":
        k = k.repeat_interleave(q.shape[2] // k.shape[2], dim=2)
        v = v.repeat_interleave(q.shape[2] // v.shape[2], dim=2)
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d)
    qi, ki = torch.arange(p)[:, None], torch.arange(p)[None, :]
    masked = ki > qi  # causal
    if variant == "window":
        masked = masked | (ki <= qi - WINDOW)
    if variant == "alibi":
        scores = scores + w["slopes"][:, None, None] * (ki - qi).to(scores.dtype)
    if variant == "padding":
        scores = scores.masked_fill(~w["keep"][:, None, None, :], float("-inf"))
    if variant == "document":  # packed documents: each attends within itself
        doc = w["doc"]
        scores = scores.masked_fill(doc[:, None, :, None] != doc[:, None, None, :], float("-inf"))
    if variant == "t5":  # a learned bias per (bucket of k - q, head)
        scores = scores + w["table"][t5_bucket(ki - qi)].permute(2, 0, 1)[None]
    if variant == "softcap":  # Gemma 2
        scores = 50 * torch.tanh(scores / 50)
    if variant == "temperature":
        scores = scores * w["temp"][None, :, None, None]
    if variant == "map":
        scores = scores + 0.01 * scores**3
    if variant == "prefix":  # bidirectional over each row's prefix, causal after it
        masked = ~((ki[None] < w["prefix"][:, None, None]) | (ki <= qi)[None])[:, None]
    if variant == "chunked":  # causal within chunks of p/8 positions
        c = max(p // 8, 1)
        masked = masked | (qi // c != ki // c)
    scores = scores.masked_fill(masked, float("-inf"))
    if variant == "sinks":  # gpt-oss: a sink logit per head in the denominator, its weight dropped
        sink = w["sinks"].reshape(1, -1, 1, 1).expand(b, -1, p, 1)
        weights = torch.cat([scores, sink], dim=-1).softmax(-1)[..., :-1]
    else:
        weights = scores.softmax(-1)
    return torch.einsum("bhqk,bkhd->bqhd", weights, v)


def train_step(variant, w):
    """z and the gradients of (z * r).sum(): dq, dk, dv, then the learned tensor's."""
    leaves = ["q", "k", "v"] + ([LEARNED[variant]] if variant in LEARNED else [])
    x = dict(w)
    for n in leaves:
        x[n] = w[n].detach().requires_grad_(True)
    with torch.enable_grad():  # timed() runs under no_grad
        z = forward(variant, x)
        (z * w["r"]).sum().backward()
    return torch.cat([z.detach().reshape(-1)] + [x[n].grad.reshape(-1) for n in leaves])


def main():
    variant = sys.argv[1]
    b, p, m, h, d = (int(a) for a in sys.argv[2:7])
    rest = sys.argv[7:]
    reps = int(rest[0]) if rest and not rest[0].startswith("-") else 5
    out = rest[rest.index("--out") + 1] if "--out" in rest else None
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    w = inputs(variant, b, p, h, d)
    if "--bf16" in rest:
        if variant != "causal":
            raise SystemExit("--bf16: the causal variant only")
        w = {n: x.to(torch.bfloat16) if x.is_floating_point() else x for n, x in w.items()}
    run = (lambda: train_step(variant, w)) if "--train" in rest else (lambda: forward(variant, w))
    print(f"kernel={kernel()}")
    y = timed(run, reps)
    if out:
        y.float().numpy().astype(np.float32).tofile(out)


if __name__ == "__main__":
    main()
