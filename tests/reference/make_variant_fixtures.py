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
