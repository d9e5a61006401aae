#!/usr/bin/python3
"""PyTorch autograd fixtures for the parameter gradients of seed 003's
MultiHeadAttention and seed 004's SelfAttention_v2
(tests/unit/train_seed_attention_grads.cpp).

The modules are the seeds' own classes as make_fixtures.py writes them
(imported from it, not copied), loaded with the float32 weights and inputs
that make_fixtures.py saved under fixtures/seed003/ and fixtures/seed004/,
run in float64 (dropout 0.0 and eval mode: the seed's nn.Dropout is the
identity). Each case's loss is sum(out * r) with a fixed random r of the
output's shape (saved as float32, used in float64 from those values); the
gradient of the loss with respect to every parameter is saved as float64
under fixtures/attention_grad/<case>/<parameter>.npy.

Cases:
  seed003_cross_padmask  MultiHeadAttention(6 heads, emb_dim 5, dim_k 4):
                         q from the decoder (batch 2, q_seq 4), k = v from
                         the encoder (kv_seq 3), padding mask (2, 1, 3)
  seed003_self_padmask   the same module, self-attention (q = k = v, seq 3)
                         with the seed's padding mask
  seed003_cross_rand_padmask  cross-attention on randn encoder rows (kv_seq 6)
                         with a mask of two and one padded positions
  seed003_self_causalmask  self-attention with the (batch, q_seq, kv_seq)
                         causal target mask
  seed004_sa_v2          SelfAttention_v2(3, 2) (no bias) on the seed's six
                         token inputs
  seed004_sa_v2_bias     SelfAttention_v2(3, 2, qkv_bias=True)

    /usr/bin/python3 tests/reference/make_attention_grad_fixtures.py [OUTPUT_DIR]

Deterministic; the C++ test never needs PyTorch.
"""

import os
import shutil
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
saved_argv, sys.argv = sys.argv, sys.argv[:1]  # make_fixtures reads argv at import
import make_fixtures as mf  # noqa: E402  (the seeds' classes)
sys.argv = saved_argv

FIX = os.path.join(HERE, "fixtures")
OUT = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(FIX, "attention_grad")
GEN = torch.Generator().manual_seed(20261124)


def load(rel):
    return torch.from_numpy(np.load(os.path.join(FIX, rel))).double() if not rel.endswith("mask.npy") else \
        torch.from_numpy(np.load(os.path.join(FIX, rel)))


def save(case, name, a):
    os.makedirs(os.path.join(OUT, case), exist_ok=True)
    a = a.detach().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
    np.save(os.path.join(OUT, case, name + ".npy"), np.array(a, order="C"), allow_pickle=False)


def finish(case, module, out):
    r = torch.randn(out.shape, generator=GEN, dtype=torch.float64).float()
    save(case, "r", r)
    (out * r.double()).sum().backward()
    for name, p in module.named_parameters():
        save(case, name.replace(".", "_"), p.grad)


def seed003(case, d, cross):
    mha = mf.MultiHeadAttention(num_heads=6, emb_dim=5, dim_k=4, dropout=0.0).double().eval()
    with torch.no_grad():
        for n in ["q_linear", "k_linear", "v_linear", "out"]:
            getattr(mha, n).weight.copy_(load("seed003/mha/%s_weight.npy" % n))
            getattr(mha, n).bias.copy_(load("seed003/mha/%s_bias.npy" % n))
    q_in = load(d + "/q_in.npy")
    kv_in = load(d + "/kv_in.npy") if cross else q_in
    mask = load(d + "/mask.npy")
    out, _ = mha(q_in, kv_in, kv_in, mask)
    finish(case, mha, out)


def seed004(case, bias):
    d = "seed004/sa_v2_bias" if bias else "seed004/sa_v2"
    sa = mf.SelfAttention_v2(3, 2, qkv_bias=bias).double()
    with torch.no_grad():
        for n in ["W_query", "W_key", "W_value"]:
            getattr(sa, n).weight.copy_(load("%s/%s_weight.npy" % (d, n)))
            if bias:
                getattr(sa, n).bias.copy_(load("%s/%s_bias.npy" % (d, n)))
    finish(case, sa, sa(load("seed004/inputs.npy")))


def main():
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    seed003("seed003_cross_padmask", "seed003/mha_cross_padmask", True)
    seed003("seed003_self_padmask", "seed003/mha_self_padmask", False)
    seed003("seed003_cross_rand_padmask", "seed003/mha_cross_rand_padmask", True)
    seed004("seed004_sa_v2", False)
    seed004("seed004_sa_v2_bias", True)
    seed003("seed003_self_causalmask", "seed003/mha_self_causalmask", False)


if __name__ == "__main__":
    main()
