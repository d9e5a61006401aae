#!/usr/bin/python3
"""PyTorch autograd fixtures for dimsum's gradients (tests/unit/grad_torch.cpp).

Every case computes an output y of some inputs with PyTorch in float64, a
loss sum(y * r) with a fixed random r of y's shape, and the gradient of the
loss with respect to each differentiable input by torch.autograd. It writes
the inputs, r and the gradients as small float64 ``.npy`` files under
``fixtures/grad/<case>_<name>.npy`` (masks as bool).

The seed-000 case runs HiddenAttention (seed 000's einops code) in float64
on the float32 input and weights of ``fixtures/seed000/`` (written by
make_fixtures.py) and saves d loss / d parameter for its eight parameters,
d loss / d x and d loss / d pattern (the softmax's output, an intermediate
kept with retain_grad).

Run with Debian's interpreter, which has torch:

    /usr/bin/python3 tests/reference/make_grad_fixtures.py [OUTPUT_DIR]

The output is deterministic. The C++ tests never need PyTorch.
"""

import os
import sys

import numpy as np
import torch

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(HERE, "fixtures", "grad")
SEED000 = os.path.join(HERE, "fixtures", "seed000")
os.makedirs(OUT, exist_ok=True)
GEN = torch.Generator().manual_seed(20261123)


def save(name, a):
    a = a.detach().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
    np.save(os.path.join(OUT, name + ".npy"), np.array(a, order="C"), allow_pickle=False)  # keeps rank 0


def rand(*shape, positive=False):
    t = torch.randn(tuple(shape), generator=GEN, dtype=torch.float64)
    return t.abs() + 0.5 if positive else t


def case(name, fn, inputs, constants=None):
    """inputs: name -> tensor (differentiable); constants: name -> tensor."""
    constants = constants or {}
    leaves = {k: v.clone().requires_grad_(True) for k, v in inputs.items()}
    y = fn(**leaves, **constants)
    r = rand(*y.shape)
    (y * r).sum().backward()
    for k, v in inputs.items():
        save(f"{name}_{k}", v)
        save(f"{name}_grad_{k}", leaves[k].grad)
    for k, v in constants.items():
        save(f"{name}_{k}", v)
    save(f"{name}_r", r)


def main():
    case("einsum_group", lambda x, w, s: torch.einsum("ahd,hdc,c->a", x.reshape(3, 2, 3), w, s),
         {"x": rand(3, 6), "w": rand(2, 3, 2)}, {"s": rand(2)})
    case("einsum_out_group", lambda x, w: torch.einsum("ac,chd->ahd", x, w).reshape(3, 6),
         {"x": rand(3, 2), "w": rand(2, 2, 3)})
    case("einsum_three", lambda x, y, z: torch.einsum("ab,bc,ce->ae", x, y, z),
         {"x": rand(2, 3), "y": rand(3, 4), "z": rand(4, 2)})
    case("broadcast", lambda x, bias, col: (x + bias) * x / col[:, None] - bias,
         {"x": rand(3, 4), "bias": rand(4), "col": rand(3, positive=True)})
    case("scalars", lambda x: 2.5 * x - 1.0 / (x * x + 1.0), {"x": rand(3, 4)})
    case("exp_sqrt", lambda x: torch.exp(x) + torch.sqrt(x * x + 1.0), {"x": rand(3, 4)})
    case("sum_b", lambda x: x.sum(1), {"x": rand(2, 3, 4)})
    case("mean_c", lambda x: x.mean(2), {"x": rand(2, 3, 4)})
    case("max_a", lambda x: x.amax(0), {"x": rand(2, 3, 4)})
    case("softmax_k", lambda x: torch.softmax(x, -1), {"x": rand(3, 4)})
    causal = torch.triu(torch.ones(3, 4, dtype=torch.bool), diagonal=1)
    case("causal_softmax", lambda s: torch.softmax(s.masked_fill(causal, float("-inf")), -1), {"s": rand(2, 3, 4)})
    full = torch.zeros(3, 4, dtype=torch.bool)
    full[1, :] = True  # every key of query 1 masked
    case("masked_softmax", lambda s, mask: torch.softmax(s.masked_fill(mask, -1e9), -1), {"s": rand(2, 3, 4)},
         {"mask": full})
    x = rand(3, 4)
    case("where", lambda x, y, cond: torch.where(cond, x, y), {"x": x, "y": rand(4)}, {"cond": x > 0})
    case("rearrange", lambda x: x.reshape(2, 2, 3).permute(1, 0, 2), {"x": rand(2, 6)})
    training_ops()
    seed000()
    fused_attention()
    fused_attention_variants()


