"""GPT-2 in plain jax.numpy for training the bundled model (no flax: parameters are a dict).

The parameters use llm.c's names and layouts (tests/reference/gpt2_io.py: wte (Vp, C),
qkvw (L, 3C, C), ... nn.Linear (out, in)), so the trained dict is written as an llm.c
checkpoint as it is, and the C program and the NumPy reference run exactly this model:
learned positions, pre-LN blocks, tanh GELU, causal attention scaled by 1/sqrt(hs), final
layer norm, lm_head tied to wte and restricted to the real vocabulary V (the rows V..Vp-1
of wte start at zero and get no gradient, so AdamW's update and decay of them are zero and
they are zero in the checkpoint, as llm.c writes them).

Training only: residual and attention-probability dropout (|drop| > 0 with a PRNG key);
at inference (drop = 0) this is exactly GPT-2.

    // B batch, T positions, C channels, V vocab, NH heads, hs head size
"""

import math

import jax
import jax.numpy as jnp


def init_params(key, V, Vp, maxT, L, NH, C):
    """GPT-2's init (normal 0.02, residual projections 0.02/sqrt(2L), zero biases)."""
    del NH
    ks = iter(jax.random.split(key, 8))
    n = lambda shape, std: jax.random.normal(next(ks), shape, jnp.float32) * std  # noqa
    proj = 0.02 / math.sqrt(2 * L)
    wte = n((Vp, C), 0.02).at[V:].set(0.0)
    z = lambda *s: jnp.zeros(s, jnp.float32)  # noqa
    o = lambda *s: jnp.ones(s, jnp.float32)  # noqa
    return {"wte": wte, "wpe": n((maxT, C), 0.01), "ln1w": o(L, C), "ln1b": z(L, C),
            "qkvw": n((L, 3 * C, C), 0.02), "qkvb": z(L, 3 * C),
            "attprojw": n((L, C, C), proj), "attprojb": z(L, C),
            "ln2w": o(L, C), "ln2b": z(L, C), "fcw": n((L, 4 * C, C), 0.02), "fcb": z(L, 4 * C),
            "fcprojw": n((L, C, 4 * C), proj), "fcprojb": z(L, C), "lnfw": o(C), "lnfb": z(C)}


def decay_mask(params):
    """Weight decay on the matrices only (not biases, norms or the position table)."""
    return {k: k in ("wte", "qkvw", "attprojw", "fcw", "fcprojw") for k in params}


def _ln(x, w, b):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + 1e-5) * w + b


def _gelu(x):
    return 0.5 * x * (1.0 + jnp.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _dropout(x, rate, key):
    if rate == 0.0 or key is None:
        return x
    keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)
    return jnp.where(keep, x / (1.0 - rate), 0.0)


def logits_fn(p, ids, V, NH, drop=0.0, key=None):
    """(B, T) ids -> (B, T, V) logits."""
    B, T = ids.shape
    C = p["wte"].shape[1]
    hs = C // NH
    keys = list(jax.random.split(key, 1 + 3 * p["qkvw"].shape[0])) if key is not None else None
    nk = (lambda: keys.pop()) if keys else (lambda: None)  # noqa
    x = _dropout(p["wte"][ids] + p["wpe"][:T], drop, nk())          # (B, T, C)
    mask = jnp.tril(jnp.ones((T, T), bool))
    for l in range(p["qkvw"].shape[0]):
        h = _ln(x, p["ln1w"][l], p["ln1b"][l])
        qkv = h @ p["qkvw"][l].T + p["qkvb"][l]                      # (B, T, 3C)
        q, k, v = (a.reshape(B, T, NH, hs).transpose(0, 2, 1, 3)
                   for a in jnp.split(qkv, 3, axis=-1))              # (B, NH, T, hs)
        att = (q @ k.transpose(0, 1, 3, 2)) / math.sqrt(hs)          # (B, NH, T, T)
        att = jax.nn.softmax(jnp.where(mask, att, -jnp.inf), axis=-1)
        att = _dropout(att, drop, nk())
        y = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
        x = x + _dropout(y @ p["attprojw"][l].T + p["attprojb"][l], drop, nk())
        h = _ln(x, p["ln2w"][l], p["ln2b"][l])
        f = _gelu(h @ p["fcw"][l].T + p["fcb"][l])                   # (B, T, 4C)
        x = x + _dropout(f @ p["fcprojw"][l].T + p["fcprojb"][l], drop, nk())
    x = _ln(x, p["lnfw"], p["lnfb"])
    return x @ p["wte"][:V].T                                        # (B, T, V)


def loss_fn(p, x, y, V, NH, drop=0.0, key=None):
    """Mean cross-entropy (nats per token) of targets |y| given inputs |x|, both (B, T)."""
    logits = logits_fn(p, x, V, NH, drop, key)
    lse = jax.nn.logsumexp(logits, axis=-1)
    tgt = jnp.take_along_axis(logits, y[..., None], axis=-1)[..., 0]
    return jnp.mean(lse - tgt)
