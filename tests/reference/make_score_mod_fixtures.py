#!/usr/bin/python3
"""PyTorch float64 fixtures for attention with score modifications
(tests/unit/grad_fused_vars.cpp), written as the papers define them, as
plain unfused PyTorch with autograd:

* softcap: Gemma 2's logit soft-capping, scores = c * tanh(scores / c)
  with c = 2, after the 1/2 scale, then the causal mask;
* temperature: a learned per-head temperature, scores * temp[h], then the
  causal mask;
* alibi: ALiBi (Press et al.) with learned slopes, scores / 2 + slope[h] *
  (j - i), then the causal mask;
* map: a user's function of the scaled scores, s + 0.1 s^3 (dimsum's
  `map` with its derivative 1 + 0.3 s^2; here autograd's);
* sink: attention sinks as gpt-oss writes them, a learned logit per head
  appended to each row of the scaled, causally masked scores as one more
  column before the softmax, whose weight is dropped after it.

Shapes: q (batch 2, head 2, q_posn 5, d_head 4), k (2, 2, k_posn 6, 4),
v (2, 2, 6, d_value 3); the causal mask hides key j > query i. Each case
saves its inputs, a fixed random r of the output's shape, the output, and
the gradients of sum(out * r) with respect to q, k, v and the learned
tensor, under fixtures/score_mod/<case>_<name>.npy. Deterministic:

    /usr/bin/python3 tests/reference/make_score_mod_fixtures.py [OUTPUT_DIR]
"""

import os
import sys

import numpy as np
import torch

torch.set_num_threads(1)
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(HERE, "fixtures", "score_mod")
os.makedirs(OUT, exist_ok=True)
GEN = torch.Generator().manual_seed(20261202)
B, H, P, PK, D, DV = 2, 2, 5, 6, 4, 3


def save(case, name, a):
    a = a.detach().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
    np.save(os.path.join(OUT, case + "_" + name + ".npy"), np.array(a, order="C"), allow_pickle=False)


def rand(*shape):
    return (torch.rand(*shape, generator=GEN, dtype=torch.float64) * 2 - 1).requires_grad_()


def causal(s):
    i = torch.arange(P)[:, None]
    j = torch.arange(PK)[None, :]
    return s.masked_fill(j > i, float("-inf"))


def attention(q, k, v, mod, sinks=None):
    s = causal(mod(torch.einsum("bhid,bhjd->bhij", q, k)))
    if sinks is None:
        p = torch.softmax(s, dim=-1)
    else:
        column = sinks[None, :, None, None].expand(B, H, P, 1)
        p = torch.softmax(torch.cat([s, column], dim=-1), dim=-1)[..., :-1]
    return torch.einsum("bhij,bhjc->bhic", p, v)


def softcap(s, c=2.0):
    return c * torch.tanh(s * 0.5 / c)


def run(case, mod, learned, sinks=False):
    q, k, v = rand(B, H, P, D), rand(B, H, PK, D), rand(B, H, PK, DV)
    r = torch.rand(B, H, P, DV, generator=GEN, dtype=torch.float64) * 2 - 1
    out = attention(q, k, v, lambda s: mod(s, learned), learned if sinks else None)
    (out * r).sum().backward()
    for name, t in (("q", q), ("k", k), ("v", v), ("r", r), ("out", out)):
        save(case, name, t)
    for name, t in (("q", q), ("k", k), ("v", v)):
        save(case, "grad_" + name, t.grad)
    if learned is not None:
        save(case, "learned", learned)
        save(case, "grad_learned", learned.grad)


run("softcap", lambda s, _: softcap(s), None)
temp = torch.tensor([0.7, -1.3], dtype=torch.float64, requires_grad=True)
run("temperature", lambda s, t: s * t[None, :, None, None], temp)
slope = torch.tensor([0.5, 0.25], dtype=torch.float64, requires_grad=True)
distance = (torch.arange(PK)[None, :] - torch.arange(P)[:, None]).double()
run("alibi", lambda s, m: s / 2 + m[None, :, None, None] * distance, slope)
run("map", lambda s, _: s * 0.5 + 0.1 * (s * 0.5) ** 3, None)
sinks = torch.tensor([0.3, -0.8], dtype=torch.float64, requires_grad=True)
run("sink", lambda s, _: s * 0.5, sinks, sinks=True)
