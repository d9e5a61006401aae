#!/usr/bin/python3
"""PyTorch reference-fixture generator for dimsum.

Runs the PyTorch code of the five seed tutorials (/work/shared/seeds/000..004)
with fixed RNG seeds and writes every input, weight and intermediate as a small
``.npy`` file (C order, little endian; float32 unless noted: token ids are
int64, masks are bool) under ``fixtures/<seed>/``.  It also writes
``fixtures/MANIFEST.md`` (one line per file: path, dtype, shape, dimension
names in order) and checks the numbers the seed texts print.

Run with Debian's interpreter, which has torch (the ``python3`` on PATH does
not):

    /usr/bin/python3 tests/reference/make_fixtures.py [OUTPUT_DIR]

OUTPUT_DIR defaults to ``tests/reference/fixtures`` next to this script.  The
output is deterministic: two runs produce byte-identical files.  The C++ tests
never need PyTorch; they only read the committed ``.npy`` files.

Dimension names in the manifest follow each seed's own vocabulary (seed 000's
einops strings, seed 001's B/T/C, ...).  Where a tensor holds two different
sequence axes (query and key positions) they get distinct names (``posn_Q`` /
``posn_K``, ``q_time`` / ``k_time``, ...).  A grouped axis is written
``(nheads dim_k)``: one axis whose extent is the product, ``nheads`` major, as
produced by ``Linear`` followed by ``view(batch, -1, nheads, dim_k)``.  A ``1``
is a singleton axis that torch broadcasts.
"""

import math
import os
import shutil
import string
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)
torch.set_printoptions(precision=4, sci_mode=False)

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(HERE, "fixtures")

RECORDS = []  # (relpath, dtype, shape, dims)
CHECKS = []  # (seed, what, ok, max_abs_diff)
NOTES = {}  # seed -> markdown text


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------

def to_numpy(a):
    if isinstance(a, torch.Tensor):
        a = a.detach().cpu().numpy()
    a = np.asarray(a)
    # (np.ascontiguousarray would turn a 0-d array into 1-d)
    if a.dtype == np.bool_:
        return np.array(a, dtype="|b1", order="C")
    if np.issubdtype(a.dtype, np.integer):
        return np.array(a, dtype="<i8", order="C")
    return np.array(a, dtype="<f4", order="C")


def save(rel, a, dims):
    """Save ``a`` to OUT/rel.npy and record its dim names (a str, space separated)."""
    arr = to_numpy(a)
    names = split_dims(dims)
    assert len(names) == arr.ndim, (rel, arr.shape, dims)
    path = os.path.join(OUT, rel + ".npy")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.save(path, arr, allow_pickle=False)
    RECORDS.append((rel + ".npy", {"<f4": "float32", "<i8": "int64", "|b1": "bool"}[arr.dtype.str],
                    tuple(arr.shape), dims))
    return arr


def split_dims(dims):
    """Split 'a (b c) d' into ['a', '(b c)', 'd']."""
    out, cur, depth = [], "", 0
    for ch in dims:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == " " and depth == 0:
            if cur:
                out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur:
        out.append(cur)
    return out


def check(seed, what, got, printed, tol=5e-5 + 1e-6):
    """Compare against numbers printed in the seed text (rounded to 4 decimals)."""
    got = to_numpy(got).astype(np.float64)
    printed = np.asarray(printed, dtype=np.float64)
    assert got.shape == printed.shape, (what, got.shape, printed.shape)
    diff = float(np.max(np.abs(got - printed))) if got.size else 0.0
    CHECKS.append((seed, what, diff <= tol, diff))


# --------------------------------------------------------------------------
# seed 000: HiddenAttention (ARENA-style, einops)
# --------------------------------------------------------------------------
# einops is not installed: every einops.einsum below is written as the
# torch.einsum with the same meaning (einops names mapped to single letters,
# the mapping is given in the comment next to each call).

def hidden_apply_causal_mask(attn_scores: Tensor, masked_value: float = float("-inf")) -> Tensor:
    # Define a mask that is True for all positions we want to set probabilities to zero for
    all_ones = torch.ones(attn_scores.size(-2), attn_scores.size(-1), device=attn_scores.device)
    mask = torch.triu(all_ones, diagonal=1).bool()
    # Apply the mask to attention scores, then return the masked scores
    attn_scores.masked_fill_(mask, masked_value)
    return attn_scores


class HiddenAttention(nn.Module):
    def __init__(self, num_heads, dim_model, dim_head) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.dim_model = dim_model
        self.dim_head = dim_head
        self.W_Q = nn.Parameter(torch.ones((num_heads, dim_model, dim_head)))
        self.W_K = nn.Parameter(torch.ones((num_heads, dim_model, dim_head)))
        self.W_V = nn.Parameter(torch.ones((num_heads, dim_model, dim_head)))
        self.W_O = nn.Parameter(torch.ones((num_heads, dim_head, dim_model)))
        self.b_Q = nn.Parameter(torch.zeros((num_heads, dim_head)))
        self.b_K = nn.Parameter(torch.zeros((num_heads, dim_head)))
        self.b_V = nn.Parameter(torch.zeros((num_heads, dim_head)))
        self.b_O = nn.Parameter(torch.zeros((dim_model)))

    def forward(self, x: Tensor, trace=None) -> Tensor:
        batch_size = x.shape[0]
        tokens_size = x.shape[1]
        # b=batch p=posn m=d_model n=nheads h=d_head
        # einops: "batch posn d_model, nheads d_model d_head -> batch posn nheads d_head"
        q = torch.einsum("bpm,nmh->bpnh", x, self.W_Q) + self.b_Q
        assert q.shape == torch.Size([batch_size, tokens_size, self.num_heads, self.dim_head])
        k = torch.einsum("bpm,nmh->bpnh", x, self.W_K) + self.b_K
        assert k.shape == torch.Size([batch_size, tokens_size, self.num_heads, self.dim_head])
        v = torch.einsum("bpm,nmh->bpnh", x, self.W_V) + self.b_V
        assert v.shape == torch.Size([batch_size, tokens_size, self.num_heads, self.dim_head])

        # q=posn_Q k=posn_K
        # einops: "batch posn_Q nheads d_head, batch posn_K nheads d_head -> batch nheads posn_Q posn_K"
        attn_scores = torch.einsum("bqnh,bknh->bnqk", q, k)
        assert attn_scores.shape == torch.Size([batch_size, self.num_heads, tokens_size, tokens_size])
        scaled = attn_scores / self.dim_head ** 0.5
        scaled_copy = scaled.clone()  # for the fixture only: the mask below is in place
        attn_scores_masked = hidden_apply_causal_mask(scaled, float("-inf"))
        attn_pattern = attn_scores_masked.softmax(-1)

        # einops: "batch posn_K nheads d_head, batch nheads posn_Q posn_K -> batch posn_Q nheads d_head"
        z = torch.einsum("bknh,bnqk->bqnh", v, attn_pattern)
        assert z.shape == torch.Size([batch_size, tokens_size, self.num_heads, self.dim_head])

        # einops: "batch posn_Q nheads d_head, nheads d_head d_model -> batch posn_Q d_model"
        attn_out = torch.einsum("bqnh,nhm->bqm", z, self.W_O) + self.b_O
        assert attn_out.shape == torch.Size([batch_size, tokens_size, self.dim_model])

        if trace is not None:
            trace.update(q=q, k=k, v=v, attn_scores=attn_scores, attn_scores_scaled=scaled_copy,
                         attn_scores_masked=attn_scores_masked, pattern=attn_pattern, z=z, out=attn_out)
        return attn_out


