#!/usr/bin/python3
"""PyTorch autograd fixtures for the tape forms of dimsum's nn modules
(tests/unit/nn_tape.cpp).

A tiny model of torch.nn modules, in float64:

    embed = nn.Embedding(7, 4)         # ids (2, 3) with repeated ids
    up    = nn.Linear(4, 5)
    ln    = nn.LayerNorm(5)
    head  = nn.Linear(5, 3, bias=False)
    y  = head(ln(up(embed(ids))))      # (2, 3, 3)
    y2 = up(x)                         # x (2, 4), an input with a gradient
    loss = sum(y * r) + sum(y2 * r2)   # r, r2 fixed random

Every parameter (the layer norm's too) is drawn from a seeded normal
distribution, so no gradient is trivially zero or one. It writes, under
``fixtures/nn/tape/``:

- ``params/<dotted name>.npy``: the model's state dict, one file per key
  (``embed.weight``, ``up.weight``, ``up.bias``, ``ln.weight``, ``ln.bias``,
  ``head.weight``), exactly the files a strict ``load_npy_dir`` reads;
- ``grads/<dotted name>.npy``: d loss / d parameter by torch.autograd;
- ``ids.npy`` (int64), ``x.npy``, ``r.npy``, ``r2.npy``, ``y.npy``,
  ``loss.npy`` and ``grad_x.npy``.

Three more cases, each from its own seeded generator (float64):

- ``regroup/``: a split and a merge of dims, as seed 003's ``view``s:
  ``y = (softmax(x.view(2, 4, 2, 3), -1).reshape(2, 4, 6) * c)``, loss
  ``sum(y * r)``; files ``x``, ``c``, ``r``, ``grad_x``.
- ``mha_cross/`` and ``mha_self_masked_row/``: seed 003's
  MultiHeadAttention(num_heads=2, emb_dim=4, dim_k=3) in eval mode (its
  dropout the identity), loss ``sum(output * r)``. Cross attention of 3
  query positions over 5 key positions with a (batch, kv_seq) padding mask
  (batch 1 pads two keys); self-attention over 4 positions with a (batch,
  q_seq, kv_seq) mask that hides every key from one query row (its scores
  are all -1e9, so its weights are uniform). Files: ``params/`` and
  ``grads/`` by state-dict key (``q_linear.weight``, ..., ``out.bias``),
  ``q_in``, ``kv_in`` (cross only), ``mask`` (bool), ``r``, ``output``,
  ``loss``, ``grad_q_in`` (and ``grad_kv_in``).
- ``char_head/``: seed 001's Head(head_size=3) on x (2, 5, 4): bias-free
  key, query and value Linears, ``q @ k.T * C**-0.5``, causal mask with
  -inf, softmax, ``@ v``; loss ``sum(out * r)``. Files: ``params/`` and
  ``grads/`` (``key.weight``, ``query.weight``, ``value.weight``), ``x``,
  ``r``, ``out``, ``loss``, ``grad_x``.

Run with Debian's interpreter, which has torch:

    /usr/bin/python3 tests/reference/make_nn_fixtures.py [OUTPUT_DIR]

The output is deterministic. The C++ tests never need PyTorch.
"""

import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(HERE, "fixtures", "nn", "tape")
sys.path.insert(0, HERE)
import make_fixtures as mf  # noqa: E402  (seed 003's MultiHeadAttention, as the seed writes it)
GEN = torch.Generator().manual_seed(20261126)


def save(path, a):
    a = a.detach().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
    full = os.path.join(OUT, path + ".npy")
    os.makedirs(os.path.dirname(full), exist_ok=True)
    np.save(full, np.array(a, order="C"), allow_pickle=False)  # keeps rank 0


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(7, 4)
        self.up = nn.Linear(4, 5)
        self.ln = nn.LayerNorm(5)
        self.head = nn.Linear(5, 3, bias=False)

    def forward(self, ids):
        return self.head(self.ln(self.up(self.embed(ids))))