def training_ops():
    """What a transformer's training needs beyond the seeds."""
    F = torch.nn.functional
    case("relu", lambda x: torch.relu(x), {"x": rand(3, 4)})
    case("gelu", lambda x: F.gelu(x), {"x": rand(3, 4)})
    case("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), {"x": rand(3, 4)})
    case("tanh", lambda x: torch.tanh(x), {"x": rand(3, 4)})
    case("log", lambda x: torch.log(x), {"x": rand(3, 4, positive=True)})
    case("log_softmax", lambda x: F.log_softmax(x, -1), {"x": rand(3, 5)})
    # Logits (batch 2, posn 3, vocab 5); targets (batch, posn) with repeats.
    targets = torch.tensor([[1, 4, 1], [0, 1, 3]], dtype=torch.int64)
    for red in ["mean", "sum"]:
        case(f"cross_entropy_{red}", lambda x, t, red=red: F.cross_entropy(x.permute(0, 2, 1), t, reduction=red),
             {"x": rand(2, 3, 5)}, {"t": targets})
    case("layer_norm", lambda x, w, b: F.layer_norm(x, (4,), w, b, 1e-5),
         {"x": rand(2, 3, 4), "w": rand(4), "b": rand(4)})
    ids = torch.tensor([[2, 0, 2], [2, 1, 0]], dtype=torch.int64)  # id 2 three times
    case("lookup", lambda table, ids: F.embedding(ids, table), {"table": rand(4, 3)}, {"ids": ids})
    case("select", lambda x: x[:, 1, :], {"x": rand(2, 3, 4)})
    case("slice", lambda x: x[:, 1:3, :], {"x": rand(2, 3, 4)})
    case("stack", lambda x, y: torch.stack([x, y, x]), {"x": rand(3, 4), "y": rand(3, 4)})
    case("concat", lambda x, y: torch.cat([x, y], 1), {"x": rand(3, 2), "y": rand(3, 4)})


def seed000():
    """HiddenAttention (seed 000) in float64 on the seed-000 fixture."""
    load = lambda n: torch.from_numpy(np.load(os.path.join(SEED000, n + ".npy")).astype(np.float64))
    names = ["W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O"]
    p = {n: load(n).requires_grad_(True) for n in names}
    x = load("x").requires_grad_(True)

    def ein(a, b, s):
        lhs, out = s.split("->")
        sa, sb = lhs.split(",")
        letters = {}
        conv = lambda t: "".join(letters.setdefault(w, chr(ord("a") + len(letters))) for w in t.split())
        return torch.einsum(f"{conv(sa)},{conv(sb)}->{conv(out)}", a, b)

    q = ein(x, p["W_Q"], "batch posn d_model, nheads d_model d_head -> batch posn nheads d_head") + p["b_Q"]
    k = ein(x, p["W_K"], "batch posn d_model, nheads d_model d_head -> batch posn nheads d_head") + p["b_K"]
    v = ein(x, p["W_V"], "batch posn d_model, nheads d_model d_head -> batch posn nheads d_head") + p["b_V"]
    scores = ein(q, k, "batch posn_Q nheads d_head, batch posn_K nheads d_head -> batch nheads posn_Q posn_K")
    d_head = q.shape[-1]
    mask = torch.triu(torch.ones(scores.size(-2), scores.size(-1)), diagonal=1).bool()
    masked = (scores / d_head**0.5).masked_fill(mask, float("-inf"))
    pattern = masked.softmax(-1)
    pattern.retain_grad()  # an intermediate's gradient (dimsum's v.retain_grad())
    z = ein(v, pattern, "batch posn_K nheads d_head, batch nheads posn_Q posn_K -> batch posn_Q nheads d_head")
    out = ein(z, p["W_O"], "batch posn_Q nheads d_head, nheads d_head d_model -> batch posn_Q d_model") + p["b_O"]
    r = rand(*out.shape)
    loss = (out * r).sum()
    loss.backward()
    save("seed000_r", r)
    save("seed000_loss", loss.detach().reshape(()))
    for n in names:
        save(f"seed000_grad_{n}", p[n].grad)
    save("seed000_grad_x", x.grad)
    save("seed000_grad_pattern", pattern.grad)


def fused_attention():
    """The chain the fused attention kernel runs:
    softmax(mask(scale * q k^T)) v, batch-major [b, i, d]. Odd lengths cross
    the kernel's query (32) and key (64) tiles; the masks are rebuilt by the
    same formulas in tests/unit/grad_fused_attention.cpp."""
    def attn(q, k, v, mask, scale, value):
        s = torch.einsum("bid,bjd->bij", q, k) * scale
        return torch.einsum("bij,bjc->bic", torch.softmax(s.masked_fill(mask, value), -1), v)
    b, nq, nk = 2, 37, 70
    causal = torch.triu(torch.ones(nq, nk, dtype=torch.bool), diagonal=1)
    case("fused_attn_causal", lambda q, k, v: attn(q, k, v, causal, 0.5, float("-inf")),
         {"q": rand(b, nq, 5), "k": rand(b, nk, 5), "v": rand(b, nk, 3)})
    case("fused_attn_causal_finite", lambda q, k, v: attn(q, k, v, causal, 0.5, -3.0),
         {"q": rand(b, nq, 5), "k": rand(b, nk, 5), "v": rand(b, nk, 3)})
    pad = torch.zeros(b, nq, nk, dtype=torch.bool)
    for bi in range(b):
        pad[bi, :, 60 - 7 * bi:] = True  # padding keys
    pad[1, 5, :] = True  # every key of batch 1's query 5 masked: a NaN row
    case("fused_attn_padding", lambda q, k, v: attn(q, k, v, pad, 0.7, float("-inf")),
         {"q": rand(b, nq, 5), "k": rand(b, nk, 5), "v": rand(b, nk, 3)})



def fused_attention_variants():
    """Window and ALiBi attention on the fused path:
    the chain grad::fused_attention differentiates, in the seed's layout
    q (b, i, h, d), k (b, j, h, d), v (b, j, h, c), scores (b, h, i, j).
    40 queries and 140 keys cross the kernels' query (32, 64) and key (64,
    128) tiles; the windows and offsets are rebuilt by the same formulas in
    tests/unit/grad_fused_variants.cpp."""
    b, nq, nk, h, d, c = 2, 40, 140, 2, 4, 3
    i = torch.arange(nq)[:, None]
    j = torch.arange(nk)[None, :]

    def attend(q, k, v, stages):
        s = stages(torch.einsum("bihd,bjhd->bhij", q, k))
        return torch.einsum("bhij,bjhc->bihc", torch.softmax(s, -1), v)

    def window(w, offset):  # True where masked: outside (i + offset - w, i + offset]
        return ~((j <= i + offset) & (i + offset - j < w))

    def qkv():
        return {"q": rand(b, nq, h, d), "k": rand(b, nk, h, d), "v": rand(b, nk, h, c)}

    # window 20 at offset 100: rows keep (i + 80, i + 100], across the 128-key edge
    case("fused_attn_window", lambda q, k, v: attend(q, k, v, lambda s: (s * 0.5).masked_fill(window(20, 100), float("-inf"))),
         qkv())
    # offset 125: rows 34..39 keep no key (a finite value: uniform weights)
    case("fused_attn_window_finite", lambda q, k, v: attend(q, k, v, lambda s: (s * 0.5).masked_fill(window(20, 125), -3.0)),
         qkv())
    # ALiBi at offset 100 (queries after 100 cached keys), causal at the same
    # offset, then left padding: batch 1 pads keys j < 110, so its rows 0..9
    # keep no key (NaN rows)
    # ALiBi's slopes for a power-of-two head count: 2^(-8 (h + 1) / n)
    slopes = torch.tensor([2.0 ** (-8.0 * (hh + 1) / h) for hh in range(h)], dtype=torch.float64)
    bias = slopes[:, None, None] * (j - (i + 100)).to(torch.float64)
    pad = torch.zeros(b, nk, dtype=torch.bool)
    pad[1, :110] = True
    case("fused_attn_alibi",
         lambda q, k, v: attend(q, k, v, lambda s: (s * 0.5 + bias).masked_fill(j > i + 100, float("-inf"))
                                .masked_fill(pad[:, None, None, :], float("-inf"))), qkv())
    # ALiBi after a causal mask (offset 0): the masked scores stay -inf
    bias0 = slopes[:, None, None] * (j - i).to(torch.float64)
    case("fused_attn_alibi_after_mask",
         lambda q, k, v: attend(q, k, v, lambda s: (s * 0.5).masked_fill(j > i, float("-inf")) + bias0), qkv())


if __name__ == "__main__":
    main()
