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
- a frozen embedding (tests/unit/optim_groups.cpp): ``frozen_init_<name>.npy``
  for ``embed.weight`` (vocab=6, d=4), ``head.weight`` (cls=3, d),
  ``head.bias`` (cls); ``frozen_ids.npy`` and ``frozen_targets.npy``
  (step=4, b=5, integer values stored as float64); ``frozen_loss.npy``
  (step,) the loss of each step before its update and
  ``frozen_<name>.npy`` (step, ...) the parameters after each step: the
  embedding with ``requires_grad_(False)``, logits = head(embed(ids)),
  mean cross entropy, torch.optim.AdamW(lr 0.05, weight_decay 0.01) over
  all three parameters (the frozen one has no grad, so AdamW skips it);
- parameter groups (tests/unit/optim_groups.cpp), for a model of five
  parameters (``embed.weight`` (tok=5, col=4), ``W`` (row=3, col=4), ``b``
  (col), ``head.weight`` (out=2, col), ``head.bias`` (out)):
  ``groups_init_<name>.npy`` and ``groups_grads_<name>.npy`` (step=10, ...)
  the initial values and the gradient set by hand before each step, and
  ``groups_<case>_<name>.npy`` (step, ...) torch's parameters after each
  step for the cases in GROUP_CASES: torch.optim.AdamW / SGD with three
  param groups (the matrices W and head.weight with weight decay, the rank-1
  b and head.bias without, embed.weight without decay and with its own lr,
  betas or momentum), and a ``LambdaLR`` with the warmup-cosine factor
  (GROUP_SCHEDULE) scaling every group's lr.

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


GROUP_STEPS = 10
GROUP_SHAPES = {"embed.weight": (5, 4), "W": (3, 4), "b": (4,), "head.weight": (2, 4), "head.bias": (2,)}
# case -> (optimizer, defaults, [(group's parameter names, group's own options)])
GROUP_CASES = {
    "adamw": ("adamw", dict(lr=0.02, weight_decay=0.1, eps=1e-8),
              [(["W", "head.weight"], dict()),
               (["b", "head.bias"], dict(weight_decay=0.0)),
               (["embed.weight"], dict(lr=0.05, betas=(0.8, 0.99), weight_decay=0.0))]),
    "sgd": ("sgd", dict(lr=0.1, momentum=0.9, weight_decay=0.01),
            [(["W", "head.weight"], dict()),
             (["b", "head.bias"], dict(weight_decay=0.0)),
             (["embed.weight"], dict(lr=0.2, momentum=0.5, weight_decay=0.0))]),
}
# The warmup-cosine factor (base 1): warmup 3 steps, total 10, floor 0.1.
GROUP_WARMUP, GROUP_TOTAL, GROUP_MIN = 3, 10, 0.1


def group_factor(s):
    if s < GROUP_WARMUP:
        return s / GROUP_WARMUP
    if s >= GROUP_TOTAL:
        return GROUP_MIN
    progress = (s - GROUP_WARMUP) / (GROUP_TOTAL - GROUP_WARMUP)
    return GROUP_MIN + (1.0 - GROUP_MIN) * 0.5 * (1.0 + math.cos(math.pi * progress))


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

    # A frozen embedding fine-tuned under a trained head.
    gen = torch.Generator().manual_seed(20261203)
    embed = torch.nn.Embedding(6, 4)
    head = torch.nn.Linear(4, 3)
    with torch.no_grad():
        embed.weight.copy_(torch.randn(6, 4, generator=gen))
        head.weight.copy_(torch.randn(3, 4, generator=gen))
        head.bias.copy_(torch.randn(3, generator=gen))
    ids = torch.randint(0, 6, (4, 5), generator=gen)
    targets = torch.randint(0, 3, (4, 5), generator=gen)
    named = {"embed.weight": embed.weight, "head.weight": head.weight, "head.bias": head.bias}
    for n, p in named.items():
        save(out, "frozen_init_" + n, p.detach())
    save(out, "frozen_ids", ids.double())
    save(out, "frozen_targets", targets.double())
    embed.weight.requires_grad_(False)
    opt = torch.optim.AdamW(list(named.values()), lr=0.05, weight_decay=0.01, foreach=False)
    losses, after = [], {n: [] for n in named}
    for s in range(4):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(head(embed(ids[s])), targets[s])
        loss.backward()
        assert embed.weight.grad is None
        opt.step()
        losses.append(loss.item())
        for n, p in named.items():
            after[n].append(p.detach().clone())
    save(out, "frozen_loss", np.array(losses))
    for n in named:
        save(out, "frozen_" + n, torch.stack(after[n]))

    # Parameter groups, from a generator of their own (the fixtures above
    # stay as they were).
    gen = torch.Generator().manual_seed(20261202)
    init = {n: torch.randn(*shape, generator=gen) for n, shape in GROUP_SHAPES.items()}
    grads = {n: torch.randn(GROUP_STEPS, *shape, generator=gen) for n, shape in GROUP_SHAPES.items()}
    for n in GROUP_SHAPES:
        save(out, "groups_init_" + n, init[n])
        save(out, "groups_grads_" + n, grads[n])
    for case, (kind, defaults, groups) in GROUP_CASES.items():
        params = {n: torch.nn.Parameter(init[n].clone()) for n in GROUP_SHAPES}
        param_groups = [dict(params=[params[n] for n in names], **options) for names, options in groups]
        if kind == "adamw":
            opt = torch.optim.AdamW(param_groups, foreach=False, **defaults)
        else:
            opt = torch.optim.SGD(param_groups, foreach=False, **defaults)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, group_factor)
        after = {n: [] for n in GROUP_SHAPES}
        for s in range(GROUP_STEPS):
            for n, p in params.items():
                p.grad = grads[n][s].clone()
            opt.step()
            sched.step()
            for n, p in params.items():
                after[n].append(p.detach().clone())
        for n in GROUP_SHAPES:
            save(out, "groups_%s_%s" % (case, n), torch.stack(after[n]))


if __name__ == "__main__":
    main()
