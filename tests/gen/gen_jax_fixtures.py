"""Generate JAX reference fixtures for hlojit's tests.

For each small function registered below this script writes, into
tests/fixtures/jax/:

  NAME.hlo       classic XLA HLO text (``HloModule ...`` / ``ENTRY ...``) of the
                 UNOPTIMISED lowered module, i.e.
                 ``jax.jit(f, keep_unused=True).lower(*args).as_text(dialect="hlo")``
                 (falls back to ``lowered.compiler_ir("hlo").as_hlo_text()``).
  NAME.inK.npy   the K-th input, in ENTRY parameter order (deterministic: a
                 numpy default_rng seeded per fixture).
  NAME.outK.npy  the K-th output of running the jitted function on CPU (tuple
                 outputs flattened with jax.tree_util.tree_leaves).
  MANIFEST.txt   ``# jax X.Y.Z`` then one ``NAME nin nout`` line per fixture.

JAX runs on CPU, in float32 (x64 disabled), with
``jax_default_matmul_precision='highest'`` so dots are exact f32.  All stored
arrays use plain numpy dtypes (f32, f16, s32, bool); bf16 values are converted
back to f32 inside the functions so no ml_dtypes dtype ends up in a .npy file.

This script is the only way the fixtures are produced: it first deletes the
fixture files it owns (*.hlo, *.npy, MANIFEST.txt in tests/fixtures/jax/) and
then writes them anew, printing one line per fixture.  Rerun from the repo root:

    .venv/bin/python tests/gen/gen_jax_fixtures.py

(The venv is created with ``python3 -m venv .venv`` and
``.venv/bin/pip install -r tests/requirements.txt``.)
"""

import os

os.environ["JAX_PLATFORMS"] = "cpu"

import glob
import re
import sys
import zlib

import numpy as np
import jax
import jax.numpy as jnp
from jax import lax

jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_enable_x64", False)
jax.config.update("jax_default_matmul_precision", "highest")

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.normpath(os.path.join(HERE, "..", "fixtures", "jax"))

FIXTURES = []  # (name, fn, make_args)


def fixture(name):
    """Register ``fn`` under ``name``; the decorated function is
    ``make_args(rng) -> (fn, [numpy inputs])``."""

    def deco(make):
        FIXTURES.append((name, make))
        return make

    return deco


