#!/usr/bin/python3
"""PyTorch float64 fixtures for attention under document masks of packed
sequences (tests/unit/block_mask.cpp), written as plain unfused PyTorch
with autograd, as FlexAttention's document-masking example defines them:

* document: several documents packed into one sequence; query i attends
  to key j only when both lie in the same document,
  keep = doc[b, i] == doc[b, j] (document ids per position);
* document_causal: the same, and only to keys j <= i (packed causal
  language modelling);
* prefix_lm: a prefix-LM mask (T5, UniLM): key j is kept when it lies in
  the row's prefix, j < prefix[b], or j <= i; prefixes 50 and 130;
* chunked: chunked local attention (Llama 4): causal within chunks of 48
  positions, keep = (i // 48 == j // 48) & (j <= i).

The scores are scaled by 1/2 and filled with -inf where not kept, then
softmaxed along the keys. Shapes: q (batch 2, head 2, posn 200, d_head 4),
k (2, 2, 200, 4), v (2, 2, 200, d_value 3); batch 0 packs documents of
70, 50 and 80 tokens, batch 1 of 128, 40 and 32 (boundaries inside and on
the kernel's 64-row and 16-key blocks). Each case saves q, k, v, a fixed
random r of the output's shape, the output and the gradients of
sum(out * r) with respect to q, k and v, under
fixtures/block_mask/<case>_<name>.npy. Deterministic:

    /usr/bin/python3 tests/reference/make_block_mask_fixtures.py [OUTPUT_DIR]
"""

import os
import sys

import numpy as np
import torch

torch.set_num_threads(1)
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(HERE, "fixtures", "block_mask")
os.makedirs(OUT, exist_ok=True)
GEN = torch.Generator().manual_seed(20261203)
B, H, P, D, DV = 2, 2, 200, 4, 3
LENGTHS = [[70, 50, 80], [128, 40, 32]]


def save(case, name, a):
    a = a.detach().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
    np.save(os.path.join(OUT, case + "_" + name + ".npy"), np.array(a, order="C"), allow_pickle=False)


def rand(*shape):
    return (torch.rand(*shape, generator=GEN, dtype=torch.float64) * 2 - 1).requires_grad_()


def document_ids():
    doc = torch.empty(B, P, dtype=torch.int64)
    for b, lengths in enumerate(LENGTHS):
        doc[b] = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))
    return doc


def keep_document(doc):
    return doc[:, None, :, None] == doc[:, None, None, :]  # (b, 1, i, j)


def keep_causal():
    i = torch.arange(P)[:, None]
    j = torch.arange(P)[None, :]
    return j <= i


def run(case, keep):
    q, k, v = rand(B, H, P, D), rand(B, H, P, D), rand(B, H, P, DV)
    r = torch.rand(B, H, P, DV, generator=GEN, dtype=torch.float64) * 2 - 1
    s = torch.einsum("bhid,bhjd->bhij", q, k) * 0.5
    p = torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1)
    out = torch.einsum("bhij,bhjc->bhic", p, v)
    (out * r).sum().backward()
    for name, t in (("q", q), ("k", k), ("v", v), ("r", r), ("out", out)):
        save(case, name, t)
    for name, t in (("q", q), ("k", k), ("v", v)):
        save(case, "grad_" + name, t.grad)


doc = document_ids()
run("document", keep_document(doc))
run("document_causal", keep_document(doc) & keep_causal())
prefix = torch.tensor([50, 130])
run("prefix_lm", ((torch.arange(P)[None, :] < prefix[:, None])[:, None, None, :]) | keep_causal())
CHUNK = 48
run("chunked", ((torch.arange(P)[:, None] // CHUNK) == (torch.arange(P)[None, :] // CHUNK)) & keep_causal())
