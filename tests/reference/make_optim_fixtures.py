#!/usr/bin/python3
"""PyTorch reference fixtures for dimsum's optimizers (tests/unit/optim_*.cpp).

Writes small float64 ``.npy`` files under ``fixtures/optim/`` (C order, little
endian):

- ``init_W.npy`` (row=3, col=4), ``init_b.npy`` (col=4): the parameters
  before the first step;
- ``grads_W.npy`` (step=6, row, col), ``grads_b.npy`` (step, col): the
  gradient set by hand before each step;
- ``<case>_W.npy`` (step, row, col), ``<case>_b.npy`` (step, col): torch's
  parameters after each step, for every case in CASES (torch.optim.SGD and
  torch.optim.AdamW with the options listed, single-tensor path,
  ``foreach=False``);
- ``<case>_state_W.npy``: for AdamW cases, exp_avg and exp_avg_sq of W
  after the last step stacked as (moment=2, row, col); for SGD with
  momentum, the momentum buffer of W (row, col);
- ``clip_<name>_grads.npy`` / ``clip_<name>_W.npy`` / ``clip_<name>_b.npy``
  and ``clip_<name>_norm.npy`` (shape (1,)): gradients before and after
  ``torch.nn.utils.clip_grad_norm_`` and the total norm it returned;
- ``schedule_lr.npy`` (step=40,): the learning rate torch's ``LambdaLR``
  gives an SGD optimizer at each step with the warmup-cosine factor, checked
  here against the plain formula.

Run with Debian's interpreter (torch 1.13):

    /usr/bin/python3 tests/reference/make_optim_fixtures.py [OUTPUT_DIR]

The output is deterministic; the C++ tests only read the committed files.
"""

import math
import os
import sys

import numpy as np
import torch

STEPS = 6

CASES = {
    "sgd_plain": ("sgd", dict(lr=0.1)),
    "sgd_momentum": ("sgd", dict(lr=0.1, momentum=0.9, dampening=0.25, weight_decay=0.01)),
    "sgd_nesterov": ("sgd", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.001)),
    "sgd_maximize": ("sgd", dict(lr=0.1, momentum=0.5, maximize=True)),
    "adamw_default": ("adamw", dict()),
    "adamw_custom": ("adamw", dict(lr=0.02, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
    "adamw_amsgrad": ("adamw", dict(lr=0.05, amsgrad=True, weight_decay=0.0)),
}

# name -> (max_norm, norm_type, gradient scale)
CLIP_CASES = {
    "l2": (1.0, 2.0, 3.0),
    "l2_unclipped": (100.0, 2.0, 1.0),
    "inf": (0.5, math.inf, 1.0),
    "l1": (2.0, 1.0, 1.0),
}

# The schedule of include/dimsum/optim/lr_schedule.hpp.
BASE_LR, MIN_LR, WARMUP, TOTAL, SCHEDULE_STEPS = 0.5, 0.05, 8, 30, 40


def plain_schedule(s):
    if s < WARMUP:
        return BASE_LR * s / WARMUP
    if s >= TOTAL:
        return MIN_LR
    progress = (s - WARMUP) / (TOTAL - WARMUP)
    return MIN_LR + (BASE_LR - MIN_LR) * 0.5 * (1.0 + math.cos(math.pi * progress))


def save(out, name, array):
    np.save(os.path.join(out, name + ".npy"), np.ascontiguousarray(array, dtype=np.float64))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "fixtures", "optim")
    os.makedirs(out, exist_ok=True)
    torch.set_default_dtype(torch.float64)
    gen = torch.Generator().manual_seed(20260412)
    init_W = torch.randn(3, 4, generator=gen)
    init_b = torch.randn(4, generator=gen)
    grads_W = torch.randn(STEPS, 3, 4, generator=gen)
    grads_b = torch.randn(STEPS, 4, generator=gen)
    save(out, "init_W", init_W)
    save(out, "init_b", init_b)
    save(out, "grads_W", grads_W)
    save(out, "grads_b", grads_b)

    for case, (kind, options) in CASES.items():
        W = torch.nn.Parameter(init_W.clone())
        b = torch.nn.Parameter(init_b.clone())
        if kind == "sgd":
            opt = torch.optim.SGD([W, b], foreach=False, **options)
        else:
            opt = torch.optim.AdamW([W, b], foreach=False, **options)
        after_W, after_b = [], []
        for s in range(STEPS):
            W.grad = grads_W[s].clone()
            b.grad = grads_b[s].clone()
            opt.step()
            after_W.append(W.detach().clone())
            after_b.append(b.detach().clone())
        save(out, case + "_W", torch.stack(after_W))
        save(out, case + "_b", torch.stack(after_b))
        state = opt.state[W]
        if kind == "adamw":
            save(out, case + "_state_W", torch.stack([state["exp_avg"], state["exp_avg_sq"]]))
        elif options.get("momentum", 0) != 0:
            save(out, case + "_state_W", state["momentum_buffer"])

    for name, (max_norm, norm_type, scale) in CLIP_CASES.items():
        W = torch.nn.Parameter(init_W.clone())
        b = torch.nn.Parameter(init_b.clone())
        W.grad = grads_W[0] * scale
        b.grad = grads_b[0] * scale
        save(out, "clip_%s_grads_W" % name, W.grad)
        save(out, "clip_%s_grads_b" % name, b.grad)
        total = torch.nn.utils.clip_grad_norm_([W, b], max_norm, norm_type=norm_type)
        save(out, "clip_%s_W" % name, W.grad)
        save(out, "clip_%s_b" % name, b.grad)
        save(out, "clip_%s_norm" % name, total.reshape(1))

    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=BASE_LR)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: plain_schedule(s) / BASE_LR)
    lrs = []
    for s in range(SCHEDULE_STEPS):
        lr = opt.param_groups[0]["lr"]
        assert abs(lr - plain_schedule(s)) <= 1e-15, (s, lr, plain_schedule(s))
        lrs.append(lr)
        p.grad = torch.zeros(1)
        opt.step()
        sched.step()
    save(out, "schedule_lr", np.array(lrs))


if __name__ == "__main__":
    main()
