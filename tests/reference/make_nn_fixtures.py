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

Run with Debian's interpreter, which has torch:

    /usr/bin/python3 tests/reference/make_nn_fixtures.py [OUTPUT_DIR]

The output is deterministic. The C++ tests never need PyTorch.
"""

import os
import sys

import numpy as np
import torch
from torch import nn

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(HERE, "fixtures", "nn", "tape")
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


if __name__ == "__main__":
    main()
