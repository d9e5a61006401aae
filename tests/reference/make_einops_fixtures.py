#!/usr/bin/python3
"""Fixtures for dimsum's einops-style patterns (tests/unit/reduce.cpp,
repeat.cpp, regroup.cpp, pack.cpp, ellipsis.cpp).

einops itself is not installable here, so its documented semantics are
written out plainly with numpy (values) and torch (gradients), one case at a
time: a split group ``(h h2)`` is a reshape with h major; a merged group is a
reshape after a transpose; ``1`` and ``()`` are axes of length 1; ``...``
stands for the axes the pattern does not name; reduce is numpy's reduction
over the axes the output lacks (einops' "max" is amax: the gradient is shared
among ties); repeat broadcasts a new axis, and a new axis inside a group
tiles ``(r h)`` (np.tile) or repeats each element ``(h r)`` (np.repeat);
pack concatenates each tensor's ``*`` axes, flattened row-major, along one
axis. Nothing here calls dimsum.

Values are float64 (bool for any/all). For the gradient cases, ``r`` is a
fixed random tensor of the output's shape and ``grad`` is
d sum(out * r) / d x from torch autograd in float64. Run with Debian's
interpreter, which has torch and numpy:

    /usr/bin/python3 tests/reference/make_einops_fixtures.py [OUTPUT_DIR]
"""

import os
import sys

import numpy as np
import torch

torch.set_num_threads(1)
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(HERE, "fixtures", "einops")
os.makedirs(OUT, exist_ok=True)
RNG = np.random.default_rng(20261217)


def save(name, a):
    a = a.detach().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
    np.save(os.path.join(OUT, name + ".npy"), np.ascontiguousarray(a), allow_pickle=False)


def normal(*shape):
    return RNG.standard_normal(shape)


def case(name, x, out):
    save(name + "_x", x)
    save(name + "_out", out)


def grad_case(name, x, f):
    """Saves x, out = f(x), a random r like out and d sum(out * r) / dx."""
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    out = f(xt)
    r = torch.tensor(normal(*out.shape), dtype=torch.float64)
    (out * r).sum().backward()
    save(name + "_x", x)
    save(name + "_out", out)
    save(name + "_r", r)
    save(name + "_grad", xt.grad)


# --- reduce ---------------------------------------------------------------
# reduce(x, "b (h h2) (w w2) c -> b h w c", "max", h2=2, w2=3): 2x3 max pooling.
x = normal(2, 4, 6, 3)
case("maxpool", x, x.reshape(2, 2, 2, 2, 3, 3).max(axis=(2, 4)))
# reduce(x, "b c h w -> b c 1 1", "mean"): keep the reduced axes.
x = normal(2, 3, 4, 5)
case("mean_keepdims", x, x.mean(axis=(2, 3), keepdims=True))
# reduce(x, "... w -> w", "sum"): `...` on the left only is reduced.
x = normal(2, 3, 4)
case("sum_ellipsis_left", x, x.sum(axis=(0, 1)))
# reduce(x, "b (n n2) -> n b", "prod", n2=2).
x = normal(2, 6)
case("prod_group", x, x.reshape(2, 3, 2).prod(axis=2).T)
# reduce(x, "b n d -> b d", "logsumexp") and "min".
x = normal(3, 4, 2)
m = x.max(axis=1, keepdims=True)
case("logsumexp", x, (m + np.log(np.exp(x - m).sum(axis=1, keepdims=True)))[:, 0, :])
case("min", x, x.min(axis=1))
# reduce(x > 0, "b n -> b", "any") and "all".
x = normal(4, 3) > 0.4
x[0, :] = False
x[1, :] = True
case("any", x, x.any(axis=1))
case("all", x, x.all(axis=1))
# a fold: max |v| over n (identity 0): reduce(x, "b n d -> d b", fold).
x = normal(2, 5, 3)
case("fold_absmax", x, np.abs(x).max(axis=1).T)

