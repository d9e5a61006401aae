"""One training step of seed 000's causal attention layer in PyTorch 1.13
autograd (forward, backward, AdamW with PyTorch's defaults), two ways: the
forward as the seed writes it (torch.einsum, masked_fill, softmax) and the
best forward path of torch_attention.py (fused QKV addmm, baddbmm with an
additive mask, softmax, bmm, addmm) -- bench/compare's "train" kind.

    /usr/bin/python3 torch_train.py einsum|best B P M H D [reps] [--out file.f32]

The loss is sum(out * R), R from the inputs' generator with salt 9 (as
bench/peers/dimsum_train.cpp). Prints peak_extra_mib and median_ms of one
step; with --out writes the first step's gradients as float32 in the order
of PARAMS. Threads follow OMP_NUM_THREADS.
"""
import os
import sys
import time

import numpy as np
import torch

import torch_attention as ta

PARAMS = ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O")


def loss_target(b, p, m, dtype=torch.float32):
    return torch.from_numpy(ta.make(b * p * m, 9, 1.0).reshape(b, p, m)).to(dtype)


def forward(w, impl):
    return ta.forward_best(w, ta.prepare_best(w)) if impl == "best" else ta.forward_einsum(w)


def gradients(sizes, impl="einsum", dtype=torch.float32):
    """The first step's gradients of PARAMS, concatenated (float64 with dtype=torch.float64: the reference)."""
    w = ta.inputs(*sizes, dtype=dtype)
    for n in PARAMS:
        w[n].requires_grad_(True)
    (forward(w, impl) * loss_target(*sizes[:3], dtype=dtype)).sum().backward()
    return np.concatenate([w[n].grad.detach().numpy().ravel() for n in PARAMS])


def main():
    impl = sys.argv[1]
    sizes = [int(a) for a in sys.argv[2:7]]
    rest = sys.argv[7:]
    reps = int(rest[0]) if rest and not rest[0].startswith("-") else 5
    out = rest[rest.index("--out") + 1] if "--out" in rest else None
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    if out:
        gradients(sizes, impl).astype(np.float32).tofile(out)
    w = ta.inputs(*sizes)
    params = [w[n].requires_grad_(True) for n in PARAMS]
    r = loss_target(*sizes[:3])
    opt = torch.optim.AdamW(params)

    def step():
        opt.zero_grad(set_to_none=False)
        (forward(w, impl) * r).sum().backward()
        opt.step()

    step()  # AdamW's state allocated, as dimsum's first step does
    print(f"peak_extra_mib={ta.peak_extra_mib(step):.1f}")
    print(f"kernel={ta.kernel()}")
    t0 = time.perf_counter()
    step()
    calls = max(1, int(ta.BATCH_MS / max((time.perf_counter() - t0) * 1e3, 1e-3)))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            step()
        times.append((time.perf_counter() - t0) * 1e3 / calls)
    print(f"median_ms={sorted(times)[len(times) // 2]:.4f}")


if __name__ == "__main__":
    main()
