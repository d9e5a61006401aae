"""Seed 000's causal attention forward in PyTorch 1.13, two ways: as the seed
writes it (torch.einsum, masked_fill, softmax) and the best path found
(fused QKV addmm, baddbmm with an additive mask, softmax, bmm, addmm); and
the square GEMM C = A @ B of bench/compare as one torch.mm.

    /usr/bin/python3 torch_attention.py einsum|best B P M H D [reps] [--out file.f32]
    /usr/bin/python3 torch_attention.py gemm N [reps] [--out file.f32]
    /usr/bin/python3 torch_attention.py gemm_bf16|gemm_bf16_f32 N [reps] [--out file.f32]

gemm_bf16: the GEMM's inputs rounded to bfloat16 and multiplied in bfloat16
(torch.mm: a bf16 C); gemm_bf16_f32: the same rounded values in float32.

Prints peak_extra_mib=<x> and median_ms=<x>. Inputs follow
bench/peers/inputs.hpp exactly. Threads follow OMP_NUM_THREADS
(torch.set_num_threads).
"""
import math
import os
import sys
import time

import numpy as np
import torch


def make(n, salt, scale):
    i = np.arange(n, dtype=np.float64)
    return (scale * np.sin(0.7 * (i % 100003) + 1.3 * salt + 0.1 * (i % 7))).astype(np.float32)


def inputs(b, p, m, h, d, dtype=torch.float32):
    t = lambda a, *shape: torch.from_numpy(a.reshape(shape)).to(dtype)
    return dict(
        x=t(make(b * p * m, 0, 1.0), b, p, m),
        W_Q=t(make(h * m * d, 1, 1 / math.sqrt(m)), h, m, d),
        W_K=t(make(h * m * d, 2, 1 / math.sqrt(m)), h, m, d),
        W_V=t(make(h * m * d, 3, 1 / math.sqrt(m)), h, m, d),
        W_O=t(make(h * d * m, 4, 1 / math.sqrt(h * d)), h, d, m),
        b_Q=t(make(h * d, 5, 0.1), h, d),
        b_K=t(make(h * d, 6, 0.1), h, d),
        b_V=t(make(h * d, 7, 0.1), h, d),
        b_O=t(make(m, 8, 0.1), m),
    )


def forward_einsum(w):
    x = w["x"]
    q = torch.einsum("bpm,hmd->bphd", x, w["W_Q"]) + w["b_Q"]
    k = torch.einsum("bpm,hmd->bphd", x, w["W_K"]) + w["b_K"]
    v = torch.einsum("bpm,hmd->bphd", x, w["W_V"]) + w["b_V"]
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1])
    mask = torch.triu(torch.ones(scores.shape[-2], scores.shape[-1]), diagonal=1).bool()
    scores = scores.masked_fill(mask, float("-inf"))
    pattern = scores.softmax(-1)
    z = torch.einsum("bkhd,bhqk->bqhd", v, pattern)
    return torch.einsum("bqhd,hdm->bqm", z, w["W_O"]) + w["b_O"]


def prepare_best(w):
    h, m, d = w["W_Q"].shape
    W_qkv = torch.cat([w[n].permute(1, 0, 2).reshape(m, h * d) for n in ("W_Q", "W_K", "W_V")], dim=1).contiguous()
    b_qkv = torch.cat([w[n].reshape(h * d) for n in ("b_Q", "b_K", "b_V")])
    p = w["x"].shape[1]
    mask = torch.triu(torch.full((p, p), float("-inf")), diagonal=1).unsqueeze(0)
    return dict(W_qkv=W_qkv, b_qkv=b_qkv, W_O2=w["W_O"].reshape(h * d, m).contiguous(), mask=mask, h=h, d=d)