def seed000():
    S = "seed000"
    batch_size, tokens_dim, dim_model, dim_heads, num_heads = 12, 20, 30, 10, 2
    ground_truth = HiddenAttention(num_heads, dim_model, dim_heads)
    # The seed initialises W_* to ones and b_* to zeros, which makes every head
    # identical and every bias vanish; re-initialise with scaled randn instead.
    torch.manual_seed(0)
    with torch.no_grad():
        for name in ["W_Q", "W_K", "W_V"]:
            getattr(ground_truth, name).copy_(torch.randn(num_heads, dim_model, dim_heads) * dim_model ** -0.5)
        ground_truth.W_O.copy_(torch.randn(num_heads, dim_heads, dim_model) * dim_heads ** -0.5)
        for name in ["b_Q", "b_K", "b_V"]:
            getattr(ground_truth, name).copy_(torch.randn(num_heads, dim_heads) * 0.5)
        ground_truth.b_O.copy_(torch.randn(dim_model) * 0.5)
    test = torch.rand((batch_size, tokens_dim, dim_model))  # as in the seed's test cell
    tr = {}
    with torch.no_grad():
        out = ground_truth(test, tr)
    assert torch.equal(out, tr["out"])

    save(f"{S}/x", test, "batch posn d_model")
    for n in ["W_Q", "W_K", "W_V"]:
        save(f"{S}/{n}", getattr(ground_truth, n), "nheads d_model d_head")
    save(f"{S}/W_O", ground_truth.W_O, "nheads d_head d_model")
    for n in ["b_Q", "b_K", "b_V"]:
        save(f"{S}/{n}", getattr(ground_truth, n), "nheads d_head")
    save(f"{S}/b_O", ground_truth.b_O, "d_model")
    for n in ["q", "k", "v"]:
        save(f"{S}/{n}", tr[n], "batch posn nheads d_head")
    save(f"{S}/attn_scores", tr["attn_scores"], "batch nheads posn_Q posn_K")
    save(f"{S}/attn_scores_scaled", tr["attn_scores_scaled"], "batch nheads posn_Q posn_K")
    save(f"{S}/attn_scores_masked", tr["attn_scores_masked"], "batch nheads posn_Q posn_K")
    save(f"{S}/pattern", tr["pattern"], "batch nheads posn_Q posn_K")
    save(f"{S}/z", tr["z"], "batch posn_Q nheads d_head")
    save(f"{S}/out", tr["out"], "batch posn_Q d_model")

    # apply_causal_mask test case from the seed (3x3, -inf)
    ignore = float("-inf")
    m_in = torch.tensor([[1.0, 2, 3], [4, 5, 6], [7, 8, 9]])
    m_out = hidden_apply_causal_mask(m_in.clone(), ignore)
    assert torch.equal(m_out, torch.tensor([[1.0, ignore, ignore], [4.0, 5.0, ignore], [7.0, 8.0, 9.0]]))
    save(f"{S}/causal_mask_3x3_in", m_in, "posn_Q posn_K")
    save(f"{S}/causal_mask_3x3_out", m_out, "posn_Q posn_K")
    # non-square, same triu(diagonal=1) rule: masked where posn_K > posn_Q
    for (r, c) in [(3, 5), (5, 3)]:
        a = torch.arange(1, r * c + 1, dtype=torch.float32).reshape(r, c)
        save(f"{S}/causal_mask_{r}x{c}_in", a, "posn_Q posn_K")
        save(f"{S}/causal_mask_{r}x{c}_out", hidden_apply_causal_mask(a.clone(), ignore), "posn_Q posn_K")

    NOTES[S] = f"""\
HiddenAttention from the seed, test shape batch={batch_size} posn={tokens_dim} d_model={dim_model}
nheads={num_heads} d_head={dim_heads}.
- `x` = `torch.rand((12, 20, 30))` (the seed's test input), drawn after the parameters.
- Parameters: the seed initialises W_* = ones and b_* = zeros (degenerate: identical heads, no bias).
  They are re-initialised under `torch.manual_seed(0)` in the order W_Q, W_K, W_V
  (`randn * d_model**-0.5`), W_O (`randn * d_head**-0.5`), b_Q, b_K, b_V, b_O (`randn * 0.5`).
- einops is not installed: each `einops.einsum` is the `torch.einsum` with the same meaning
  (the einops strings are kept as comments in make_fixtures.py; dim names here are those strings' names).
- `q,k,v` = einsum + bias; `attn_scores` = q.k (unscaled); `attn_scores_scaled` = `/ d_head**0.5`;
  `attn_scores_masked` = `hidden_apply_causal_mask(..., -inf)` (triu(diagonal=1) -> -inf);
  `pattern` = `.softmax(-1)` over posn_K; `z` = einsum(v, pattern); `out` = einsum(z, W_O) + b_O (sums over nheads).
- `causal_mask_3x3_*` is the seed's own test (values 1..9, -inf above the diagonal).
  `causal_mask_3x5_*` / `causal_mask_5x3_*` (values 1..15, row major) apply the same rule
  `torch.triu(ones(Q, K), diagonal=1)`: masked iff key index > query index, i.e. the mask is aligned to the
  top-left corner (NOT the bottom-right alignment some kv-cache implementations use). In 5x3 the rows 2..4 are
  fully unmasked.
- The seed's `apply_causal_mask` / `Attention` are exercise stubs returning None; the hidden (solution)
  versions are what is reproduced.
"""


# --------------------------------------------------------------------------
# seed 001: character-level single head (Karpathy style)
# --------------------------------------------------------------------------

