"""np_gpt2.py — a small NumPy GPT-2 for tests/gpt2/test_gpt2_gen.py, used only while the
project's reference (tests/reference/gpt2.py) is not in the tree; the test prefers that one.

It writes the same verify folder as the reference and as `build/gpt2 --verify DIR`:
    DIR/ids.npy              int32 (P + N,) prompt and generated ids
    DIR/step_K/emb.npy       float32 (n_K, C)   wte[id] + wpe[pos] of the positions fed
    DIR/step_K/res_L.npy     float32 (n_K, C)   the residual stream after block L
    DIR/step_K/logits.npy    float32 (V,)       logits of the step's last position
(step 0 = the prompt, n_0 = P; step K >= 1 feeds the token chosen at step K - 1, n_K = 1).
Every step recomputes the whole sequence from position 0 (no cache: a different route to
the same numbers than the C program's KV cache), in float64 unless told otherwise.
Greedy only (argmax, ties to the lowest id); stops after N tokens, after choosing |eot|,
or after the step that fed position maxT - 1. Reads llm.c checkpoints (versions 3 and 5).
"""
import pathlib

import ml_dtypes
import numpy as np

ORDER = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb", "ln2w", "ln2b",
         "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"]


def load_llmc(path):
    raw = pathlib.Path(path).read_bytes()
    h = np.frombuffer(raw[:1024], "<i4")
    assert h[0] == 20240326 and h[1] in (3, 5), "not an llm.c checkpoint"
    maxT, V, L, NH, C, Vp = (int(x) for x in h[2:8])
    cfg = dict(maxT=maxT, V=V, L=L, NH=NH, C=C, Vp=Vp)
    shapes = {"wte": (Vp, C), "wpe": (maxT, C), "ln1w": (L, C), "ln1b": (L, C),
              "qkvw": (L, 3 * C, C), "qkvb": (L, 3 * C), "attprojw": (L, C, C),
              "attprojb": (L, C), "ln2w": (L, C), "ln2b": (L, C), "fcw": (L, 4 * C, C),
              "fcb": (L, 4 * C), "fcprojw": (L, C, 4 * C), "fcprojb": (L, C), "lnfw": (C,),
              "lnfb": (C,)}
    dt = np.dtype("<f4") if h[1] == 3 else np.dtype(ml_dtypes.bfloat16)
    p, at = {}, 1024
    for k in ORDER:
        n = int(np.prod(shapes[k]))
        p[k] = np.frombuffer(raw, dt, n, at).reshape(shapes[k]).astype(np.float64)
        at += n * dt.itemsize
    assert at == len(raw), "size mismatch"
    return cfg, p


def _ln(x, w, b):
    mu = x.mean(-1, keepdims=True)
    xc = x - mu
    return xc / np.sqrt((xc * xc).mean(-1, keepdims=True) + 1e-5) * w + b


def _gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def forward(cfg, p, ids, dtype=np.float64):
    """emb (T, C), [res_l (T, C)], logits (T, V) of the whole sequence |ids|."""
    w = {k: v.astype(dtype) for k, v in p.items()}
    T, C, NH = len(ids), cfg["C"], cfg["NH"]
    hs = C // NH
    x = w["wte"][ids] + w["wpe"][:T]
    emb, res = x.copy(), []
    mask = np.tril(np.ones((T, T), bool))
    for l in range(cfg["L"]):
        qkv = _ln(x, w["ln1w"][l], w["ln1b"][l]) @ w["qkvw"][l].T + w["qkvb"][l]
        q, k, v = (qkv[:, i * C:(i + 1) * C].reshape(T, NH, hs).transpose(1, 0, 2)
                   for i in range(3))
        a = np.where(mask, q @ k.transpose(0, 2, 1) / np.sqrt(hs), -np.inf)
        a = np.exp(a - a.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        y = (a @ v).transpose(1, 0, 2).reshape(T, C)
        x = x + y @ w["attprojw"][l].T + w["attprojb"][l]
        f = _gelu(_ln(x, w["ln2w"][l], w["ln2b"][l]) @ w["fcw"][l].T + w["fcb"][l])
        x = x + f @ w["fcprojw"][l].T + w["fcprojb"][l]
        res.append(x.copy())
    logits = _ln(x, w["lnfw"], w["lnfb"]) @ w["wte"][:cfg["V"]].T
    return emb, res, logits


def generate_verify(model, prompt, n_tokens, out, eot=None):
    """Greedy generation from |prompt| writing the verify folder |out|; returns the ids."""
    cfg, p = load_llmc(model)
    eot = cfg["V"] - 1 if eot is None else eot
    out = pathlib.Path(out)
    ids = list(prompt)
    for k in range(n_tokens):
        emb, res, logits = forward(cfg, p, ids)
        rows = slice(0, len(ids)) if k == 0 else slice(len(ids) - 1, len(ids))
        d = out / f"step_{k}"
        d.mkdir(parents=True, exist_ok=True)
        np.save(d / "emb.npy", emb[rows].astype("<f4"))
        for l, r in enumerate(res):
            np.save(d / f"res_{l}.npy", r[rows].astype("<f4"))
        np.save(d / "logits.npy", logits[-1].astype("<f4"))
        nxt = int(np.argmax(logits[-1]))
        ids.append(nxt)
        if nxt == eot or len(ids) - 1 == cfg["maxT"]:
            break
    np.save(out / "ids.npy", np.asarray(ids, "<i4"))
    return ids
