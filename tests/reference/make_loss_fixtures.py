#!/usr/bin/python3
"""PyTorch float64 references for the tensor forms of layer_norm, log_softmax
and cross_entropy (tests/unit/training_ops.cpp).

Each case draws its inputs from a seeded torch.Generator in float64, puts the
named dim where a dimsum user might have it (not always last), runs
torch.nn.functional in float64 and saves inputs and outputs as float64
``.npy`` (targets int64) under ``fixtures/loss/``. The dims, outermost first:

    layer_norm_x      (batch 2, d_model 5, posn 3)   normalised over d_model
    layer_norm_w, _b  (d_model 5)
    layer_norm_y      (batch, d_model, posn)         F.layer_norm, eps 1e-5
    layer_norm_big_x  as layer_norm_x, plus 1e4      (a large mean: stability)
    layer_norm_big_y
    log_softmax_x     (batch 2, vocab 4, posn 3)     one -inf entry, one row
                                                     of logits near 1000
    log_softmax_y     (batch, vocab, posn)           F.log_softmax over vocab
    ce_logits         (posn 3, vocab 5, batch 2)
    ce_targets        (batch 2, posn 3)              int64, with repeats
    ce_mean, ce_sum   ()                             F.cross_entropy

    /usr/bin/python3 tests/reference/make_loss_fixtures.py [OUTPUT_DIR]

The output is deterministic. The C++ test never needs PyTorch.
"""

import os
import sys

import numpy as np
import torch

torch.set_num_threads(1)
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(HERE, "fixtures", "loss")
os.makedirs(OUT, exist_ok=True)
GEN = torch.Generator().manual_seed(20261126)
F = torch.nn.functional


def save(name, t):
    np.save(os.path.join(OUT, name + ".npy"), np.array(t.numpy(), order="C"), allow_pickle=False)


def rand(*shape):
    return torch.randn(shape, generator=GEN, dtype=torch.float64)


# layer_norm over the middle dim: move it last for torch, then back.
x, w, b = rand(2, 5, 3), rand(5), rand(5)
for name, xs in [("layer_norm", x), ("layer_norm_big", x + 1e4)]:
    y = F.layer_norm(xs.permute(0, 2, 1), (5,), w, b, 1e-5).permute(0, 2, 1)
    save(name + "_x", xs)
    save(name + "_y", y)
save("layer_norm_w", w)
save("layer_norm_b", b)

# log_softmax over the middle dim (vocab), with -inf and a row of large logits.
x = rand(2, 4, 3)
x[0, 2, 1] = -float("inf")
x[1, :, 2] += 1000.0
save("log_softmax_x", x)
save("log_softmax_y", F.log_softmax(x, dim=1))

# cross_entropy: logits (posn, vocab, batch), targets (batch, posn).
logits = rand(3, 5, 2)
targets = torch.tensor([[1, 4, 1], [0, 1, 3]], dtype=torch.int64)
as_torch = logits.permute(2, 1, 0)  # (batch, vocab, posn): torch's (N, C, d1)
save("ce_logits", logits)
save("ce_targets", targets)
save("ce_mean", F.cross_entropy(as_torch, targets, reduction="mean"))
save("ce_sum", F.cross_entropy(as_torch, targets, reduction="sum"))
print("wrote", OUT)
