"""Generate the HLO modules of the fusion / scheduling tests (tests/fixtures/hlo_pass/).

Each module is the UNOPTIMISED HLO text JAX lowers a small function to
(``jax.jit(f, keep_unused=True).lower(*args).as_text(dialect="hlo")``), exactly as
tests/gen/gen_jax_fixtures.py does; only shapes matter here (the tests make their own
random inputs and compare the evaluator on the module before and after the passes), so no
.npy files are written.

  gelu_tanh.hlo      jax.nn.gelu(approximate=True) on f32[64,768]        -> 1 kernel
  softmax.hlo        softmax over the last dim of f32[8,64,64]           -> 1 kernel
  layernorm.hlo      layer norm over the last dim of f32[64,768], g, b   -> 1 kernel
  moments.hlo        (mean, mean of squares) of f32[64,768]              -> 1 kernel (siblings)
  gpt2_block.hlo     one GPT-2 block, T=64, C=768, 12 heads              -> <= 11 kernels
  gpt2_small.hlo     GPT-2 small forward (12 layers, T=64, vocab 50257)  -> peak bytes figure

The attention is written the way flax writes it: q, k, v stay [T, H, D] and the einsums
carry the head dim as a batch dim ('thd,Thd->htT', 'htT,Thd->thd').

Rerun from the repo root:  .venv/bin/python tests/gen/gen_pass_fixtures.py
"""

import os

os.environ["JAX_PLATFORMS"] = "cpu"

import numpy as np
import jax
import jax.numpy as jnp
from jax import lax

jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_enable_x64", False)
jax.config.update("jax_default_matmul_precision", "highest")

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.normpath(os.path.join(HERE, "..", "fixtures", "hlo_pass"))


def z(*shape, dtype=np.float32):
    return jax.ShapeDtypeStruct(shape, dtype)


def layernorm(x, g, b, eps=1e-5):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) * lax.rsqrt(var + eps) * g + b


def attention(x, w_qkv, b_qkv, w_o, b_o, n_head):
    T, C = x.shape
    hd = C // n_head
    qkv = x @ w_qkv + b_qkv
    q, k, v = jnp.split(qkv, 3, axis=-1)
    q = q.reshape(T, n_head, hd)
    k = k.reshape(T, n_head, hd)
    v = v.reshape(T, n_head, hd)
    att = jnp.einsum("thd,shd->hts", q, k) / np.float32(np.sqrt(hd))
    mask = jnp.tril(jnp.ones((T, T), dtype=bool))
    att = jnp.where(mask[None], att, -jnp.inf)
    att = jax.nn.softmax(att, axis=-1)
    y = jnp.einsum("hts,shd->thd", att, v).reshape(T, C)
    return y @ w_o + b_o


LAYER_KEYS = ["ln1_g", "ln1_b", "attn_w", "attn_b", "proj_w", "proj_b",
              "ln2_g", "ln2_b", "fc_w", "fc_b", "fcproj_w", "fcproj_b"]


def layer_shapes(C):
    return [z(C), z(C), z(C, 3 * C), z(3 * C), z(C, C), z(C),
            z(C), z(C), z(C, 4 * C), z(4 * C), z(4 * C, C), z(C)]


def block(x, p, n_head):
    h = layernorm(x, p["ln1_g"], p["ln1_b"])
    x = x + attention(h, p["attn_w"], p["attn_b"], p["proj_w"], p["proj_b"], n_head)
    h = layernorm(x, p["ln2_g"], p["ln2_b"])
    h = jax.nn.gelu(h @ p["fc_w"] + p["fc_b"], approximate=True)
    return x + h @ p["fcproj_w"] + p["fcproj_b"]


def gpt2_block():
    T, C, H = 64, 768, 12

    def f(x, *w):
        return block(x, dict(zip(LAYER_KEYS, w)), H)

    return f, [z(T, C)] + layer_shapes(C)


def gpt2_small():
    V, P, L, H, C, T = 50257, 1024, 12, 12, 768, 64

    def f(ids, wte, wpe, *rest):
        x = jnp.take(wte, ids, axis=0) + wpe[:T]
        for i in range(L):
            x = block(x, dict(zip(LAYER_KEYS, rest[i * 12:(i + 1) * 12])), H)
        x = layernorm(x, rest[L * 12], rest[L * 12 + 1])
        return x @ wte.T

    args = [z(T, dtype=np.int32), z(V, C), z(P, C)]
    for _ in range(L):
        args += layer_shapes(C)
    return f, args + [z(C), z(C)]


MODULES = {
    "gelu_tanh": lambda: ((lambda x: jax.nn.gelu(x, approximate=True)), [z(64, 768)]),
    "softmax": lambda: ((lambda x: jax.nn.softmax(x, axis=-1)), [z(8, 64, 64)]),
    "layernorm": lambda: (layernorm, [z(64, 768), z(768), z(768)]),
    "moments": lambda: ((lambda x: (jnp.mean(x, -1), jnp.mean(x * x, -1))), [z(64, 768)]),
    "gpt2_block": gpt2_block,
    "gpt2_small": gpt2_small,
}


def hlo_text(lowered):
    try:
        txt = lowered.as_text(dialect="hlo")
    except Exception:
        txt = lowered.compiler_ir("hlo").as_hlo_text()
    if not txt.lstrip().startswith("HloModule"):
        raise RuntimeError("unexpected HLO text:\n" + txt[:500])
    return txt


def main():
    os.makedirs(OUT_DIR, exist_ok=True)
    for name, make in MODULES.items():
        fn, args = make()
        txt = hlo_text(jax.jit(fn, keep_unused=True).lower(*args))
        path = os.path.join(OUT_DIR, name + ".hlo")
        with open(path, "w") as f:
            f.write(txt)
        print(f"{name}: {len(txt.splitlines())} lines -> {os.path.relpath(path)}")


if __name__ == "__main__":
    main()
