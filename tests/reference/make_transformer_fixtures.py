#!/usr/bin/python3
"""PyTorch float64 fixtures for dimsum's attention and transformer building
blocks (tests/unit/nn_transformer.cpp).

Every reference is written with plain PyTorch ops (torch 1.13 has no
F.scaled_dot_product_attention), in float64, with inputs drawn from seeded
generators, and the loss of each case is ``sum(out * r)`` for a fixed random
``r``. Files are written under ``fixtures/transformer/<case>/`` in the dim
order the C++ test names (given below for each case).

scaled_dot_product_attention cases, q (batch, q_posn, heads, d_head), k
(batch, k_posn, kv, d_head), v (batch, k_posn, kv, d_value), out (batch,
q_posn, heads, d_value):

- ``sdpa_plain``: 3 queries over 5 keys, 2 heads, no mask, default scale.
- ``sdpa_causal_bool``: 5 over 5, causal, a (batch, k_posn) bool padding mask
  (batch 1 hides its last key), scale 0.3.
- ``sdpa_additive_window``: 4 queries after a cache of 3 (7 keys), sliding
  window 3 with offset 3, an additive (q_posn, k_posn) float mask.
- ``sdpa_gqa``: 4 query heads over 2 key/value heads (repeat_interleave),
  causal, a (heads, q_posn, k_posn) bool mask that keeps the diagonal.

Files: ``q``, ``k``, ``v``, ``mask`` (when there is one), ``r``, ``out``,
``grad_q``, ``grad_k``, ``grad_v``.

Module cases, x (batch 2, posn 3, d_model 4), every parameter drawn from a
seeded normal distribution, files ``params/<state-dict key>``,
``grads/<state-dict key>``, ``x``, ``r``, ``y``, ``grad_x``:

- ``rms_norm``: ``x * rsqrt(mean(x^2, -1) + 1e-6) * weight``.
- ``swiglu``: ``down_proj(silu(gate_proj(x)) * up_proj(x))``, bias-free
  Linears 4 -> 6 -> 4.
- ``gelu_mlp``: ``c_proj(gelu(c_fc(x)))``, Linears with bias 4 -> 6 -> 4,
  the exact (erf) GELU.

- ``rotary_attention`` and ``rotary_attention_window``: Llama's attention,
  x (batch 2, posn 5, d_model 8), bias-free q_proj 8 -> 4 heads x 4,
  k_proj and v_proj 8 -> 2 heads x 4, o_proj 16 -> 8; rotary embeddings with
  ``rotate_half`` (base 10000) on q and k, k and v heads repeated
  (repeat_interleave) to 4, causal softmax(q k^T / 2) v; the second with a
  sliding window of 3 (key j visible from query i when i - 3 < j <= i).

- ``transformer_block``: Llama's pre-norm decoder layer on x (2, 5, 8):
  ``h = x + self_attn(input_layernorm(x))``, ``y = h +
  mlp(post_attention_layernorm(h))`` with the RMSNorm, rotary attention (4
  heads, 2 key/value heads of 4) and SwiGLU (hidden 12) above.

- ``transformer_tied`` and ``transformer_untied``: a decoder-only model as
  Llama writes it, vocab 11, d_model 8, 2 of the blocks above (4 heads, 2
  key/value heads of 4, hidden 12): ``embed_tokens`` (nn.Embedding),
  ``layers.<i>``, ``norm`` (RMSNorm) and a bias-free ``lm_head`` whose
  weight is the embedding's (tied: one parameter, ``embed_tokens.weight``,
  in ``named_parameters`` and the files) or its own (untied). Parameters
  drawn N(0, 0.5^2), the norms' weights 1 + N(0, 0.1^2); ids and targets
  (batch 2, posn 5) int64. Files: ``params/<name>`` and ``grads/<name>`` for
  each of ``named_parameters()`` (the gradients of the mean cross entropy of
  the logits against the targets), ``ids``, ``targets``, ``logits`` (batch,
  posn, vocab), ``loss`` (0-d); and five steps of ``torch.optim.AdamW`` (lr
  1e-2, weight decay 0.1 on the rank-2 parameters and none on the norms' in
  a second group) from ``params`` on batches ``steps_ids`` / ``steps_targets``
  (step, batch, posn): ``steps_losses`` (the loss before each update) and
  ``final/<name>`` (every parameter after the fifth).

Run with Debian's interpreter, which has torch:

    /usr/bin/python3 tests/reference/make_transformer_fixtures.py [OUTPUT_DIR]

The output is deterministic. The C++ tests never need PyTorch.
"""

import math
import os
import sys

import numpy as np
import torch

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(HERE, "fixtures", "transformer")


def save(path, a):
    a = a.detach().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
    full = os.path.join(OUT, path + ".npy")
    os.makedirs(os.path.dirname(full), exist_ok=True)
    np.save(full, np.array(a, order="C"), allow_pickle=False)


def randn(gen, *shape):
    return torch.randn(shape, generator=gen, dtype=torch.float64)