def f32(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def s32(rng, lo, hi, *shape):
    return rng.integers(lo, hi, size=shape).astype(np.int32)


HI = lax.Precision.HIGHEST

# --------------------------------------------------------------------------
# Elementwise


@fixture("elementwise_chain")
def _(rng):
    def f(x, y):
        a = jnp.exp(x) * y + jnp.tanh(y)
        b = jnp.log1p(jnp.abs(x)) - y / (1.0 + x * x)
        return jnp.maximum(a, b)

    return f, [f32(rng, 4, 6), f32(rng, 4, 6)]


@fixture("elementwise_unary_misc")
def _(rng):
    def f(x):
        ax = jnp.abs(x) + 0.5
        return (
            jnp.sqrt(ax),
            lax.rsqrt(ax),
            jnp.log(ax),
            jnp.expm1(x),
            -x,
            jnp.sign(x),
            jnp.floor(x),
            jnp.ceil(x),
            jnp.round(x),  # half-to-even
            jax.nn.sigmoid(x),
            jnp.power(ax, 1.7),
            jnp.minimum(x, 0.25),
            jnp.sin(x),
            jnp.cos(x),
        )

    x = f32(rng, 3, 8, scale=2.0)
    x[0, :4] = [0.5, 1.5, -2.5, -0.5]  # rounding ties
    return f, [x]


@fixture("broadcast_add")
def _(rng):
    def f(a, b):
        return a + b

    return f, [f32(rng, 4, 1), f32(rng, 1, 5)]


@fixture("compare_select")
def _(rng):
    def f(x, y):
        m = x > y
        return (
            jnp.where(m, x, y * 2.0),
            m,
            jnp.where(x == y, 1.0, 0.0),
            jnp.where((x <= 0.0) | (y >= 0.5), x, 0.0),
            x != y,
        )

    x = f32(rng, 5, 4)
    y = f32(rng, 5, 4)
    y[0] = x[0]
    return f, [x, y]


@fixture("clamp")
def _(rng):
    def f(x, lo):
        return jnp.clip(x, -0.5, 0.75), lax.clamp(lo, x, lo + 1.0)

    return f, [f32(rng, 6, 5, scale=2.0), np.float32(-0.3).reshape(())]


@fixture("convert_dtypes")
def _(rng):
    def f(x, i):
        return (
            x.astype(jnp.int32),  # truncation toward zero
            i.astype(jnp.float32),
            x.astype(jnp.bfloat16).astype(jnp.float32),
            x.astype(jnp.float16),
            (x > 0).astype(jnp.float32),
            i.astype(jnp.bool_),
        )

    x = f32(rng, 4, 6, scale=50.0)
    x[0, :4] = [1.5, -1.5, 2.7, -2.7]
    return f, [x, s32(rng, -1000, 1000, 4, 6)]


@fixture("int_ops")
def _(rng):
    def f(a, b, sh):
        return (
            a + b,
            a * b,  # wraps around
            a - b,
            lax.div(a, b),  # truncating division
            lax.rem(a, b),  # sign of dividend
            jnp.floor_divide(a, b),
            jnp.remainder(a, b),
            a & b,
            a | b,
            a ^ b,
            ~a,
            lax.shift_left(a, sh),
            lax.shift_right_arithmetic(a, sh),
            lax.shift_right_logical(a, sh),
            jnp.maximum(a, b),
            jnp.minimum(a, b),
            jnp.abs(a),
            -a,
        )

    a = s32(rng, -(2**31), 2**31 - 1, 4, 8)
    a[0] = [-7, 7, -7, 7, -1, 0, -2**31, 2**31 - 1]
    b = s32(rng, 1, 100000, 4, 8) * np.where(rng.random((4, 8)) < 0.5, -1, 1).astype(np.int32)
    b[0] = [2, -2, -2, 2, 3, 5, 3, -3]
    sh = s32(rng, 0, 32, 4, 8)
    sh[1, :4] = [32, 33, 40, 31]  # out-of-range shift amounts
    return f, [a, b, sh]


# --------------------------------------------------------------------------
# Reductions


@fixture("reductions")
def _(rng):
    def f(x):
        return (
            jnp.sum(x),
            jnp.sum(x, axis=1),
            jnp.max(x, axis=(0, 2)),
            jnp.min(x, axis=2, keepdims=True),
            jnp.mean(x, axis=0),
            jnp.prod(x[0], axis=-1),
        )

    return f, [f32(rng, 3, 4, 5)]


@fixture("argmax")
def _(rng):
    def f(x):
        return jnp.argmax(x, axis=-1), jnp.argmin(x, axis=0), jnp.max(x, axis=-1)

    x = f32(rng, 5, 7)
    x[2, 1] = x[2, 4] = 9.0  # tie: first index wins
    return f, [x]


@fixture("cumsum")
def _(rng):
    def f(x, i):
        return jnp.cumsum(x, axis=1), jnp.cumsum(i), jnp.cumprod(x[0])

    return f, [f32(rng, 3, 10), s32(rng, -5, 5, 12)]


# --------------------------------------------------------------------------
# Linear algebra


@fixture("matmul_2d")
def _(rng):
    def f(a, b):
        return a @ b

    return f, [f32(rng, 5, 7), f32(rng, 7, 3)]


@fixture("dot_batch_einsum")
def _(rng):
    def f(a, b):
        return jnp.einsum("bij,bjk->bik", a, b, precision=HI)

    return f, [f32(rng, 3, 4, 5), f32(rng, 3, 5, 2)]


@fixture("dot_vec_and_transposed")
def _(rng):
    def f(a, v, w):
        return a @ v, v @ w.T, jnp.einsum("ij,kj->ik", a, w)

    return f, [f32(rng, 4, 6), f32(rng, 6), f32(rng, 3, 6)]


# --------------------------------------------------------------------------
# Data movement


@fixture("transpose_reshape")
def _(rng):
    def f(x):
        y = jnp.transpose(x, (2, 0, 1))
        return y, y.reshape(4, 6), x.reshape(-1), x.T

    return f, [f32(rng, 2, 3, 4)]


@fixture("concat_split")
def _(rng):
    def f(a, b):
        c = jnp.concatenate([a, b, a], axis=1)
        p, q, r = jnp.split(c, [2, 5], axis=1)
        return c, p, q, r, jnp.stack([a, a], axis=0)

    return f, [f32(rng, 3, 2), f32(rng, 3, 4)]


@fixture("slice_strided")
def _(rng):
    def f(x):
        return x[1:4, ::2], x[::-1, 1], x[:, -1]

    return f, [f32(rng, 6, 5)]


@fixture("pad_constant")
def _(rng):
    def f(x):
        return jnp.pad(x, ((1, 2), (0, 3))), jnp.pad(x, ((2, 0), (1, 1)), constant_values=-1.5)

    return f, [f32(rng, 3, 4)]


@fixture("reverse")
def _(rng):
    def f(x):
        return jnp.flip(x, axis=0), jnp.flip(x), jnp.flip(x, axis=-1)

    return f, [f32(rng, 3, 4, 2)]


@fixture("iota")
def _(rng):
    def f(x):
        r = jnp.arange(12, dtype=jnp.int32)
        return r, x + jnp.arange(5, dtype=jnp.float32), jnp.arange(3)[:, None] * jnp.arange(4)[None, :]

    return f, [f32(rng, 2, 5)]


@fixture("sort")
def _(rng):
    def f(x, i):
        return jnp.sort(x, axis=-1), jnp.sort(i), jnp.sort(x, axis=0)

    x = f32(rng, 4, 9)
    x[0, :3] = [0.0, -0.0, 1.0]
    return f, [x, s32(rng, -50, 50, 11)]


# --------------------------------------------------------------------------
# Gather / scatter-ish


@fixture("take_embedding")
def _(rng):
    def f(table, ids):
        return jnp.take(table, ids, axis=0)

    return f, [f32(rng, 10, 4), s32(rng, 0, 10, 2, 6)]


@fixture("take_along_axis")
def _(rng):
    def f(x, idx):
        return jnp.take_along_axis(x, idx, axis=1)

    return f, [f32(rng, 4, 7), s32(rng, 0, 7, 4, 3)]


@fixture("dynamic_slice")
def _(rng):
    def f(x, i, j):
        return lax.dynamic_slice(x, (i, j), (3, 2)), lax.dynamic_slice_in_dim(x, j, 4, axis=1)

    return f, [f32(rng, 6, 7), np.int32(2).reshape(()), np.int32(5).reshape(())]  # j=5 clamps in 2nd


@fixture("dynamic_update_slice")
def _(rng):
    def f(x, u, i):
        return lax.dynamic_update_slice(x, u, (i, jnp.int32(1)))

    return f, [f32(rng, 5, 6), f32(rng, 2, 3), np.int32(2).reshape(())]


# --------------------------------------------------------------------------
# Control flow


@fixture("scan_rnn")
def _(rng):
    def f(h0, xs, w, u):
        def step(h, x):
            h = jnp.tanh(h @ w + x @ u)
            return h, h.sum()

        h, ys = lax.scan(step, h0, xs)
        return h, ys

    return f, [f32(rng, 4), f32(rng, 6, 3), f32(rng, 4, 4, scale=0.5), f32(rng, 3, 4)]


@fixture("scan_cumsum")
def _(rng):
    def f(xs):
        return lax.scan(lambda c, x: (c + x, c + x), jnp.zeros((3,), jnp.float32), xs)

    return f, [f32(rng, 5, 3)]


@fixture("fori_loop")
def _(rng):
    def f(x, n):
        def body(i, acc):
            return acc * 0.5 + jnp.sin(acc) + i.astype(jnp.float32)

        return lax.fori_loop(0, n, body, x)

    return f, [f32(rng, 5), np.int32(7).reshape(())]


@fixture("while_loop")
def _(rng):
    def f(x):
        def cond(c):
            i, v = c
            return (i < 20) & (jnp.sum(v) < 100.0)

        def body(c):
            i, v = c
            return i + 1, v * 1.5 + 1.0

        return lax.while_loop(cond, body, (jnp.int32(0), x))

    return f, [np.abs(f32(rng, 4))]


@fixture("cond")
def _(rng):
    def f(p, x):
        a = lax.cond(p, lambda v: jnp.exp(v), lambda v: -v * 2.0, x)
        b = lax.cond(jnp.sum(x) > 100.0, lambda v: v + 1.0, lambda v: v - 1.0, x)
        return a, b

    return f, [np.bool_(True).reshape(()), f32(rng, 3, 2)]


@fixture("switch")
def _(rng):
    def f(k, x):
        return lax.switch(k, [lambda v: v + 1.0, lambda v: v * v, lambda v: jnp.tanh(v)], x)

    return f, [np.int32(1).reshape(()), f32(rng, 4)]


# --------------------------------------------------------------------------
# NN building blocks


@fixture("softmax")
def _(rng):
    def f(x):
        return jax.nn.softmax(x, axis=-1)

    return f, [f32(rng, 4, 9, scale=3.0)]


@fixture("log_softmax")
def _(rng):
    def f(x):
        return jax.nn.log_softmax(x, axis=-1)

    return f, [f32(rng, 4, 9, scale=3.0)]


def layernorm(x, g, b, eps=1e-5):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) * lax.rsqrt(var + eps) * g + b