# --- repeat ---------------------------------------------------------------
x = normal(4, 3)
case("repeat_new_axis", x, np.broadcast_to(x[None], (2, 4, 3)))  # "n d -> b n d", b=2
case("repeat_trailing", x, np.broadcast_to(x[:, :, None], (4, 3, 5)))  # "h w -> h w c", c=5
case("repeat_tile", x, np.tile(x, (3, 1)))  # "h w -> hh(r h) w", r=3
case("repeat_interleave", x, np.repeat(x, 2, axis=0))  # "h w -> hh(h r) w", r=2
case("repeat_tile_w", x, np.tile(x, (1, 2)))  # "h w -> h ww(r w)", r=2
x = normal(1, 3, 2)
case("repeat_unit", x, np.broadcast_to(x, (4, 3, 2)))  # "() n d -> b n d", b=4
x = normal(2, 3)
# "h w -> 1 h ww(w r) 1", r=2: size-1 axes around a repeat.
case("repeat_size1", x, np.repeat(x, 2, axis=1)[None, :, :, None])

# --- rearrange: size-1 axes and lists --------------------------------------
x = normal(2, 1, 3, 4)
case("squeeze", x, x[:, 0])  # "b 1 h w -> b h w"
x = normal(2, 3, 4)
case("unsqueeze", x, x[:, None, :, None, :])  # "b h w -> b 1 h () w"
parts = [normal(3, 4) for _ in range(5)]
for i, p in enumerate(parts):
    save("list_part%d" % i, p)
# rearrange(parts, "n h w -> h (n w)")
save("list_out", np.stack(parts).transpose(1, 0, 2).reshape(3, 5 * 4))

# --- pack / unpack: mixed ranks -------------------------------------------
img, txt, cls = normal(2, 2, 3, 4), normal(2, 5, 4), normal(2, 4)
save("pack_img", img)
save("pack_txt", txt)
save("pack_cls", cls)
# pack([img, txt, cls], "b * c")
save("pack_out", np.concatenate([img.reshape(2, 6, 4), txt, cls.reshape(2, 1, 4)], axis=1))

# --- gradients on vars ----------------------------------------------------
grad_case("grad_maxpool", normal(2, 4, 6), lambda t: t.reshape(2, 2, 2, 2, 3).amax(dim=(2, 4)))
grad_case("grad_mean_keepdims", normal(2, 3, 4), lambda t: t.mean(dim=(1, 2), keepdim=True))
# prod with one zero in a slice and two zeros in another (PyTorch's rule).
x = normal(3, 4)
x[1, 2] = 0.0
x[2, 0] = 0.0
x[2, 3] = 0.0
grad_case("grad_prod", x, lambda t: t.prod(dim=1))  # "b n -> b"
# "... n -> ..." with logsumexp over n: the ellipsis on both sides.
grad_case("grad_logsumexp", normal(2, 3, 4), lambda t: torch.logsumexp(t, dim=2))
grad_case("grad_min_ellipsis", normal(3, 2, 4), lambda t: t.amin(dim=(0, 1)))  # "... d -> d"
grad_case("grad_repeat_tile", normal(3, 2), lambda t: t.repeat(2, 1))  # "h w -> hh(r h) w"
grad_case("grad_repeat_interleave", normal(3, 2), lambda t: t.repeat_interleave(3, dim=1))  # "h w -> h ww(w r)"
# "... d -> ... b d": a new axis after the ellipsis.
grad_case("grad_repeat_ellipsis", normal(2, 3, 4), lambda t: t[:, :, None, :].expand(2, 3, 5, 4))
# rearrange "... 1 w -> w ... 1" on a var: squeeze, move, unsqueeze.
grad_case("grad_rearrange_units", normal(2, 3, 1, 4), lambda t: t[:, :, 0, :].permute(2, 0, 1)[..., None])
# einsum "... d, d f -> ... f" with w fixed: the var is x.
w = normal(4, 3)
save("grad_einsum_w", w)
grad_case("grad_einsum_ellipsis", normal(2, 5, 4), lambda t: t @ torch.tensor(w))