def attention(q, k, v, mask=None, causal_offset=None, window=None, scale=None):
    """Scaled dot-product attention of q (..., L, E), k (..., S, E), v (...,
    S, Ev) in plain ops: scores q @ k^T * scale, -inf where the causal or
    window rule hides a key (key j visible from query i when j <= i + offset
    and, with a window w, i + offset - j < w), then a bool mask (-inf where
    false) or an additive mask, softmax over keys, @ v."""
    L, S, E = q.shape[-2], k.shape[-2], q.shape[-1]
    s = q @ k.transpose(-2, -1) * (1.0 / math.sqrt(E) if scale is None else scale)
    if causal_offset is not None:
        i = torch.arange(L).unsqueeze(1) + causal_offset
        j = torch.arange(S).unsqueeze(0)
        keep = j <= i
        if window is not None:
            keep = keep & (i - j < window)
        s = s.masked_fill(~keep, float("-inf"))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
    return torch.softmax(s, -1) @ v


def sdpa_case(name, seed, B, L, S, H, HKV, E, EV, mask_kind=None, causal_offset=None, window=None, scale=None):
    gen = torch.Generator().manual_seed(seed)
    # the test's layouts: (batch, posn, heads, d)
    q = randn(gen, B, L, H, E).requires_grad_(True)
    k = randn(gen, B, S, HKV, E).requires_grad_(True)
    v = randn(gen, B, S, HKV, EV).requires_grad_(True)
    qt, kt, vt = q.permute(0, 2, 1, 3), k.permute(0, 2, 1, 3), v.permute(0, 2, 1, 3)
    if H != HKV:
        kt = kt.repeat_interleave(H // HKV, dim=1)
        vt = vt.repeat_interleave(H // HKV, dim=1)
    mask, torch_mask = None, None
    if mask_kind == "padding":  # (batch, k_posn): batch 1 hides its last key
        mask = torch.ones(B, S, dtype=torch.bool)
        mask[1, S - 1] = False
        torch_mask = mask[:, None, None, :]
    elif mask_kind == "additive":  # (q_posn, k_posn)
        mask = randn(gen, L, S)
        torch_mask = mask
    elif mask_kind == "heads":  # (heads, q_posn, k_posn), the diagonal kept
        mask = torch.rand((H, L, S), generator=gen) < 0.6
        mask |= torch.eye(L, S, dtype=torch.bool)
        torch_mask = mask[None]
    out = attention(qt, kt, vt, torch_mask, causal_offset, window, scale).permute(0, 2, 1, 3)
    r = randn(gen, *out.shape)
    (out * r).sum().backward()
    files = {"q": q, "k": k, "v": v, "r": r, "out": out, "grad_q": q.grad, "grad_k": k.grad, "grad_v": v.grad}
    if mask is not None:
        files["mask"] = mask
    for f, a in files.items():
        save(f"{name}/{f}", a)


class RMSNorm(torch.nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(d, dtype=torch.float64))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class SwiGLU(torch.nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.gate_proj = torch.nn.Linear(d, hidden, bias=False)
        self.up_proj = torch.nn.Linear(d, hidden, bias=False)
        self.down_proj = torch.nn.Linear(hidden, d, bias=False)

    def forward(self, x):
        return self.down_proj(torch.nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class GeluMLP(torch.nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.c_fc = torch.nn.Linear(d, hidden)
        self.c_proj = torch.nn.Linear(hidden, d)

    def forward(self, x):
        return self.c_proj(torch.nn.functional.gelu(self.c_fc(x)))


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class RotaryAttention(torch.nn.Module):
    def __init__(self, d, heads, kv_heads, head_dim, window=None):
        super().__init__()
        self.q_proj = torch.nn.Linear(d, heads * head_dim, bias=False)
        self.k_proj = torch.nn.Linear(d, kv_heads * head_dim, bias=False)
        self.v_proj = torch.nn.Linear(d, kv_heads * head_dim, bias=False)
        self.o_proj = torch.nn.Linear(heads * head_dim, d, bias=False)
        self.heads, self.kv_heads, self.head_dim, self.window = heads, kv_heads, head_dim, window

    def forward(self, x):
        B, L, _ = x.shape
        q = self.q_proj(x).view(B, L, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, L, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, L, self.kv_heads, self.head_dim).transpose(1, 2)
        inv_freq = 1.0 / (10000.0 ** (torch.arange(0, self.head_dim, 2, dtype=torch.float64) / self.head_dim))
        freqs = torch.outer(torch.arange(L, dtype=torch.float64), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        g = self.heads // self.kv_heads
        k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
        out = attention(q, k, v, causal_offset=0, window=self.window)
        return self.o_proj(out.transpose(1, 2).reshape(B, L, self.heads * self.head_dim))


class Block(torch.nn.Module):
    def __init__(self, d, heads, kv_heads, head_dim, hidden):
        super().__init__()
        self.input_layernorm = RMSNorm(d)
        self.self_attn = RotaryAttention(d, heads, kv_heads, head_dim)
        self.post_attention_layernorm = RMSNorm(d)
        self.mlp = SwiGLU(d, hidden)

    def forward(self, x):
        h = x + self.self_attn(self.input_layernorm(x))
        return h + self.mlp(self.post_attention_layernorm(h))


def module_case(name, seed, model, x_shape):
    gen = torch.Generator().manual_seed(seed)
    model = model.double()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(randn(gen, *p.shape))
    x = randn(gen, *x_shape).requires_grad_(True)
    y = model(x)
    r = randn(gen, *y.shape)
    (y * r).sum().backward()
    for k, v in model.state_dict().items():
        save(f"{name}/params/{k}", v)
    for k, p in model.named_parameters():
        save(f"{name}/grads/{k}", p.grad)
    for f, a in {"x": x, "r": r, "y": y, "grad_x": x.grad}.items():
        save(f"{name}/{f}", a)


class Transformer(torch.nn.Module):
    def __init__(self, vocab, d, heads, kv_heads, head_dim, hidden, n_layers, tied):
        super().__init__()
        self.embed_tokens = torch.nn.Embedding(vocab, d)
        self.layers = torch.nn.ModuleList([Block(d, heads, kv_heads, head_dim, hidden) for _ in range(n_layers)])
        self.norm = RMSNorm(d)
        self.lm_head = torch.nn.Linear(d, vocab, bias=False)
        if tied:
            self.lm_head.weight = self.embed_tokens.weight

    def forward(self, ids):
        h = self.embed_tokens(ids)
        for layer in self.layers:
            h = layer(h)
        return self.lm_head(self.norm(h))


def transformer_case(name, seed, tied, vocab=11, batch=2, posn=5, steps=5):
    gen = torch.Generator().manual_seed(seed)
    model = Transformer(vocab, 8, 4, 2, 4, 12, 2, tied).double()
    with torch.no_grad():
        for k, p in model.named_parameters():
            if k.endswith("layernorm.weight") or k == "norm.weight":
                p.copy_(1.0 + 0.1 * randn(gen, *p.shape))
            else:
                p.copy_(0.5 * randn(gen, *p.shape))
    params = {k: p.detach().clone() for k, p in model.named_parameters()}
    ids = torch.randint(0, vocab, (batch, posn), generator=gen)
    targets = torch.randint(0, vocab, (batch, posn), generator=gen)
    logits = model(ids)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))
    loss.backward()
    for k, p in model.named_parameters():
        save(f"{name}/params/{k}", params[k])
        save(f"{name}/grads/{k}", p.grad)
    for f, a in {"ids": ids, "targets": targets, "logits": logits, "loss": loss}.items():
        save(f"{name}/{f}", a)

    # AdamW from the same parameters, decay on the matrices only
    decay = [p for p in model.parameters() if p.dim() > 1]
    no_decay = [p for p in model.parameters() if p.dim() <= 1]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-2)
    step_ids = torch.randint(0, vocab, (steps, batch, posn), generator=gen)
    step_targets = torch.randint(0, vocab, (steps, batch, posn), generator=gen)
    losses = []
    for s in range(steps):
        opt.zero_grad()
        out = model(step_ids[s])
        l = torch.nn.functional.cross_entropy(out.reshape(-1, vocab), step_targets[s].reshape(-1))
        losses.append(l.item())
        l.backward()
        opt.step()
    save(f"{name}/steps_ids", step_ids)
    save(f"{name}/steps_targets", step_targets)
    save(f"{name}/steps_losses", torch.tensor(losses, dtype=torch.float64))
    for k, p in model.named_parameters():
        save(f"{name}/final/{k}", p)


def main():
    sdpa_case("sdpa_plain", 31001, B=2, L=3, S=5, H=2, HKV=2, E=4, EV=3)
    sdpa_case("sdpa_causal_bool", 31002, B=2, L=5, S=5, H=2, HKV=2, E=4, EV=3, mask_kind="padding",
              causal_offset=0, scale=0.3)
    sdpa_case("sdpa_additive_window", 31003, B=2, L=4, S=7, H=2, HKV=2, E=4, EV=3, mask_kind="additive",
              causal_offset=3, window=3)
    sdpa_case("sdpa_gqa", 31004, B=2, L=4, S=4, H=4, HKV=2, E=4, EV=3, mask_kind="heads", causal_offset=0)
    module_case("rms_norm", 31101, RMSNorm(4), (2, 3, 4))
    module_case("swiglu", 31102, SwiGLU(4, 6), (2, 3, 4))
    module_case("gelu_mlp", 31103, GeluMLP(4, 6), (2, 3, 4))
    module_case("rotary_attention", 31104, RotaryAttention(8, 4, 2, 4), (2, 5, 8))
    module_case("rotary_attention_window", 31105, RotaryAttention(8, 4, 2, 4, window=3), (2, 5, 8))
    module_case("transformer_block", 31106, Block(8, 4, 2, 4, 12), (2, 5, 8))
    transformer_case("transformer_tied", 31107, tied=True)
    transformer_case("transformer_untied", 31108, tied=False)


if __name__ == "__main__":
    main()
