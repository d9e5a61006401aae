#!/usr/bin/python3
"""PyTorch reference for ten AdamW steps of examples/char_transformer_model.hpp
(tests/unit/train_adamw_steps.cpp).

A PyTorch replica of the C++ model, op for op:

    x = tok_embed[ids] + pos_embed[arange(posn)]
    per block (pre-norm, nn::pre_norm_block):
        h = LayerNorm(x; input_layernorm.weight, .bias, eps 1e-5)
        q, k, v = einsum("bpm,mhd->bphd", h, self_attn.W_Q / W_K / W_V)
        scores = einsum("bqhd,bkhd->bhqk", q, k) * (1 / sqrt(d_head))
        scores[k > q] = -inf;  pattern = softmax over k
        z = einsum("bhqk,bkhd->bqhd", pattern, v)
        x = x + einsum("bqhd,hdm->bqm", z, self_attn.W_O) + self_attn.b_O
        h = LayerNorm(x; post_attention_layernorm)
        x = x + mlp.c_proj(gelu_exact(mlp.c_fc(h)))    (nn::gelu_mlp: nn.Linear layers)
    logits = LayerNorm(x; ln_f) @ W_U + b_U         (untied head)
    loss = cross_entropy(logits, next ids), mean over batch and posn

with the C++ layouts (W_Q is d_model x nheads x d_head, W_O nheads x d_head x
d_model, mlp.c_fc.weight d_mlp x d_model as nn.Linear's, W_U d_model x
vocab). Sizes: vocab 11, context 8, d_model 16, 2 heads (d_head 8), d_mlp 32,
2 blocks, batch 3.

Every parameter is drawn from a seeded torch.Generator (matrices N(0, 0.2^2),
layer-norm weights 1 + N(0, 0.1^2), biases N(0, 0.1^2): no parameter is at a
symmetric value, so a swapped weight/bias or a transposed layout shows),
rounded to float32 and saved as float32 (init/<dotted name>.npy, read by
dimsum::load_npy_dir). The reference then runs in float64 from exactly those
values: ten steps of forward, backward and torch.optim.AdamW(lr 1e-2,
betas (0.9, 0.999), eps 1e-6, weight_decay 1e-2) on ten fixed batches
(x.npy, y.npy: int64, step x batch x posn). It saves the loss before each
step's update (losses.npy, float64) and every parameter after the tenth
step (final/<dotted name>.npy, float64), and the gradients of the first step
(grad0/<dotted name>.npy, float64), which tell a wrong gradient from a wrong
optimizer step when the test fails.

It also runs the same ten steps in float32 (PyTorch's own float32 kernels)
and prints how far that run lands from the float64 reference: the scale of
float32 rounding through ten Adam steps, which the C++ test's tolerances are
set against.

    /usr/bin/python3 tests/reference/make_train_fixtures.py [OUTPUT_DIR]

The output is deterministic. The C++ test never needs PyTorch.
"""

import math
import os
import shutil
import sys

import numpy as np
import torch

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(HERE, "fixtures", "train")

VOCAB, CONTEXT, D_MODEL, N_HEADS, D_MLP, N_LAYERS, BATCH, STEPS = 11, 8, 16, 2, 32, 2, 3, 10
D_HEAD = D_MODEL // N_HEADS
LR, BETAS, EPS, WEIGHT_DECAY = 1e-2, (0.9, 0.999), 1e-6, 1e-2


def shapes():
    """The C++ model's parameters in for_each_parameter order, dotted names,
    and whether a matrix is drawn as its transpose (the MLP's nn::linear
    weights, (out, in) as nn.Linear's, drawn as (in, out) matrices)."""
    s = [("tok_embed", (VOCAB, D_MODEL), False), ("pos_embed", (CONTEXT, D_MODEL), False)]
    for i in range(N_LAYERS):
        b = "blocks.%d." % i
        s += [
            (b + "input_layernorm.weight", (D_MODEL,), False),
            (b + "input_layernorm.bias", (D_MODEL,), False),
            (b + "self_attn.W_Q", (D_MODEL, N_HEADS, D_HEAD), False),
            (b + "self_attn.W_K", (D_MODEL, N_HEADS, D_HEAD), False),
            (b + "self_attn.W_V", (D_MODEL, N_HEADS, D_HEAD), False),
            (b + "self_attn.W_O", (N_HEADS, D_HEAD, D_MODEL), False),
            (b + "self_attn.b_O", (D_MODEL,), False),
            (b + "post_attention_layernorm.weight", (D_MODEL,), False),
            (b + "post_attention_layernorm.bias", (D_MODEL,), False),
            (b + "mlp.c_fc.weight", (D_MLP, D_MODEL), True),
            (b + "mlp.c_fc.bias", (D_MLP,), False),
            (b + "mlp.c_proj.weight", (D_MODEL, D_MLP), True),
            (b + "mlp.c_proj.bias", (D_MODEL,), False),
        ]
    s += [("ln_f.weight", (D_MODEL,), False), ("ln_f.bias", (D_MODEL,), False), ("W_U", (D_MODEL, VOCAB), False),
          ("b_U", (VOCAB,), False)]
    return s


