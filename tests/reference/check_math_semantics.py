#!/usr/bin/python3
"""Prints PyTorch's values for the element-wise math where its semantics
differ from the C library (sign of NaN, clamp and minimum/maximum with NaN,
round half to even, relu/gelu/silu at the infinities, rsqrt of -0).
tests/unit/math.cpp ("PyTorch's values where it differs from the C
library") holds these numbers, copied by hand from this output.

Run with Debian's python3-torch: /usr/bin/python3 tests/reference/check_math_semantics.py
"""
import torch

nan = float("nan")
inf = float("inf")
x = torch.tensor([nan, inf, -inf, 0.0, -0.0, 2.5, -2.5, 0.5, 1.5, -0.5], dtype=torch.float64)
y = torch.tensor([1.0, nan, nan, -0.0, 0.0, nan, -3, 1, 1, 1], dtype=torch.float64)
F = torch.nn.functional


def show(name, t):
    print(f"{name:18s}", [repr(v) for v in t.tolist()])


print("torch", torch.__version__)
show("x", x)
show("sign", torch.sign(x))
show("round", torch.round(x))
show("relu", torch.relu(x))
show("rsqrt", torch.rsqrt(x))
show("gelu", F.gelu(x))
show("gelu_tanh", F.gelu(x, approximate="tanh"))
show("silu", F.silu(x))
show("sigmoid", torch.sigmoid(x))
show("clamp(x, -1, 1)", torch.clamp(x, -1.0, 1.0))
show("clamp(x, nan, 1)", torch.clamp(x, nan, 1.0))
show("clamp(x, -1, nan)", torch.clamp(x, -1.0, nan))
show("clamp(x, 2, 1)", torch.clamp(x, 2.0, 1.0))
show("y", y)
show("minimum(x, y)", torch.minimum(x, y))
show("maximum(x, y)", torch.maximum(x, y))
show("pow(x, 0.5)", torch.pow(x, torch.full_like(x, 0.5)))  # tensor exponent: std::pow
show("pow(x, 0.5 scalar)", torch.pow(x, 0.5))  # torch turns a scalar 0.5 into sqrt
show("pow(x, 0)", torch.pow(x, 0.0))
show("round (float32)", torch.round(torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, 1e7 + 1, 0.49999997])))
