#!/usr/bin/python3
"""PyTorch float64 fixtures for fine-tuning with a frozen embedding
(tests/unit/nn_frozen.cpp): dimsum's frozen_parameter against torch's
``requires_grad_(False)``.

The model, in float64, with every parameter drawn from a seeded normal:

    embed = nn.Embedding(7, 4); embed.weight.requires_grad_(False)
    up    = nn.Linear(4, 5)
    W_out = nn.Parameter(torch.randn(5, 3))       # a bare parameter (hid, cls)
    logits = torch.tanh(up(embed(ids))) @ W_out   # ids (2, 3), repeated ids
    loss = F.cross_entropy(logits.view(-1, 3), targets.view(-1))

trained for 3 steps of AdamW(lr=0.05, weight_decay=0.1), zero_grad before
each step. It writes, under ``fixtures/nn/frozen/``:

- ``params/<name>.npy``: the initial parameters by the names of the dimsum
  model struct (``embed``, the table alone, ``up.weight``, ``up.bias``,
  ``W_out``);
- ``grads/<name>.npy``: the first step's gradients of the trainable ones;
- ``final/<name>.npy``: every parameter after the 3 steps (the embedding
  unchanged);
- ``ids.npy``, ``targets.npy`` (int64), ``losses.npy`` (the 3 losses).
"""
import os

import numpy as np
import torch
import torch.nn.functional as F

torch.manual_seed(20261202)
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "nn", "frozen")
for sub in ("params", "grads", "final"):
    os.makedirs(os.path.join(out, sub), exist_ok=True)

embed = torch.nn.Embedding(7, 4).double()
up = torch.nn.Linear(4, 5).double()
W_out = torch.nn.Parameter(torch.randn(5, 3, dtype=torch.float64))
with torch.no_grad():
    embed.weight.copy_(torch.randn(7, 4, dtype=torch.float64))
    up.weight.copy_(torch.randn(5, 4, dtype=torch.float64))
    up.bias.copy_(torch.randn(5, dtype=torch.float64))
embed.weight.requires_grad_(False)

ids = torch.tensor([[1, 4, 1], [6, 0, 4]], dtype=torch.int64)
targets = torch.tensor([[2, 0, 1], [1, 1, 0]], dtype=torch.int64)

named = {"embed": embed.weight, "up.weight": up.weight, "up.bias": up.bias, "W_out": W_out}
for k, v in named.items():
    np.save(os.path.join(out, "params", k + ".npy"), v.detach().numpy())

opt = torch.optim.AdamW([p for p in named.values() if p.requires_grad], lr=0.05, weight_decay=0.1)
losses = []
for step in range(3):
    opt.zero_grad()
    logits = torch.tanh(up(embed(ids))) @ W_out
    loss = F.cross_entropy(logits.view(-1, 3), targets.view(-1))
    loss.backward()
    if step == 0:
        assert embed.weight.grad is None
        for k, v in named.items():
            if v.requires_grad:
                np.save(os.path.join(out, "grads", k + ".npy"), v.grad.numpy())
    opt.step()
    losses.append(loss.item())

for k, v in named.items():
    np.save(os.path.join(out, "final", k + ".npy"), v.detach().numpy())
np.save(os.path.join(out, "ids.npy"), ids.numpy())
np.save(os.path.join(out, "targets.npy"), targets.numpy())
np.save(os.path.join(out, "losses.npy"), np.array(losses, dtype=np.float64))