def forward_best(w, pre):
    x = w["x"]
    b, p, m = x.shape
    h, d = pre["h"], pre["d"]
    qkv = torch.addmm(pre["b_qkv"], x.reshape(b * p, m), pre["W_qkv"]).view(b, p, 3, h, d)
    q, k, v = (qkv[:, :, i].permute(0, 2, 1, 3).reshape(b * h, p, d) for i in range(3))
    scores = torch.baddbmm(pre["mask"], q, k.transpose(1, 2), alpha=1 / math.sqrt(d))
    z = torch.bmm(scores.softmax(-1), v).view(b, h, p, d).permute(0, 2, 1, 3).reshape(b * p, h * d)
    return torch.addmm(w["b_O"], z, pre["W_O2"]).view(b, p, m)


def status_mib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    return -1.0


def peak_extra_mib(run):
    """Max RSS of one call minus the RSS before it (high-water mark reset
    through /proc/self/clear_refs), as bench/peers/inputs.hpp measures."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    before = status_mib("VmRSS")
    run()
    return status_mib("VmHWM") - before


def gemm_inputs(n):
    """A (n, n) and B (n, n), float32, as bench::gemm_inputs makes them."""
    return make(n * n, 0, 1.0).reshape(n, n), make(n * n, 1, 1 / math.sqrt(n)).reshape(n, n)


def kernel():
    """What this process runs on: the BLAS that torch loaded (Debian's torch
    calls libblas.so.3, OpenBLAS here, whose core type follows
    OPENBLAS_CORETYPE) and ATen's vector code."""
    import ctypes
    import re

    maps = open("/proc/self/maps").read()
    blas = "BLAS unknown"
    if "libopenblas" in maps:
        lib = ctypes.CDLL("libopenblas.so.0")  # the instance torch loaded
        lib.openblas_get_corename.restype = ctypes.c_char_p
        blas = "OpenBLAS " + lib.openblas_get_corename().decode()
    cap = re.search(r"CPU capability usage: (\S+)", torch.__config__.show())
    return f"{blas}, ATen {cap.group(1) if cap else '?'}"


BATCH_MS = 20.0  # how long one timed run (a batch of calls) lasts at least


def timed(run, reps):
    """Prints the peak extra memory of one call of run() and the median ms
    per call over reps runs (a run being a batch of calls lasting about
    BATCH_MS, as in inputs.hpp); returns the last output."""
    times = []
    with torch.no_grad():
        print(f"peak_extra_mib={peak_extra_mib(run):.1f}")
        t0 = time.perf_counter()
        y = run()
        calls = max(1, int(BATCH_MS / max((time.perf_counter() - t0) * 1e3, 1e-3)))
        for _ in range(reps):
            t0 = time.perf_counter()
            for _ in range(calls):
                y = run()
            times.append((time.perf_counter() - t0) * 1e3 / calls)
    print(f"median_ms={sorted(times)[len(times) // 2]:.4f}")
    return y


def main():
    impl = sys.argv[1]
    nsizes = 1 if impl.startswith("gemm") else 5
    sizes = [int(a) for a in sys.argv[2:2 + nsizes]]
    rest = sys.argv[2 + nsizes:]
    reps = int(rest[0]) if rest and not rest[0].startswith("-") else 5
    out = rest[rest.index("--out") + 1] if "--out" in rest else None
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    if impl == "gemm":
        a, b = (torch.from_numpy(x) for x in gemm_inputs(*sizes))
        run = lambda: torch.mm(a, b)
    elif impl in ("gemm_bf16", "gemm_bf16_f32"):  # bf16 operands; bf16 C, or float32 on the same values
        a, b = (torch.from_numpy(x).to(torch.bfloat16) for x in gemm_inputs(*sizes))
        if impl == "gemm_bf16_f32":
            a, b = a.float(), b.float()
        run = lambda: torch.mm(a, b)
    else:
        w = inputs(*sizes)
        pre = prepare_best(w) if impl == "best" else None
        run = (lambda: forward_best(w, pre)) if impl == "best" else (lambda: forward_einsum(w))
    print(f"kernel={kernel()}")
    y = timed(run, reps)
    if out:
        y.float().numpy().astype(np.float32).tofile(out)


if __name__ == "__main__":
    main()
