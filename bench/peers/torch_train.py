"""One training step of seed 000's causal attention layer in PyTorch 1.13
autograd (forward, backward, AdamW with PyTorch's defaults), two ways: the
forward as the seed writes it (torch.einsum, masked_fill, softmax) and the
best forward path of torch_attention.py (fused QKV addmm, baddbmm with an
additive mask, softmax, bmm, addmm) -- bench/compare's "train" kind.
Mode "lm": one training step of the example's character transformer
(examples/char_transformer_model.hpp) in PyTorch, parameters, ids and
targets as bench/peers/dimsum_train_lm.cpp makes them -- the "train_lm" kind.

    /usr/bin/python3 torch_train.py einsum|best|best_bf16 B P M H D [reps] [--out file.f32]

best_bf16: the best path under torch.autocast("cpu", bfloat16) (float32
parameters; matmuls in bfloat16) -- bench/compare's "train_bf16" kind.
    /usr/bin/python3 torch_train.py lm BATCH POSN D_MODEL HEADS LAYERS VOCAB D_MLP [reps] [--out file.f32]

The loss is sum(out * R), R from the inputs' generator with salt 9 (as
bench/peers/dimsum_train.cpp). Prints peak_extra_mib and median_ms of one
step; with --out writes the first step's gradients as float32 in the order
of PARAMS. Threads follow OMP_NUM_THREADS.
"""
import math
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
    if impl == "best_bf16":
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return ta.forward_best(w, ta.prepare_best(w)).float()
    return ta.forward_best(w, ta.prepare_best(w)) if impl == "best" else ta.forward_einsum(w)


def gradients(sizes, impl="einsum", dtype=torch.float32):
    """The first step's gradients of PARAMS, concatenated (float64 with dtype=torch.float64: the reference)."""
    w = ta.inputs(*sizes, dtype=dtype)
    for n in PARAMS:
        w[n].requires_grad_(True)
    (forward(w, impl) * loss_target(*sizes[:3], dtype=dtype)).sum().backward()
    return np.concatenate([w[n].grad.detach().numpy().ravel() for n in PARAMS])


def lm_parameters(sizes, dtype=torch.float32):
    """The transformer's parameters in the dotted-name order of dimsum's
    nn::for_each_parameter, with the layouts of char_transformer_model.hpp
    (the MLP's nn::linear weights (out, in), as nn.Linear's); number k holds
    make(n, 20 + k, 0.1) (an nn::linear weight: the transpose of the (in, out)
    matrix filled so), layer-norm weights (rank 1, ".weight") 1 plus that."""
    b, p, m, h, layers, vocab, mlp = sizes
    d = m // h
    shapes = [("tok_embed", (vocab, m)), ("pos_embed", (p, m))]
    for i in range(layers):
        pre = f"blocks.{i}."
        shapes += [(pre + "input_layernorm.weight", (m,)), (pre + "input_layernorm.bias", (m,)),
                   (pre + "self_attn.W_Q", (m, h, d)), (pre + "self_attn.W_K", (m, h, d)),
                   (pre + "self_attn.W_V", (m, h, d)), (pre + "self_attn.W_O", (h, d, m)),
                   (pre + "self_attn.b_O", (m,)),
                   (pre + "post_attention_layernorm.weight", (m,)), (pre + "post_attention_layernorm.bias", (m,)),
                   (pre + "mlp.c_fc.weight", (mlp, m)), (pre + "mlp.c_fc.bias", (mlp,)),
                   (pre + "mlp.c_proj.weight", (m, mlp)), (pre + "mlp.c_proj.bias", (m,))]
    shapes += [("ln_f.weight", (m,)), ("ln_f.bias", (m,)), ("W_U", (m, vocab)), ("b_U", (vocab,))]
    params = {}
    for k, (name, shape) in enumerate(shapes):
        ln_weight = name.endswith(".weight") and len(shape) == 1
        linear_weight = name.endswith(".weight") and len(shape) == 2  # (out, in): the (in, out) matrix transposed
        v = ta.make(int(np.prod(shape)), 20 + k, 0.1).astype(np.float64) + (1.0 if ln_weight else 0.0)
        v = v.reshape(shape[::-1]).T.copy() if linear_weight else v.reshape(shape)
        params[name] = torch.from_numpy(v).to(dtype)
    return params


