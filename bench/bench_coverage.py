#!/usr/bin/env python3
"""bench_coverage.py — the ops that ran on the evaluator before they had kernels, against
XLA:CPU on the same modules: sort/argsort and cumulative ops, top_k, scatters (an embedding
gradient, a segment sum), bf16 and f16 dots (an MLP), jax.random's rbg bits, and a Cholesky
solve (LAPACK on both sides). bench_conv.py's method: JAX lowers each function, XLA runs it
through jax.jit, hlojit runs the same text through build/bench/bench_hlo, best of RUNS calls
for ROUNDS alternating rounds; ratio = XLA ms / hlojit ms (above 1: hlojit faster). Index
operands are computed inside the functions (bench_hlo's random inputs would put scatter
indices out of range).

Usage: bench/bench_coverage.py [--rounds N] [--runs N] [--only SUBSTRING]
       (`make bench-coverage`)
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_conv as bc  # noqa: E402  (jax set up there)

jax, jnp, lax = bc.jax, bc.jnp, bc.lax


def rows():
    r = np.random.default_rng(0)
    a = lambda *s: r.uniform(-1, 1, s).astype(np.float32)   # noqa: E731
    ids = lambda n, hi: (jnp.arange(n, dtype=jnp.int32) * 7919) % hi   # noqa: E731

    def mlp(x, w1, w2, w3, dt):
        x, w1, w2, w3 = (t.astype(dt) for t in (x, w1, w2, w3))
        return (jax.nn.relu(jax.nn.relu(x @ w1) @ w2) @ w3).astype(jnp.float32)

    def chol_solve(a_, b):
        spd = a_ @ a_.T + 256 * jnp.eye(256)
        return jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(spd), b)

    mw = [a(256, 512), a(512, 1024), a(1024, 512), a(512, 10)]
    return [
        ("sort f32[16,1000]", lambda x: jnp.sort(x, axis=-1), [a(16, 1000)]),
        ("argsort f32[16,1000]", lambda x: jnp.argsort(x, axis=-1), [a(16, 1000)]),
        ("sort f32[65536]", lambda x: jnp.sort(x), [a(65536)]),
        ("top_k 10 of f32[64,4096]", lambda x: lax.top_k(x, 10), [a(64, 4096)]),
        ("cumsum+cummax f32[16,1000]", lambda x: (jnp.cumsum(x, axis=1), lax.cummax(x, axis=1)), [a(16, 1000)]),
        ("embedding grad 4096->2048x256", lambda t, g: jnp.zeros_like(t).at[ids(4096, 2048)].add(g),
         [a(2048, 256), a(4096, 256)]),
        ("segment_sum 100000->100", lambda d: jax.ops.segment_sum(d, ids(100000, 100), 100), [a(100000)]),
        ("mlp bf16 256x512x1024x512", lambda *w: mlp(*w, jnp.bfloat16), mw),
        ("mlp f16 256x512x1024x512", lambda *w: mlp(*w, jnp.float16), mw),
        ("rbg bits u32[1024,1024]", lambda s: lax.rng_bit_generator(s, (1024, 1024), dtype=jnp.uint32)[1],
         [np.array([1, 2, 3, 4], np.uint32)]),
        ("cholesky solve 256x256", chol_solve, [a(256, 256), a(256, 8)]),
    ]


def main():
    bc.run_table("bench_coverage", rows(), width=32)


if __name__ == "__main__":
    main()