@fixture("layernorm")
def _(rng):
    return layernorm, [f32(rng, 5, 16, scale=2.0), f32(rng, 16), f32(rng, 16)]


@fixture("gelu_tanh")
def _(rng):
    return (lambda x: jax.nn.gelu(x, approximate=True)), [f32(rng, 4, 10, scale=2.0)]


@fixture("gelu_erf")
def _(rng):
    return (lambda x: jax.nn.gelu(x, approximate=False)), [f32(rng, 4, 10, scale=2.0)]


def causal_attention(x, w_qkv, b_qkv, w_o, b_o, n_head):
    T, C = x.shape
    hd = C // n_head
    qkv = x @ w_qkv + b_qkv
    q, k, v = jnp.split(qkv, 3, axis=-1)
    q = q.reshape(T, n_head, hd).transpose(1, 0, 2)
    k = k.reshape(T, n_head, hd).transpose(1, 0, 2)
    v = v.reshape(T, n_head, hd).transpose(1, 0, 2)
    att = jnp.einsum("htd,hsd->hts", q, k) / np.float32(np.sqrt(hd))
    mask = jnp.tril(jnp.ones((T, T), dtype=bool))
    att = jnp.where(mask[None], att, -jnp.inf)
    att = jax.nn.softmax(att, axis=-1)
    y = jnp.einsum("hts,hsd->htd", att, v)
    y = y.transpose(1, 0, 2).reshape(T, C)
    return y @ w_o + b_o