def lm_batch(sizes):
    b, p, vocab = sizes[0], sizes[1], sizes[5]
    i = torch.arange(b * p, dtype=torch.int64)
    return ((7 * i + 3) % vocab).reshape(b, p), ((5 * i + 1) % vocab).reshape(b, p)


def lm_loss(w, sizes, x, y):
    """The mean next-character cross entropy of char_transformer_model.hpp's
    forward: embeddings, pre-norm blocks of causal attention and a GELU MLP
    with residuals, final layer norm, LM head."""
    b, p, m, h, layers, vocab, mlp = sizes
    ln = lambda t, pre: torch.nn.functional.layer_norm(t, (m,), w[pre + ".weight"], w[pre + ".bias"], 1e-5)
    mask = torch.triu(torch.ones(p, p, dtype=torch.bool), 1)
    t = w["tok_embed"][x] + w["pos_embed"][torch.arange(p)]
    for i in range(layers):
        pre = f"blocks.{i}."
        a = ln(t, pre + "input_layernorm")
        q, k, v = (torch.einsum("bpm,mhd->bphd", a, w[pre + "self_attn." + n]) for n in ("W_Q", "W_K", "W_V"))
        s = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(m // h)
        pat = torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1)
        z = torch.einsum("bhqk,bkhd->bqhd", pat, v)
        t = t + torch.einsum("bqhd,hdm->bqm", z, w[pre + "self_attn.W_O"]) + w[pre + "self_attn.b_O"]
        a = ln(t, pre + "post_attention_layernorm")
        hid = torch.nn.functional.gelu(torch.nn.functional.linear(a, w[pre + "mlp.c_fc.weight"], w[pre + "mlp.c_fc.bias"]))
        t = t + torch.nn.functional.linear(hid, w[pre + "mlp.c_proj.weight"], w[pre + "mlp.c_proj.bias"])
    logits = ln(t, "ln_f") @ w["W_U"] + w["b_U"]
    return torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1))


def lm_gradients(sizes, dtype=torch.float32):
    """The first step's gradients of the transformer's parameters, concatenated in order."""
    w = lm_parameters(sizes, dtype)
    for t in w.values():
        t.requires_grad_(True)
    x, y = lm_batch(sizes)
    lm_loss(w, sizes, x, y).backward()
    return np.concatenate([t.grad.detach().numpy().ravel() for t in w.values()])


def main():
    impl = sys.argv[1]
    n_sizes = 7 if impl == "lm" else 5
    sizes = [int(a) for a in sys.argv[2:2 + n_sizes]]
    rest = sys.argv[2 + n_sizes:]
    reps = int(rest[0]) if rest and not rest[0].startswith("-") else 5
    out = rest[rest.index("--out") + 1] if "--out" in rest else None
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    if out:
        (lm_gradients(sizes) if impl == "lm" else gradients(sizes, impl)).astype(np.float32).tofile(out)
    if impl == "lm":
        w = lm_parameters(sizes)
        params = [t.requires_grad_(True) for t in w.values()]
        x, y = lm_batch(sizes)
        loss = lambda: lm_loss(w, sizes, x, y)
    else:
        w = ta.inputs(*sizes)
        params = [w[n].requires_grad_(True) for n in PARAMS]
        r = loss_target(*sizes[:3])
        loss = lambda: (forward(w, impl) * r).sum()
    opt = torch.optim.AdamW(params)

    def step():
        opt.zero_grad(set_to_none=False)
        loss().backward()
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
