#!/usr/bin/python3
"""PyTorch fixtures for dimsum's attention variants (tests/unit/rope.cpp, ...).

Rotary position embeddings are written here as the two code bases that
define the conventions write them, in float64:

* half_split: Hugging Face's LLaMA (``rotate_half``: features i and i + d/2
  form a pair; cos and sin tables built by concatenating the frequencies
  twice);
* interleaved: Meta's LLaMA reference (features 2i and 2i + 1 as the real
  and imaginary parts of a complex number multiplied by ``polar(1, angle)``).

For each case it saves the input, a fixed random r, the output and d
sum(out * r) / d input under ``fixtures/variants/``. Run with Debian's
interpreter, which has torch:

    /usr/bin/python3 tests/reference/make_variant_fixtures.py [OUTPUT_DIR]
"""

import math
import os
import sys

import numpy as np
import torch

torch.set_num_threads(1)
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(HERE, "fixtures", "variants")
os.makedirs(OUT, exist_ok=True)
GEN = torch.Generator().manual_seed(20261124)


def save(name, a):
    a = a.detach().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
    np.save(os.path.join(OUT, name + ".npy"), np.array(a, order="C"), allow_pickle=False)


def inv_freq(d, base):
    return 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float64) / d))


def rope_half_split(x, base, offset):
    """x: (batch, posn, nheads, d_head), as HF's apply_rotary_pos_emb."""
    p, d = x.shape[1], x.shape[3]
    t = torch.arange(offset, offset + p, dtype=torch.float64)
    freqs = torch.outer(t, inv_freq(d, base))
    emb = torch.cat((freqs, freqs), dim=-1)
    cos = emb.cos()[None, :, None, :]
    sin = emb.sin()[None, :, None, :]

    def rotate_half(v):
        v1, v2 = v[..., : d // 2], v[..., d // 2:]
        return torch.cat((-v2, v1), dim=-1)

    return x * cos + rotate_half(x) * sin


def rope_interleaved(x, base, offset):
    """x: (batch, posn, nheads, d_head), as Meta's apply_rotary_emb."""
    p, d = x.shape[1], x.shape[3]
    t = torch.arange(offset, offset + p, dtype=torch.float64)
    freqs = torch.outer(t, inv_freq(d, base))
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)[None, :, None, :]
    xc = torch.view_as_complex(x.reshape(*x.shape[:-1], d // 2, 2))
    return torch.view_as_real(xc * freqs_cis).flatten(3)


def rope_case(name, fn, shape, base, offset):
    x = torch.randn(shape, generator=GEN, dtype=torch.float64)
    leaf = x.clone().requires_grad_(True)
    y = fn(leaf, base, offset)
    r = torch.randn(y.shape, generator=GEN, dtype=torch.float64)
    (y * r).sum().backward()
    save(f"{name}_x", x)
    save(f"{name}_r", r)
    save(f"{name}_y", y)
    save(f"{name}_grad_x", leaf.grad)


rope_case("rope_half_split", rope_half_split, (2, 5, 3, 8), 10000.0, 0)
rope_case("rope_interleaved", rope_interleaved, (2, 5, 3, 8), 10000.0, 0)
rope_case("rope_half_split_offset", rope_half_split, (1, 3, 2, 6), 500.0, 7)
rope_case("rope_interleaved_offset", rope_interleaved, (1, 3, 2, 6), 500.0, 7)


# Attention variants, written as PyTorch 1.13 users write them (matmul,
# masked_fill, softmax), in float64. Layout (batch, posn, nheads, d_head).
def attention(q, k, v, mask_keep, bias=None):
    """mask_keep: bool (q_posn, k_posn) or broadcastable to (b, h, q, k)."""
    qh, kh, vh = (t.transpose(1, 2) for t in (q, k, v))  # (b, h, p, d)
    s = qh @ kh.transpose(-1, -2) / (q.shape[-1] ** 0.5)
    if bias is not None:
        s = s + bias
    s = s.masked_fill(~mask_keep, float("-inf"))
    return (torch.softmax(s, dim=-1) @ vh).transpose(1, 2)  # (b, q, h, d)


def qkv(b, p, h, d, kv_heads=None):
    kvh = h if kv_heads is None else kv_heads
    q = torch.randn((b, p, h, d), generator=GEN, dtype=torch.float64)
    k = torch.randn((b, p, kvh, d), generator=GEN, dtype=torch.float64)
    v = torch.randn((b, p, kvh, d), generator=GEN, dtype=torch.float64)
    return q, k, v


def save_all(name, **tensors):
    for key, value in tensors.items():
        save(f"{name}_{key}", value)


# Sliding window (Mistral-style): query i sees keys i - window < j <= i.
q, k, v = qkv(2, 11, 3, 4)
i = torch.arange(11)[:, None]
j = torch.arange(11)[None, :]
window = 4
save_all("window", q=q, k=k, v=v, out=attention(q, k, v, (j <= i) & (i - j < window)))


# ALiBi: the paper's get_slopes (github.com/ofirpress/attention_with_linear_biases).
def get_slopes(n):
    def power_of_2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start ** i for i in range(n)]

    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + get_slopes(2 * closest)[0::2][: n - closest]




for heads in (8, 6):
    save(f"alibi_slopes_{heads}", torch.tensor(get_slopes(heads), dtype=torch.float64))
q, k, v = qkv(2, 9, 6, 4)
slopes = torch.tensor(get_slopes(6), dtype=torch.float64)
distance = (torch.arange(9)[None, :] - torch.arange(9)[:, None]).to(torch.float64)  # j - i
bias = slopes[None, :, None, None] * distance[None, None, :, :]
save_all("alibi", q=q, k=k, v=v, out=attention(q, k, v, torch.ones(9, 9, dtype=torch.bool).tril(), bias))

# Grouped-query (6 query heads over 2 key/value heads) and multi-query
# (1 key/value head) attention: keys and values repeated per query head
# with repeat_interleave, as Hugging Face's repeat_kv does; causal.
for name, kv_heads in (("gqa", 2), ("mqa", 1)):
    q, k, v = qkv(2, 7, 6, 4, kv_heads)
    group = 6 // kv_heads
    kr = k.repeat_interleave(group, dim=2)
    vr = v.repeat_interleave(group, dim=2)
    save_all(name, q=q, k=k, v=v, out=attention(q, kr, vr, torch.ones(7, 7, dtype=torch.bool).tril()))