@fixture("attention_causal")
def _(rng):
    C = 16

    def f(x, wqkv, bqkv, wo, bo):
        return causal_attention(x, wqkv, bqkv, wo, bo, n_head=2)

    return f, [
        f32(rng, 6, C),
        f32(rng, C, 3 * C, scale=0.3),
        f32(rng, 3 * C, scale=0.1),
        f32(rng, C, C, scale=0.3),
        f32(rng, C, scale=0.1),
    ]


@fixture("attention_mask_large_negative")
def _(rng):
    def f(q, k, v):
        T = q.shape[0]
        s = q @ k.T
        s = jnp.where(jnp.tril(jnp.ones((T, T), jnp.float32)) > 0, s, -1e10)
        return jax.nn.softmax(s, axis=-1) @ v

    return f, [f32(rng, 5, 8), f32(rng, 5, 8), f32(rng, 5, 8)]


# --------------------------------------------------------------------------
# Tiny GPT-2

GPT_CFG = dict(vocab=64, ctx=16, n_layer=2, n_head=2, C=32, T=8)
GPT_LAYER_KEYS = [
    "ln1_g", "ln1_b", "attn_w", "attn_b", "proj_w", "proj_b",
    "ln2_g", "ln2_b", "fc_w", "fc_b", "fcproj_w", "fcproj_b",
]