def initial(gen):
    params = {}
    for name, shape, transposed in shapes():
        r = torch.randn(shape[::-1] if transposed else shape, generator=gen, dtype=torch.float64)
        if transposed:
            r = r.t().contiguous()
        if name.endswith(".weight") and len(shape) == 1:  # layer norms
            v = 1.0 + 0.1 * r
        elif len(shape) == 1:
            v = 0.1 * r
        else:
            v = 0.2 * r
        params[name] = v.to(torch.float32)  # the C++ model is float32: start both from these values
    return params


def layer_norm(x, p, prefix):
    return torch.nn.functional.layer_norm(x, (D_MODEL,), p[prefix + ".weight"], p[prefix + ".bias"], eps=1e-5)


def forward_loss(p, x_ids, y_ids):
    n = x_ids.shape[1]
    x = p["tok_embed"][x_ids] + p["pos_embed"][torch.arange(n)]
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    for i in range(N_LAYERS):
        b = "blocks.%d." % i
        h = layer_norm(x, p, b + "input_layernorm")
        q = torch.einsum("bpm,mhd->bphd", h, p[b + "self_attn.W_Q"])
        k = torch.einsum("bpm,mhd->bphd", h, p[b + "self_attn.W_K"])
        v = torch.einsum("bpm,mhd->bphd", h, p[b + "self_attn.W_V"])
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) * (1.0 / math.sqrt(D_HEAD))
        scores = scores.masked_fill(~causal, float("-inf"))
        pattern = scores.softmax(dim=-1)
        z = torch.einsum("bhqk,bkhd->bqhd", pattern, v)
        x = x + torch.einsum("bqhd,hdm->bqm", z, p[b + "self_attn.W_O"]) + p[b + "self_attn.b_O"]
        h = layer_norm(x, p, b + "post_attention_layernorm")
        pre = torch.nn.functional.linear(h, p[b + "mlp.c_fc.weight"], p[b + "mlp.c_fc.bias"])
        x = x + torch.nn.functional.linear(torch.nn.functional.gelu(pre), p[b + "mlp.c_proj.weight"],
                                           p[b + "mlp.c_proj.bias"])
    logits = layer_norm(x, p, "ln_f") @ p["W_U"] + p["b_U"]
    return torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), y_ids.reshape(-1))


def train(init, xs, ys, dtype):
    p = {k: v.to(dtype).clone().requires_grad_(True) for k, v in init.items()}
    opt = torch.optim.AdamW(list(p.values()), lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY)
    losses, grads0 = [], None
    for s in range(STEPS):
        opt.zero_grad()
        loss = forward_loss(p, xs[s], ys[s])
        loss.backward()
        if s == 0:
            grads0 = {k: v.grad.detach().clone() for k, v in p.items()}
        opt.step()
        losses.append(loss.item())
    return np.array(losses), {k: v.detach() for k, v in p.items()}, grads0


def main():
    gen = torch.Generator().manual_seed(20261123)
    init = initial(gen)
    seqs = torch.randint(0, VOCAB, (STEPS, BATCH, CONTEXT + 1), generator=gen, dtype=torch.int64)
    xs, ys = seqs[:, :, :-1].contiguous(), seqs[:, :, 1:].contiguous()

    losses, final, grads0 = train(init, xs, ys, torch.float64)
    losses32, final32, grads0_32 = train(init, xs, ys, torch.float32)

    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    os.makedirs(os.path.join(OUT, "init"))
    os.makedirs(os.path.join(OUT, "final"))
    os.makedirs(os.path.join(OUT, "grad0"))
    for name, v in init.items():
        np.save(os.path.join(OUT, "init", name + ".npy"), v.numpy(), allow_pickle=False)
    for name, v in final.items():
        np.save(os.path.join(OUT, "final", name + ".npy"), v.numpy(), allow_pickle=False)
    for name, v in grads0.items():
        np.save(os.path.join(OUT, "grad0", name + ".npy"), v.numpy(), allow_pickle=False)
    np.save(os.path.join(OUT, "x.npy"), xs.numpy(), allow_pickle=False)
    np.save(os.path.join(OUT, "y.npy"), ys.numpy(), allow_pickle=False)
    np.save(os.path.join(OUT, "losses.npy"), losses, allow_pickle=False)

    moved = max((final[k] - init[k].double()).abs().max().item() for k in init)
    print("losses (float64):", " ".join("%.6f" % l for l in losses))
    print("largest parameter change over the ten steps: %.3g" % moved)
    print("torch float32 vs float64: loss %.3g, parameters %.3g (lr %g)"
          % (np.abs(losses32 - losses).max(),
             max((final32[k].double() - final[k]).abs().max().item() for k in init), LR))
    print("torch float32 vs float64 step-0 gradients, relative to each tensor's largest: %.3g"
          % max(((grads0_32[k].double() - grads0[k]).abs().max() / grads0[k].abs().max()).item() for k in init))


if __name__ == "__main__":
    main()