def seed001():
    S = "seed001"
    torch.manual_seed(1337)  # the seed sets no seed; 1337 chosen here

    vocab = string.whitespace + string.ascii_letters + string.digits + string.punctuation
    vocab_size = len(vocab)
    assert vocab_size == 100
    vtoi = {ch: i for i, ch in enumerate(vocab)}
    itov = {i: ch for i, ch in enumerate(vocab)}
    encode = lambda v: [vtoi[ch] for ch in v]
    decode = lambda t: [itov[i] for i in t]

    text = "Attention is all you need"
    text_enc = encode(text)
    assert "".join(decode(text_enc)) == text
    data = torch.LongTensor(text_enc)

    block_size = 4
    n_embd = 5
    batch_size = 2  # defined by the seed but never used: get_batch draws block_size windows

    token_embedding_table = nn.Embedding(vocab_size, n_embd)
    position_embedding_table = nn.Embedding(block_size, n_embd)

    def get_batch():
        ix = torch.randint(0, len(text_enc) - block_size - 1, (block_size,))
        x = torch.stack([data[i:i + block_size] for i in ix])
        y = torch.stack([data[i + 1:i + block_size + 1] for i in ix])
        return ix, x, y

    ix, xb, yb = get_batch()
    B, T = xb.shape
    with torch.no_grad():
        emb_tok = token_embedding_table(xb)
        emb_pos = position_embedding_table(torch.arange(T))

        head_size = 6
        x = emb_pos + emb_tok
        B, T, C = x.shape
        key = nn.Linear(C, head_size, bias=False)
        query = nn.Linear(C, head_size, bias=False)
        value = nn.Linear(C, head_size, bias=False)
        k = key(x)
        q = query(x)
        W_raw = q @ k.transpose(-2, -1)
        W_scaled = W_raw * C ** -0.5
        tril = torch.tril(torch.ones(T, T))
        W_masked = W_scaled.masked_fill(tril == 0, float("-inf"))
        W_soft = F.softmax(W_masked, dim=-1)
        v = value(x)
        out = W_soft @ v

    save(f"{S}/text_ids", data, "char")
    save(f"{S}/token_embedding", token_embedding_table.weight, "vocab n_embd")
    save(f"{S}/position_embedding", position_embedding_table.weight, "block n_embd")
    save(f"{S}/batch_ix", ix, "batch")
    save(f"{S}/x_ids", xb, "batch time")
    save(f"{S}/y_ids", yb, "batch time")
    save(f"{S}/emb_tok", emb_tok, "batch time n_embd")
    save(f"{S}/emb_pos", emb_pos, "time n_embd")
    save(f"{S}/x", x, "batch time n_embd")
    save(f"{S}/key_weight", key.weight, "head_size n_embd")
    save(f"{S}/query_weight", query.weight, "head_size n_embd")
    save(f"{S}/value_weight", value.weight, "head_size n_embd")
    save(f"{S}/k", k, "batch time head_size")
    save(f"{S}/q", q, "batch time head_size")
    save(f"{S}/v", v, "batch time head_size")
    save(f"{S}/scores_raw", W_raw, "batch q_time k_time")
    save(f"{S}/scores", W_scaled, "batch q_time k_time")
    save(f"{S}/tril", tril, "q_time k_time")
    save(f"{S}/scores_masked", W_masked, "batch q_time k_time")
    save(f"{S}/weights", W_soft, "batch q_time k_time")
    save(f"{S}/out", out, "batch q_time head_size")

    NOTES[S] = f"""\
Character vocab = string.whitespace + ascii_letters + digits + punctuation (100 symbols, whitespace first:
' \\t\\n\\r\\x0b\\x0c'), text "Attention is all you need" (25 chars). block_size=4, n_embd=5 (C), head_size=6.
- Everything runs under one `torch.manual_seed(1337)` (the seed sets none), in the seed's order:
  `nn.Embedding(100, 5)` (token), `nn.Embedding(4, 5)` (position), `get_batch()` (`torch.randint`),
  then `nn.Linear(5, 6, bias=False)` for key, query, value (in that order). Default torch init (N(0,1) for
  embeddings, kaiming-uniform for Linear): non-trivial.
- Seed quirk reproduced as written: `get_batch` draws `(block_size,)` = 4 windows, not `batch_size` = 2,
  so B = 4 (the seed's printed shapes `[4, 4]`, `[4, 4, 5]` confirm). Start indices from
  `randint(0, 25-4-1)` = [0, 20). `batch_ix` holds them; `x_ids[b] = text_ids[ix[b]:ix[b]+4]`,
  `y_ids` = the same shifted by one.
- `emb_pos = position_embedding(arange(T))` (time, n_embd) broadcasts over batch in `x = emb_pos + emb_tok`.
- Linear weights are in PyTorch layout (out=head_size, in=n_embd): `k = x @ key_weight.T`.
- `scores_raw = q @ k.transpose(-2,-1)`; `scores = scores_raw * C**-0.5` with C = n_embd = 5
  (NOT head_size = 6; the seed scales by the embedding size, reproduced as written);
  `scores_masked = masked_fill(tril == 0, -inf)`; `weights = softmax(dim=-1)`; `out = weights @ v`.
- The seed's last two printed lines (means/stds) come from code not shown and unseeded RNG: not reproducible.
"""


# --------------------------------------------------------------------------
# seed 002: tril / running average / sinusoidal positional encoding
# --------------------------------------------------------------------------