def main():
    model = Tiny().double()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=GEN, dtype=torch.float64))
    for k, v in model.state_dict().items():
        save(f"params/{k}", v)

    ids = torch.tensor([[1, 3, 1], [6, 1, 0]], dtype=torch.int64)  # id 1 three times
    x = torch.randn((2, 4), generator=GEN, dtype=torch.float64).requires_grad_(True)
    y = model(ids)
    r = torch.randn(y.shape, generator=GEN, dtype=torch.float64)
    y2 = model.up(x)
    r2 = torch.randn(y2.shape, generator=GEN, dtype=torch.float64)
    loss = (y * r).sum() + (y2 * r2).sum()
    loss.backward()

    for k, p in model.named_parameters():
        save(f"grads/{k}", p.grad)
    save("ids", ids)
    save("x", x)
    save("r", r)
    save("r2", r2)
    save("y", y)
    save("loss", loss.detach().reshape(()))
    save("grad_x", x.grad)

    regroup()
    mha("mha_cross", cross=True)
    mha("mha_self_masked_row", cross=False)
    char_head()


def randn(gen, *shape):
    return torch.randn(shape, generator=gen, dtype=torch.float64)


def regroup():
    gen = torch.Generator().manual_seed(20261127)
    x = randn(gen, 2, 4, 6).requires_grad_(True)
    c = randn(gen, 6)
    y = torch.softmax(x.view(2, 4, 2, 3), -1).reshape(2, 4, 6) * c  # split f into (h d), softmax over d, merge
    r = randn(gen, *y.shape)
    (y * r).sum().backward()
    for k, v in {"x": x, "c": c, "r": r, "grad_x": x.grad}.items():
        save(f"regroup/{k}", v)


def seeded_parameters(model, gen, scale):
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(randn(gen, *p.shape) * scale)


def save_module(case, model):
    for k, v in model.state_dict().items():
        save(f"{case}/params/{k}", v)
    for k, p in model.named_parameters():
        save(f"{case}/grads/{k}", p.grad)


def mha(case, cross):
    gen = torch.Generator().manual_seed(20261128 if cross else 20261129)
    model = mf.MultiHeadAttention(num_heads=2, emb_dim=4, dim_k=3).double().eval()  # eval: dropout is the identity
    seeded_parameters(model, gen, 0.7)
    q_len, kv_len = (3, 5) if cross else (4, 4)
    q_in = randn(gen, 2, q_len, 4).requires_grad_(True)
    kv_in = randn(gen, 2, kv_len, 4).requires_grad_(True) if cross else q_in
    if cross:
        mask = torch.ones(2, kv_len, dtype=torch.bool)  # (batch, kv_seq): padding
        mask[0, 4] = False
        mask[1, 3:] = False
        seed_mask = mask.unsqueeze(1)  # the seed's (batch, 1, kv_seq)
    else:
        mask = torch.tril(torch.ones(q_len, kv_len, dtype=torch.bool)).repeat(2, 1, 1)  # (batch, q_seq, kv_seq)
        mask[1, 2, :] = False  # query 2 of batch 1 sees no key: its scores are all -1e9
        seed_mask = mask
    output, _ = model(q_in, kv_in, kv_in, seed_mask)
    r = randn(gen, *output.shape)
    loss = (output * r).sum()
    loss.backward()
    save_module(case, model)
    save(f"{case}/q_in", q_in)
    save(f"{case}/mask", mask)
    save(f"{case}/r", r)
    save(f"{case}/output", output)
    save(f"{case}/loss", loss.detach().reshape(()))
    save(f"{case}/grad_q_in", q_in.grad)
    if cross:
        save(f"{case}/kv_in", kv_in)
        save(f"{case}/grad_kv_in", kv_in.grad)


class Head(nn.Module):
    """Seed 001's class (block_size 5)."""

    def __init__(self, n_embd, head_size, block_size):
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        B, T, C = x.shape
        k = self.key(x)
        q = self.query(x)
        wei = q @ k.transpose(-2, -1) * C**-0.5
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        wei = F.softmax(wei, dim=-1)
        v = self.value(x)
        return wei @ v


def char_head():
    gen = torch.Generator().manual_seed(20261130)
    model = Head(n_embd=4, head_size=3, block_size=5).double()
    seeded_parameters(model, gen, 0.7)
    x = randn(gen, 2, 5, 4).requires_grad_(True)
    out = model(x)
    r = randn(gen, *out.shape)
    loss = (out * r).sum()
    loss.backward()
    for k, v in model.state_dict().items():
        if k != "tril":
            save(f"char_head/params/{k}", v)
    for k, p in model.named_parameters():
        save(f"char_head/grads/{k}", p.grad)
    for k, v in {"x": x, "r": r, "out": out, "loss": loss.detach().reshape(()), "grad_x": x.grad}.items():
        save(f"char_head/{k}", v)


if __name__ == "__main__":
    main()
