"""bench/compare's handling of the machine: the OpenBLAS core type every
BLAS-based peer runs on, the spinning processes of --busy, and the CPU's
vector width. Facts only; the peers themselves are the other files here."""
import contextlib
import os
import subprocess
import sys

import numpy as np


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def vector_width():
    flags = cpu_flags()
    if "avx512f" in flags:
        return "AVX-512, 512-bit vectors"
    if "avx2" in flags:
        return "AVX2, 256-bit vectors"
    return "no AVX2"


def openblas_candidates():
    """Core types worth trying on this CPU: the one OpenBLAS detects (None:
    OPENBLAS_CORETYPE unset), SkylakeX where the CPU has AVX-512, Haswell
    where it has AVX2."""
    flags = cpu_flags()
    return [None] + (["SkylakeX"] if "avx512f" in flags else []) + (["Haswell"] if "avx2" in flags else [])


def best_openblas_coretype(run_gemm, ref, tmp, reps=5):
    """The fastest core type whose 1024 GEMM matches the float64 reference.
    run_gemm(env, out, reps) runs bench/peers/openblas_gemm at n = 1024 with
    the extra environment env and returns (median ms, peak MiB, kernel)."""
    scale = float(np.abs(ref).max())
    best = None
    for core in openblas_candidates():
        env = {"OPENBLAS_CORETYPE": core} if core else {"OPENBLAS_CORETYPE": ""}
        out = os.path.join(tmp, f"coretype_{core}.f32")
        _, _, kernel = run_gemm(env, out, 1)
        got = np.fromfile(out, dtype=np.float32).reshape(ref.shape)
        err = float(np.abs(got.astype(np.float64) - ref).max())
        name = kernel.split()[-1]  # "OpenBLAS SkylakeX" -> the core type that ran
        if not err <= 1e-4 * max(scale, 1.0) + 1e-5:
            print(f"OpenBLAS core type {name}: max error {err:.3g}, not used", file=sys.stderr)
            continue
        ms, _, _ = run_gemm(env, None, reps)
        print(f"OpenBLAS core type {name}: correct, {ms:.2f} ms at 1024 on 1 thread", file=sys.stderr)
        if best is None or ms < best[1]:
            best = (name, ms)
    if best is None:
        raise SystemExit("no OpenBLAS core type gave a correct GEMM")
    return best[0]


@contextlib.contextmanager
def busy_cores(n):
    """Keeps n cores busy with spinning processes while the block runs."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in spinners:
            p.kill()
            p.wait()