def sinusoidal_pe(T, C):
    """PE[pos, 2i] = sin(pos / 10000**(2i/C)), PE[pos, 2i+1] = cos(pos / 10000**(2i/C)) (float64)."""
    pe = np.zeros((T, C), dtype=np.float64)
    pos = np.arange(T, dtype=np.float64)[:, None]
    two_i = np.arange(0, C, 2, dtype=np.float64)
    div = np.power(10000.0, two_i / C)
    pe[:, 0::2] = np.sin(pos / div)
    pe[:, 1::2] = np.cos(pos / div[: C // 2])
    return pe


SEED002_X = [[0.9188, 0.0800], [1.3041, -0.0827], [0.2717, -1.2120], [0.1656, -0.8852], [1.6164, 0.3943]]
SEED002_PE = [[0.0, 1.0], [0.84147098, 0.54030231], [0.90929743, -0.41614684],
              [0.14112001, -0.9899925], [-0.7568025, -0.65364362]]
SEED002_XBOW3 = [
    [[-0.8273, 0.5410], [-0.5045, 0.0594], [0.3320, 0.6988], [-0.0415, 0.5347],
     [0.3069, 0.8687], [-0.0678, 0.6424], [-0.0256, 0.4929], [-0.0346, 0.4638]],
    [[0.4554, -0.0601], [0.3639, -0.3632], [0.3842, -0.1176], [0.8112, 0.2629],
     [0.7386, 0.5212], [0.7461, 0.1248], [0.6825, 0.1393], [0.4978, 0.1053]],
    [[0.4904, -0.1202], [0.4504, -0.0612], [0.4384, -0.4280], [0.5894, -0.6804],
     [0.3690, -0.5270], [0.3813, -0.5088], [0.0388, -0.4376], [-0.1165, -0.2274]],
    [[-0.6851, 0.0906], [-1.3416, -0.0507], [-0.6536, -0.0603], [-0.4225, -0.1353],
     [-0.2528, -0.2319], [-0.0375, -0.0600], [-0.2067, -0.1786], [-0.3234, -0.1669]],
]


def seed002():
    S = "seed002"
    # --- embeddings + positional encodings, T=5, C=2 (values printed by the seed)
    T, C = 5, 2
    X = torch.tensor(SEED002_X, dtype=torch.float32)  # the seed's printed "random" X, used verbatim
    pe64 = sinusoidal_pe(T, C)
    pe_ok = float(np.max(np.abs(pe64 - np.asarray(SEED002_PE))))
    CHECKS.append((S, "positional encoding T=5 C=2 (8 decimals)", pe_ok < 1e-8, pe_ok))
    pe = torch.from_numpy(pe64.astype(np.float32))
    save(f"{S}/emb_T5_C2", X, "time channel")
    save(f"{S}/pe_T5_C2", pe, "time channel")
    save(f"{S}/emb_plus_pe_T5_C2", X + pe, "time channel")

    # larger table and sum
    T2, C2 = 16, 8
    torch.manual_seed(2)
    X2 = torch.randn(T2, C2)
    pe2 = torch.from_numpy(sinusoidal_pe(T2, C2).astype(np.float32))
    save(f"{S}/emb_T16_C8", X2, "time channel")
    save(f"{S}/pe_T16_C8", pe2, "time channel")
    save(f"{S}/emb_plus_pe_T16_C8", X2 + pe2, "time channel")

    # --- tril demo (T=5, printed) and the masked-softmax running average (T=8, printed)
    tril5 = torch.tril(torch.ones(5, 5))
    save(f"{S}/tril_T5", tril5, "q_time k_time")
    wei5 = torch.zeros((5, 5)).masked_fill(tril5 == 0, float("-inf"))
    save(f"{S}/wei_masked_T5", wei5, "q_time k_time")
    save(f"{S}/wei_T5", F.softmax(wei5, dim=1), "q_time k_time")

    B, T, C = 4, 8, 2
    tril = torch.tril(torch.ones(T, T))
    wei = torch.zeros((T, T))
    wei = wei.masked_fill(tril == 0, float("-inf"))
    wei_masked = wei.clone()
    wei = F.softmax(wei, dim=1)
    # x is not given by the seed (random, unseeded). It is reconstructed from the printed xbow3 so that the
    # running average reproduces the printed numbers: x[t] = (t+1)*xbow[t] - t*xbow[t-1].
    xb = np.asarray(SEED002_XBOW3, dtype=np.float64)
    x64 = np.empty_like(xb)
    x64[:, 0] = xb[:, 0]
    for t in range(1, T):
        x64[:, t] = (t + 1) * xb[:, t] - t * xb[:, t - 1]
    x = torch.from_numpy(x64.astype(np.float32))
    xbow3 = wei @ x
    check(S, "xbow3 = wei @ x (4x8x2)", xbow3, SEED002_XBOW3)
    check(S, "wei (8x8) = running-average rows 1/(i+1), as printed", wei, [[1.0 / (i + 1) if j <= i else 0.0 for j in range(8)] for i in range(8)])
    save(f"{S}/tril_T8", tril, "q_time k_time")
    save(f"{S}/wei_masked_T8", wei_masked, "q_time k_time")
    save(f"{S}/wei_T8", wei, "q_time k_time")
    save(f"{S}/x_B4_T8_C2", x, "batch k_time channel")
    save(f"{S}/xbow3_B4_T8_C2", xbow3, "batch q_time channel")

    NOTES[S] = """\
The seed gives snippets, not a runnable program; reproduced as follows.
- `X = torch.Embedding(T, C)` does not exist in torch; the seed's printed X (5x2) is used verbatim as
  `emb_T5_C2`.
- Positional encoding: only the printed table is given (with a leading singleton batch axis `(1,5,2)`,
  saved here without it). Standard Vaswani formula, computed in float64 then cast:
  `PE[pos, 2i] = sin(pos / 10000**(2i/C))`, `PE[pos, 2i+1] = cos(pos / 10000**(2i/C))`.
  For C=2 this is (sin pos, cos pos), matching the seed's printed 8-decimal values exactly.
  `pe_T16_C8` is the larger table; `emb_T16_C8 = randn(16, 8)` under `torch.manual_seed(2)`;
  `emb_plus_pe_*` = `X = X + positional_embeddings`.
- Inconsistency in the seed: `tril` is printed for T=5 but the masked `wei`, its softmax and `xbow3` are
  printed for T=8 (B=4, C=2, Karpathy's sizes). Both are saved: `*_T5` and `*_T8`.
  `wei_masked = zeros(T,T).masked_fill(tril == 0, -inf)`; `wei = F.softmax(wei, dim=1)` (= rows);
  `xbow3 = wei @ x` (batched matmul broadcasting wei over batch).
- The seed's `x` is unseeded random and not printed. It was reconstructed from the printed `xbow3`
  (`x[t] = (t+1)*xbow3[t] - t*xbow3[t-1]`, float64 then float32), so `xbow3` reproduces the seed's printed
  numbers (checked below). (A search of `torch.manual_seed(0..299999)` + `randn(4,8,2)` found no seed
  giving the printed values.)
"""


# --------------------------------------------------------------------------
# seed 003: dot_product_attention / MultiHeadAttention (masks with -1e9)
# --------------------------------------------------------------------------

def dot_product_attention(q, k, v, dim, mask=None, dropout=None, explain=False, trace=None):
    k = k.transpose(-2, -1)
    scores = torch.matmul(q, k) / math.sqrt(dim)
    if trace is not None:
        trace["scores_unmasked"] = scores
    if mask is not None:
        mask = mask.unsqueeze(1)
        scores = scores.masked_fill(mask == 0, -1e9)
    softscores = F.softmax(scores, dim=-1)
    if dropout is not None:
        softscores = dropout(softscores)
    if trace is not None:
        trace["softscores"] = softscores
    output = torch.matmul(softscores, v)
    return output, scores


class MultiHeadAttention(nn.Module):
    def __init__(self, num_heads, emb_dim, dim_k=None, dropout=0.1):
        super().__init__()
        self.emb_dim = emb_dim
        self.dim_k = dim_k if dim_k else emb_dim // num_heads
        self.num_heads = num_heads
        self.q_linear = nn.Linear(emb_dim, self.dim_k * num_heads)
        self.k_linear = nn.Linear(emb_dim, self.dim_k * num_heads)
        self.v_linear = nn.Linear(emb_dim, self.dim_k * num_heads)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(self.dim_k * num_heads, emb_dim)

    def forward(self, q, k, v, mask=None, explain=False, trace=None):
        batch_size = q.size(0)
        q = self.q_linear(q)
        k = self.k_linear(k)
        v = self.v_linear(v)
        if trace is not None:
            trace.update(q_lin=q, k_lin=k, v_lin=v)
        k = k.view(batch_size, -1, self.num_heads, self.dim_k)
        q = q.view(batch_size, -1, self.num_heads, self.dim_k)
        v = v.view(batch_size, -1, self.num_heads, self.dim_k)
        k = k.transpose(1, 2)
        q = q.transpose(1, 2)
        v = v.transpose(1, 2)
        if trace is not None:
            trace.update(q_heads=q, k_heads=k, v_heads=v)
        attn, scores = dot_product_attention(q, k, v, self.dim_k, mask, self.dropout, explain, trace)
        concat = attn.transpose(1, 2).contiguous().view(batch_size, -1, self.dim_k * self.num_heads)
        output = self.out(concat)
        if trace is not None:
            trace.update(attn=attn, scores=scores, concat=concat, output=output)
        return output, scores


def seed003():
    S = "seed003"
    # --- the torch.manual_seed(42) scaled-dot-product demo (numbers printed by the seed)
    torch.manual_seed(42)
    batch_size, num_heads, q_seq_len, k_seq_len, v_seq_len, emb_dim = 1, 1, 2, 3, 3, 4
    q = torch.randn(batch_size, num_heads, q_seq_len, emb_dim)
    k = torch.randn(batch_size, num_heads, k_seq_len, emb_dim)
    v = torch.randn(batch_size, num_heads, v_seq_len, emb_dim)
    k_T = k.transpose(-2, -1)
    scores = torch.matmul(q, k_T) / math.sqrt(emb_dim)
    softscores = F.softmax(scores, dim=-1)
    output = torch.matmul(softscores, v)
    softscores_wrong = F.softmax(scores, dim=-2)
    check(S, "demo scores", scores, [[[[0.2509, 0.0725, 0.0990], [0.0483, -1.8634, -1.4245]]]])
    check(S, "demo softscores", softscores, [[[[0.3710, 0.3104, 0.3187], [0.7262, 0.1073, 0.1665]]]])
    check(S, "demo output", output, [[[[0.5732, 0.4398, 0.0379, 0.4533], [1.0041, 0.5920, -0.1833, 0.6731]]]])
    check(S, "demo softscores dim=-2 (the 'mistaken' one)", softscores_wrong,
          [[[[0.5505, 0.8739, 0.8211], [0.4495, 0.1261, 0.1789]]]])
    D = f"{S}/demo"
    save(f"{D}/q", q, "batch nheads q_seq emb_dim")
    save(f"{D}/k", k, "batch nheads kv_seq emb_dim")
    save(f"{D}/v", v, "batch nheads kv_seq emb_dim")
    save(f"{D}/scores", scores, "batch nheads q_seq kv_seq")
    save(f"{D}/softscores", softscores, "batch nheads q_seq kv_seq")
    save(f"{D}/output", output, "batch nheads q_seq emb_dim")
    save(f"{D}/softscores_dim_q", softscores_wrong, "batch nheads q_seq kv_seq")

    # --- MultiHeadAttention(num_heads=6, emb_dim=5, dim_k=4, dropout=0.0), the seed's configuration
    torch.manual_seed(3)
    mha = MultiHeadAttention(num_heads=6, emb_dim=5, dim_k=4, dropout=0.0)
    mha.eval()
    # Default nn.Linear init gives scores of ~0.02 on these inputs (near-uniform softmax, as in the seed's
    # printout); re-initialise with randn so the fixtures discriminate.
    with torch.no_grad():
        for lin in [mha.q_linear, mha.k_linear, mha.v_linear, mha.out]:
            lin.weight.copy_(torch.randn_like(lin.weight))
            lin.bias.copy_(torch.randn_like(lin.bias) * 0.5)
    M = f"{S}/mha"
    for name in ["q_linear", "k_linear", "v_linear"]:
        lin = getattr(mha, name)
        save(f"{M}/{name}_weight", lin.weight, "(nheads dim_k) emb_dim")
        save(f"{M}/{name}_bias", lin.bias, "(nheads dim_k)")
    save(f"{M}/out_weight", mha.out.weight, "emb_dim (nheads dim_k)")
    save(f"{M}/out_bias", mha.out.bias, "emb_dim")

    input_vectors = np.asarray([
        [[0.0, 0.0, 0.1, 0.2, 0.3], [0.0, 0.1, 0.2, 0.3, 0.4], [0.0, 0.2, 0.3, 0.4, 0.5]],
        [[0.0, 0.1, 0.2, 0.3, 0.4], [0.0, 0.2, 0.3, 0.4, 0.5], [0.0, 0.3, 0.4, 0.5, 0.6]],
    ])
    input_mask = torch.from_numpy(np.ones((2, 1, 3)) == 1)
    input_mask[0, 0, -1] = False
    input_vectors = torch.from_numpy(input_vectors).float()

    torch.manual_seed(4)
    decode = torch.rand(2, 4, 5)  # decoder-side sequence for cross attention, q_seq=4 != kv_seq=3
    causal = torch.tril(torch.ones(3, 3)).bool().expand(2, 3, 3).clone()  # (batch, q_seq, kv_seq) target mask
    # The seed's input rows differ only by +0.1 steps, so its attention is close to uniform; this extra
    # cross-attention case uses randn sequences (kv_seq=6) so that the softmax is far from uniform.
    enc_rand = torch.randn(2, 6, 5)
    pad_rand = torch.ones(2, 1, 6, dtype=torch.bool)
    pad_rand[0, 0, 4:] = False
    pad_rand[1, 0, 5:] = False

    cases = [
        ("self", input_vectors, input_vectors, None),
        ("self_padmask", input_vectors, input_vectors, input_mask),
        ("self_causalmask", input_vectors, input_vectors, causal),
        ("cross", decode, input_vectors, None),
        ("cross_padmask", decode, input_vectors, input_mask),
        ("cross_rand_padmask", decode, enc_rand, pad_rand),
    ]
    for name, qin, kvin, mask in cases:
        tr = {}
        with torch.no_grad():
            out, sc = mha(qin, kvin, kvin, mask, trace=tr)
        C = f"{S}/mha_{name}"
        save(f"{C}/q_in", qin, "batch q_seq emb_dim")
        if name.startswith("cross"):
            save(f"{C}/kv_in", kvin, "batch kv_seq emb_dim")
        if mask is not None:
            if mask.shape[1] == 1:
                save(f"{C}/mask", mask, "batch 1 kv_seq")
            else:
                save(f"{C}/mask", mask, "batch q_seq kv_seq")
        save(f"{C}/q_lin", tr["q_lin"], "batch q_seq (nheads dim_k)")
        save(f"{C}/k_lin", tr["k_lin"], "batch kv_seq (nheads dim_k)")
        save(f"{C}/v_lin", tr["v_lin"], "batch kv_seq (nheads dim_k)")
        save(f"{C}/q_heads", tr["q_heads"], "batch nheads q_seq dim_k")
        save(f"{C}/k_heads", tr["k_heads"], "batch nheads kv_seq dim_k")
        save(f"{C}/v_heads", tr["v_heads"], "batch nheads kv_seq dim_k")
        save(f"{C}/scores_unmasked", tr["scores_unmasked"], "batch nheads q_seq kv_seq")
        save(f"{C}/scores", tr["scores"], "batch nheads q_seq kv_seq")
        save(f"{C}/softscores", tr["softscores"], "batch nheads q_seq kv_seq")
        save(f"{C}/attn", tr["attn"], "batch nheads q_seq dim_k")
        save(f"{C}/concat", tr["concat"], "batch q_seq (nheads dim_k)")
        save(f"{C}/output", tr["output"], "batch q_seq emb_dim")
        assert torch.equal(out, tr["output"]) and torch.equal(sc, tr["scores"])

    NOTES[S] = """\
- `demo/`: the seed's `torch.manual_seed(42)` cell verbatim (batch=1, nheads=1, q_seq=2, kv_seq=3,
  emb_dim=4; q, k, v drawn with `randn` in that order). `scores = q @ k^T / sqrt(4)`,
  `softscores = softmax(dim=-1)`, `output = softscores @ v`; `softscores_dim_q` = the seed's
  "mistaken" `softmax(dim=-2)`. All four printed tensors are reproduced (see checks).
- `dot_product_attention` and `MultiHeadAttention` copied verbatim (plus a `trace` hook).
  Config as in the seed: num_heads=6, emb_dim=5, dim_k=4 (so nheads*dim_k = 24 > emb_dim), dropout=0.0,
  `.eval()`. Scaling is by `sqrt(dim_k)` = 2. Masked positions are filled with **-1e9** (not -inf) where
  `mask == 0`, after `mask.unsqueeze(1)` inserts the heads axis.
- Weights: module constructed under `torch.manual_seed(3)`, then every Linear re-initialised (order q, k,
  v, out; weight `randn`, bias `randn*0.5`) because the default init gives near-uniform attention
  (scores ~0.02, as in the seed's printout). Shared by all `mha_*` cases, saved once in `mha/`
  (PyTorch layout (out, in)). Row index of q/k/v_linear_weight = head*dim_k + d (`view(b,-1,nheads,dim_k)`).
- Inputs: the seed's `input_vectors` (2,3,5) and `input_mask` (2,1,3) = [[T,T,F]],[[T,T,T]].
  `decode` = `torch.rand(2,4,5)` under `torch.manual_seed(4)`.
  Cases: `mha_self` (no mask), `mha_self_padmask` (the seed's cell [9]), `mha_self_causalmask`
  (mask = tril(ones(3,3)) as (batch, q_seq, kv_seq) "target mask"), `mha_cross` (q = decode, k = v =
  input_vectors, q_seq=4 != kv_seq=3, no mask), `mha_cross_padmask` (same with the (2,1,3) source mask:
  `multiheadattn(decode, encode, encode, encodemask)`), `mha_cross_rand_padmask` (q = decode,
  k = v = `randn(2,6,5)` drawn right after `decode`, kv_seq=6, pad mask (2,1,6) with batch 0 keys 4..5 and
  batch 1 key 5 masked; the seed's own inputs give near-uniform attention because its rows differ only by
  +0.1 steps, this case does not).
- Per case: `q_lin/k_lin/v_lin` = Linear outputs; `*_heads` = after view + transpose(1,2);
  `scores_unmasked` = scaled scores before masking; `scores` = what the function returns (masked,
  pre-softmax, -1e9 at masked positions); `softscores` = softmax(dim=-1); `attn` = softscores @ v;
  `concat` = attn.transpose(1,2).view(b, -1, 24); `output` = out(concat).
  Note `MultiHeadAttention` returns the *pre-softmax* masked scores, not the probabilities.
- The seed's cell [10] printout (`scores[0,0]` etc.) comes from an unseeded default init: not reproducible.
"""


# --------------------------------------------------------------------------
# seed 004: Raschka-style self-attention (weightless, v1, v2)
# --------------------------------------------------------------------------

class SelfAttention_v1(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.W_query = nn.Parameter(torch.rand(d_in, d_out))
        self.W_key = nn.Parameter(torch.rand(d_in, d_out))
        self.W_value = nn.Parameter(torch.rand(d_in, d_out))

    def forward(self, x, trace=None):
        keys = x @ self.W_key
        queries = x @ self.W_query
        values = x @ self.W_value
        attn_scores = queries @ keys.T  # omega
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        context_vec = attn_weights @ values
        if trace is not None:
            trace.update(keys=keys, queries=queries, values=values, attn_scores=attn_scores,
                         attn_weights=attn_weights, context=context_vec)
        return context_vec


class SelfAttention_v2(nn.Module):
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x, trace=None):
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)
        attn_scores = queries @ keys.T
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        context_vec = attn_weights @ values
        if trace is not None:
            trace.update(keys=keys, queries=queries, values=values, attn_scores=attn_scores,
                         attn_weights=attn_weights, context=context_vec)
        return context_vec


def seed004():
    S = "seed004"
    inputs = torch.tensor(
        [[0.43, 0.15, 0.89],  # Your      (x^1)
         [0.55, 0.87, 0.66],  # journey   (x^2)
         [0.57, 0.85, 0.64],  # starts    (x^3)
         [0.22, 0.58, 0.33],  # with      (x^4)
         [0.77, 0.25, 0.10],  # one       (x^5)
         [0.05, 0.80, 0.55]]  # step      (x^6)
    )
    save(f"{S}/inputs", inputs, "token d_in")

    # --- 1. weightless
    query = inputs[1]
    atten_scores_2 = torch.empty(inputs.shape[0])
    for i, x_i in enumerate(inputs):
        atten_scores_2[i] = torch.dot(x_i, query)
    check(S, "atten_scores_2", atten_scores_2, [0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865])
    atten_scores_2_tmp = atten_scores_2 / atten_scores_2.sum()
    check(S, "atten_scores_2 / sum", atten_scores_2_tmp, [0.1455, 0.2278, 0.2249, 0.1285, 0.1077, 0.1656])
    atten_weights_2 = torch.softmax(atten_scores_2, dim=0)
    check(S, "atten_weights_2 (softmax)", atten_weights_2, [0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581])
    context_vec_2 = torch.zeros(query.shape)
    for i, x_i in enumerate(inputs):
        context_vec_2 += atten_weights_2[i] * x_i
    check(S, "context_vec_2 (weightless)", context_vec_2, [0.4419, 0.6515, 0.5683])

    attn_scores_loop = torch.empty(6, 6)
    for i, x_i in enumerate(inputs):
        for j, x_j in enumerate(inputs):
            attn_scores_loop[i, j] = torch.dot(x_i, x_j)
    attn_scores = inputs @ inputs.T
    printed_scores = [[0.9995, 0.9544, 0.9422, 0.4753, 0.4576, 0.6310],
                      [0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865],
                      [0.9422, 1.4754, 1.4570, 0.8296, 0.7154, 1.0605],
                      [0.4753, 0.8434, 0.8296, 0.4937, 0.3474, 0.6565],
                      [0.4576, 0.7070, 0.7154, 0.3474, 0.6654, 0.2935],
                      [0.6310, 1.0865, 1.0605, 0.6565, 0.2935, 0.9450]]
    check(S, "attn_scores (loop)", attn_scores_loop, printed_scores)
    check(S, "attn_scores = inputs @ inputs.T", attn_scores, printed_scores)
    attn_weights = torch.softmax(attn_scores, dim=-1)
    check(S, "attn_weights", attn_weights,
          [[0.2098, 0.2006, 0.1981, 0.1242, 0.1220, 0.1452],
           [0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581],
           [0.1390, 0.2369, 0.2326, 0.1242, 0.1108, 0.1565],
           [0.1435, 0.2074, 0.2046, 0.1462, 0.1263, 0.1720],
           [0.1526, 0.1958, 0.1975, 0.1367, 0.1879, 0.1295],
           [0.1385, 0.2184, 0.2128, 0.1420, 0.0988, 0.1896]])
    all_context_vecs = attn_weights @ inputs
    check(S, "all_context_vecs", all_context_vecs,
          [[0.4421, 0.5931, 0.5790], [0.4419, 0.6515, 0.5683], [0.4431, 0.6496, 0.5671],
           [0.4304, 0.6298, 0.5510], [0.4671, 0.5910, 0.5266], [0.4177, 0.6503, 0.5645]])
    W = f"{S}/weightless"
    save(f"{W}/attn_scores_2", atten_scores_2, "k_token")
    save(f"{W}/attn_scores_2_sumnorm", atten_scores_2_tmp, "k_token")
    save(f"{W}/attn_weights_2", atten_weights_2, "k_token")
    save(f"{W}/context_vec_2", context_vec_2, "d_in")
    save(f"{W}/attn_scores", attn_scores, "q_token k_token")
    save(f"{W}/attn_weights", attn_weights, "q_token k_token")
    save(f"{W}/context_vecs", all_context_vecs, "q_token d_in")

    # --- 2. trainable weights, step by step (manual_seed(123))
    x_2 = inputs[1]
    d_in = inputs.shape[1]
    d_out = 2
    torch.manual_seed(123)
    W_query = torch.nn.Parameter(torch.rand(d_in, d_out), requires_grad=False)
    W_key = torch.nn.Parameter(torch.rand(d_in, d_out), requires_grad=False)
    W_value = torch.nn.Parameter(torch.rand(d_in, d_out), requires_grad=False)
    check(S, "W_query (manual_seed 123)", W_query, [[0.2961, 0.5166], [0.2517, 0.6886], [0.0740, 0.8665]])
    query_2 = x_2 @ W_query
    key_2 = x_2 @ W_key
    value_2 = x_2 @ W_value
    check(S, "query_2", query_2, [0.4306, 1.4551])
    keys = inputs @ W_key
    values = inputs @ W_value
    attn_score_22 = query_2.dot(key_2)
    check(S, "attn_score_22", attn_score_22, 1.8524)
    attn_scores_2 = query_2 @ keys.T
    check(S, "attn_scores_2 (trainable)", attn_scores_2, [1.2705, 1.8524, 1.8111, 1.0795, 0.5577, 1.5440])
    d_k = keys.shape[-1]
    attn_weights_2 = torch.softmax(attn_scores_2 / d_k ** 0.5, dim=-1)
    check(S, "attn_weights_2 (trainable)", attn_weights_2, [0.1500, 0.2264, 0.2199, 0.1311, 0.0906, 0.1820])
    context_vec_2 = attn_weights_2 @ values
    check(S, "context_vec_2 (trainable)", context_vec_2, [0.3061, 0.8210])
    T2 = f"{S}/trainable_x2"
    save(f"{T2}/query_2", query_2, "d_out")
    save(f"{T2}/key_2", key_2, "d_out")
    save(f"{T2}/value_2", value_2, "d_out")
    save(f"{T2}/attn_score_22", attn_score_22, "")
    save(f"{T2}/attn_scores_2", attn_scores_2, "k_token")
    save(f"{T2}/attn_weights_2", attn_weights_2, "k_token")
    save(f"{T2}/context_vec_2", context_vec_2, "d_out")

    # --- SelfAttention_v1 (manual_seed(123): the same three matrices as above)
    torch.manual_seed(123)
    sa_v1 = SelfAttention_v1(d_in, d_out)
    assert torch.equal(sa_v1.W_query.data, W_query.data)
    tr = {}
    with torch.no_grad():
        out_v1 = sa_v1(inputs, tr)
    check(S, "SelfAttention_v1 output", out_v1,
          [[0.2996, 0.8053], [0.3061, 0.8210], [0.3058, 0.8203],
           [0.2948, 0.7939], [0.2927, 0.7891], [0.2990, 0.8040]])
    V1 = f"{S}/sa_v1"
    save(f"{V1}/W_query", sa_v1.W_query, "d_in d_out")
    save(f"{V1}/W_key", sa_v1.W_key, "d_in d_out")
    save(f"{V1}/W_value", sa_v1.W_value, "d_in d_out")
    save_sa_trace(V1, tr)

    # --- SelfAttention_v2 (manual_seed(789), default qkv_bias=False as in the seed's cell)
    torch.manual_seed(789)
    sa_v2 = SelfAttention_v2(d_in, d_out)
    tr = {}
    with torch.no_grad():
        out_v2 = sa_v2(inputs, tr)
    check(S, "SelfAttention_v2 output", out_v2,
          [[-0.0739, 0.0713], [-0.0748, 0.0703], [-0.0749, 0.0702],
           [-0.0760, 0.0685], [-0.0763, 0.0679], [-0.0754, 0.0693]])
    V2 = f"{S}/sa_v2"
    for n in ["W_query", "W_key", "W_value"]:
        save(f"{V2}/{n}_weight", getattr(sa_v2, n).weight, "d_out d_in")
    save_sa_trace(V2, tr)

    # --- SelfAttention_v2 with qkv_bias=True (manual_seed(789); not printed by the seed)
    torch.manual_seed(789)
    sa_v2b = SelfAttention_v2(d_in, d_out, qkv_bias=True)
    tr = {}
    with torch.no_grad():
        sa_v2b(inputs, tr)
    V2B = f"{S}/sa_v2_bias"
    for n in ["W_query", "W_key", "W_value"]:
        save(f"{V2B}/{n}_weight", getattr(sa_v2b, n).weight, "d_out d_in")
        save(f"{V2B}/{n}_bias", getattr(sa_v2b, n).bias, "d_out")
    save_sa_trace(V2B, tr)

    NOTES[S] = """\
inputs = the 6x3 "Your journey starts with one step" embeddings; d_in=3, d_out=2. All cells follow the seed
in order; every printed tensor is checked (see below).
- `weightless/`: `attn_scores_2[i] = dot(inputs[i], inputs[1])`; `attn_scores_2_sumnorm` = `/ sum`;
  `attn_weights_2 = softmax(dim=0)`; `context_vec_2 = sum_i w[i] * inputs[i]`;
  `attn_scores = inputs @ inputs.T` (6x6); `attn_weights = softmax(dim=-1)`; `context_vecs = attn_weights @ inputs`.
- `trainable_x2/`: `torch.manual_seed(123)`; W_query, W_key, W_value = `torch.rand(3, 2)` in that order
  (the same three matrices as `sa_v1/`). `query_2 = x_2 @ W_query` etc. (x_2 = inputs[1]);
  `attn_score_22 = query_2 . key_2` (a 0-d array); `attn_scores_2 = query_2 @ keys.T`;
  `attn_weights_2 = softmax(attn_scores_2 / d_k**0.5)` with d_k = d_out = 2; `context_vec_2 = attn_weights_2 @ values`.
- `sa_v1/`: `torch.manual_seed(123); SelfAttention_v1(3, 2)`; weights in (d_in, d_out) layout (`x @ W`).
- `sa_v2/`: `torch.manual_seed(789); SelfAttention_v2(3, 2)`: the seed's cell uses the default
  **qkv_bias=False**, so there are no biases here (this is what reproduces the printed output). Linear weights in
  PyTorch layout (d_out, d_in): `queries = x @ W_query_weight.T`. Construction order W_query, W_key, W_value.
- `sa_v2_bias/`: extra, not in the seed's printout: `torch.manual_seed(789); SelfAttention_v2(3, 2,
  qkv_bias=True)` (init order per Linear: weight then bias, so W_key/W_value differ from `sa_v2/`).
- Each `sa_*` trace: `queries/keys/values` (token, d_out), `attn_scores` (unscaled q.k),
  `attn_weights` (softmax of scores / sqrt(d_out)), `context`.
- Seed quirk: `attn_score_22 = query_2.dot(key_2)` uses `key_2` although the line above defines `keys_2`;
  the values are identical (keys[1] == key_2), so nothing changes.
"""


def save_sa_trace(prefix, tr):
    save(f"{prefix}/queries", tr["queries"], "q_token d_out")
    save(f"{prefix}/keys", tr["keys"], "k_token d_out")
    save(f"{prefix}/values", tr["values"], "k_token d_out")
    save(f"{prefix}/attn_scores", tr["attn_scores"], "q_token k_token")
    save(f"{prefix}/attn_weights", tr["attn_weights"], "q_token k_token")
    save(f"{prefix}/context", tr["context"], "q_token d_out")


# --------------------------------------------------------------------------
# edge cases for softmax / masking
# --------------------------------------------------------------------------

def edge():
    S = "edge"
    cases = {
        "softmax_large": [1000.0, 2000.0, 3000.0, -1000.0],
        "softmax_near_large": [1000.0, 1001.0, 1002.0, 999.0],
        "softmax_all_neginf": [float("-inf")] * 4,
        "softmax_all_neg1e9": [-1e9] * 4,
        "softmax_partial_neginf": [1.0, float("-inf"), 2.0, float("-inf")],
    }
    for name, row in cases.items():
        t = torch.tensor(row, dtype=torch.float32)
        save(f"{S}/{name}_in", t, "k_posn")
        save(f"{S}/{name}_out", torch.softmax(t, dim=-1), "k_posn")
    # the same rows stacked into one matrix, softmax over the last axis
    m = torch.tensor(list(cases.values()), dtype=torch.float32)
    save(f"{S}/softmax_rows_in", m, "q_posn k_posn")
    save(f"{S}/softmax_rows_out", torch.softmax(m, dim=-1), "q_posn k_posn")
    # a padding mask that masks one query row completely, filled with -inf vs -1e9
    torch.manual_seed(5)
    scores = torch.randn(3, 4)
    mask = torch.tensor([[True, True, False, False], [False, False, False, False], [True, True, True, True]])
    save(f"{S}/masked_scores_in", scores, "q_posn k_posn")
    save(f"{S}/masked_mask", mask, "q_posn k_posn")
    for tag, fill in [("neginf", float("-inf")), ("neg1e9", -1e9)]:
        filled = scores.masked_fill(mask == 0, fill)
        save(f"{S}/masked_{tag}_filled", filled, "q_posn k_posn")
        save(f"{S}/masked_{tag}_softmax", torch.softmax(filled, dim=-1), "q_posn k_posn")

    NOTES[S] = """\
torch.softmax(dim=-1) on float32:
- `softmax_large` [1000, 2000, 3000, -1000] -> [0, 0, 1, 0] (max-subtracted softmax; naive exp overflows).
- `softmax_near_large` [1000, 1001, 1002, 999] -> a non-degenerate distribution (needs max subtraction).
- `softmax_all_neginf`: a row of -inf gives **NaN** in every entry (torch semantics; dimsum may choose
  differently but must document it).
- `softmax_all_neg1e9`: a row of -1e9 gives the uniform 0.25 (seed 003's masking convention).
- `softmax_partial_neginf` [1, -inf, 2, -inf] -> [0.2689, 0, 0.7311, 0].
- `softmax_rows_*`: the five rows above stacked (5, 4).
- `masked_*`: scores = randn(3, 4) under `torch.manual_seed(5)`; mask row 1 is all False.
  `masked_fill(mask == 0, -inf)` then softmax: row 1 is NaN; with -1e9 row 1 is uniform.
"""


# --------------------------------------------------------------------------

def write_manifest():
    lines = ["# dimsum reference fixtures", "",
             "Generated by `tests/reference/make_fixtures.py` (run with `/usr/bin/python3`, torch "
             f"{torch.__version__}, numpy {np.__version__}). Do not edit by hand.", "",
             "All files are `.npy` v1.0, C order, little endian: float32 (`<f4`) unless listed as int64 (`<i8`) "
             "or bool (`|b1`). Dimension names are given outermost first. `(a b)` is one grouped axis of extent "
             "a*b with `a` major; `1` is a singleton axis torch broadcasts; a 0-d array has no names. "
             "PyTorch `nn.Linear` weights are in PyTorch layout (out, in): y = x @ W.T + b.", "",
             "## Files", "", "```"]
    for rel, dt, shape, dims in RECORDS:
        shp = "(" + ",".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
        lines.append(f"{rel} {dt} {shp} {dims}".rstrip())
    lines += ["```", ""]
    lines += ["## Checks against numbers printed in the seeds", "",
              "Printed values are rounded to 4 decimals; a check passes when |ours - printed| <= 5.1e-5.", ""]
    for seed, what, ok, diff in CHECKS:
        lines.append(f"- {seed}: {what}: {'REPRODUCED' if ok else 'NOT REPRODUCED'} (max abs diff {diff:.2e})")
    lines.append("")
    lines += ["## Notes per seed", ""]
    for seed in ["seed000", "seed001", "seed002", "seed003", "seed004", "edge"]:
        lines += [f"### {seed}", "", NOTES[seed].rstrip(), ""]
    with open(os.path.join(OUT, "MANIFEST.md"), "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(lines))


def main():
    if os.path.isdir(OUT):
        for name in ["seed000", "seed001", "seed002", "seed003", "seed004", "edge"]:
            shutil.rmtree(os.path.join(OUT, name), ignore_errors=True)
    os.makedirs(OUT, exist_ok=True)
    seed000()
    seed001()
    seed002()
    seed003()
    seed004()
    edge()
    write_manifest()
    total = sum(os.path.getsize(os.path.join(OUT, r[0])) for r in RECORDS)
    print(f"wrote {len(RECORDS)} fixtures ({total} bytes) to {OUT}")
    bad = [c for c in CHECKS if not c[2]]
    for seed, what, ok, diff in CHECKS:
        print(f"  {'ok  ' if ok else 'FAIL'} {seed}: {what} (max abs diff {diff:.2e})")
    if bad:
        print(f"{len(bad)} printed-value checks FAILED")
        sys.exit(1)


if __name__ == "__main__":
    main()