@fixture("gpt2_tiny")
def _(rng):
    V, P, L, H, C, T = (GPT_CFG[k] for k in ("vocab", "ctx", "n_layer", "n_head", "C", "T"))

    # Inputs (in this order): ids, wte, wpe, then per layer GPT_LAYER_KEYS, then lnf_g, lnf_b.
    def f(ids, wte, wpe, *rest):
        layers = [dict(zip(GPT_LAYER_KEYS, rest[i * 12:(i + 1) * 12])) for i in range(L)]
        lnf_g, lnf_b = rest[L * 12:]
        x = jnp.take(wte, ids, axis=0) + wpe[: ids.shape[0]]
        for p in layers:
            h = layernorm(x, p["ln1_g"], p["ln1_b"])
            x = x + causal_attention(h, p["attn_w"], p["attn_b"], p["proj_w"], p["proj_b"], H)
            h = layernorm(x, p["ln2_g"], p["ln2_b"])
            h = jax.nn.gelu(h @ p["fc_w"] + p["fc_b"], approximate=True)
            x = x + h @ p["fcproj_w"] + p["fcproj_b"]
        x = layernorm(x, lnf_g, lnf_b)
        return x @ wte.T

    args = [s32(rng, 0, V, T), f32(rng, V, C, scale=0.02 * 5), f32(rng, P, C, scale=0.01 * 5)]
    for _l in range(L):
        args += [
            1.0 + f32(rng, C, scale=0.1), f32(rng, C, scale=0.1),
            f32(rng, C, 3 * C, scale=0.1), f32(rng, 3 * C, scale=0.02),
            f32(rng, C, C, scale=0.1), f32(rng, C, scale=0.02),
            1.0 + f32(rng, C, scale=0.1), f32(rng, C, scale=0.1),
            f32(rng, C, 4 * C, scale=0.1), f32(rng, 4 * C, scale=0.02),
            f32(rng, 4 * C, C, scale=0.1), f32(rng, C, scale=0.02),
        ]
    args += [1.0 + f32(rng, C, scale=0.1), f32(rng, C, scale=0.1)]
    return f, args


# --------------------------------------------------------------------------


def hlo_text(lowered):
    try:
        txt = lowered.as_text(dialect="hlo")
    except Exception:  # older / newer API
        txt = lowered.compiler_ir("hlo").as_hlo_text()
    if not txt.lstrip().startswith("HloModule"):
        raise RuntimeError("unexpected HLO text:\n" + txt[:500])
    return txt


def entry_param_count(txt):
    m = re.search(r"^ENTRY [^\n]*\{\n(.*?)^\}", txt, re.S | re.M)
    return len(re.findall(r"\bparameter\(\d+\)", m.group(1)))


def clean(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    for pat in ("*.hlo", "*.npy", "MANIFEST.txt"):
        for p in glob.glob(os.path.join(out_dir, pat)):
            os.remove(p)


def main():
    clean(OUT_DIR)
    names = [n for n, _ in FIXTURES]
    assert len(names) == len(set(names)), "duplicate fixture names"
    manifest = [f"# jax {jax.__version__}"]
    for name, make in FIXTURES:
        rng = np.random.default_rng(zlib.crc32(name.encode()))
        fn, args = make(rng)
        args = [np.asarray(a) for a in args]
        jitted = jax.jit(fn, keep_unused=True)
        txt = hlo_text(jitted.lower(*args))
        nparam = entry_param_count(txt)
        if nparam != len(args):
            raise RuntimeError(f"{name}: ENTRY has {nparam} parameters, {len(args)} inputs")
        outs = [np.asarray(o) for o in jax.tree_util.tree_leaves(jitted(*args))]
        for a in args + outs:
            assert a.dtype in (np.float32, np.float16, np.int32, np.bool_), (name, a.dtype)
        with open(os.path.join(OUT_DIR, name + ".hlo"), "w") as fh:
            fh.write(txt)
        for i, a in enumerate(args):
            np.save(os.path.join(OUT_DIR, f"{name}.in{i}.npy"), a)
        for i, o in enumerate(outs):
            np.save(os.path.join(OUT_DIR, f"{name}.out{i}.npy"), o)
        manifest.append(f"{name} {len(args)} {len(outs)}")
        shapes = lambda xs: " ".join(f"{x.dtype}{list(x.shape)}" for x in xs)
        print(f"{name}: in[{shapes(args)}] -> out[{shapes(outs)}]")
    with open(os.path.join(OUT_DIR, "MANIFEST.txt"), "w") as fh:
        fh.write("\n".join(manifest) + "\n")
    print(f"wrote {len(FIXTURES)} fixtures to {OUT_DIR} (jax {jax.__version__})")


if __name__ == "__main__":
    sys.exit(main())
