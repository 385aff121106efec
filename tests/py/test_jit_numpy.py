"""The tracing JIT against NumPy on unpadded data, for every length 1..1000 of a dynamic dim.

build/tests/jit_sweep (tests/jit/jit_sweep.c) runs each function through hj_jit_call on the
CPU backend for n = 1..1000 and writes every call's inputs and outputs; here NumPy recomputes
each output from the inputs at their real length (no padding anywhere) in float64 and the
JIT's result must agree within 1e-5 relative (max |error| over max |reference| of the
output, llm.c's check). The statistics line says how many compiles the sweep took: at most
11 per function (buckets 1, 2, 4, ..., 512, 1000) and none at exact sizes. The decode case is
500 steps of a KV-cache update at a runtime position with attention over the first pos + 1
rows: one compile for all of them. The block case is a small GPT-2 block (layer norms,
causal attention, MLP) that writes its keys into a KV cache, for every prompt length 1..512
(a bucketed prefill).
"""

import re
import subprocess

import numpy as np
import pytest

from conftest import BUILD

SWEEP = BUILD / "tests" / "jit_sweep"
N = 1000
RTOL = 1e-5


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def f_softmax(n, x):
    return [softmax(x)]


def f_meanvar(n, x):
    return [x.mean(axis=0), x.var(axis=0)]


def f_matmul(n, a, b):
    return [a @ b]


def f_attention(n, q, k, v):
    s = (q @ k.T) * 0.5
    s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    return [softmax(s) @ v]


def f_gather(n, table, idx):
    return [np.take(table, idx, axis=0, mode="clip")]


def f_concat(n, a, b, c):
    return [np.concatenate([a, b, c], axis=0)]


def f_cumsum(n, x):
    return [np.cumsum(x, axis=1)]


def layer_norm(x, g, b):
    m = x.mean(-1, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5) * g + b


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def f_block(n, x, g1, b1, wqkv, bqkv, wp, bp, g2, b2, wfc, bfc, wfp, bfp, cache):
    qkv = layer_norm(x, g1, b1) @ wqkv + bqkv
    q, k, v = (qkv[:, 16 * i:16 * (i + 1)].reshape(n, 2, 8).transpose(1, 0, 2) for i in range(3))
    att = q @ k.transpose(0, 2, 1) / np.sqrt(8.0)
    att = softmax(np.where(np.tril(np.ones((n, n), bool)), att, -np.inf))
    y = (att @ v).transpose(1, 0, 2).reshape(n, 16)
    x1 = x + y @ wp + bp
    out = x1 + gelu_tanh(layer_norm(x1, g2, b2) @ wfc + bfc) @ wfp + bfp
    new_cache = cache.copy()
    new_cache[:n] = qkv[:, 16:32]
    return [out, new_cache]


BLOCK_IN = [(16,), (16,), (16, 48), (48,), (16, 16), (16,), (16,), (16,), (16, 64), (64,), (64, 16), (16,), (512, 16)]

# name -> (reference, input shapes and dtypes at n, output shapes at n)
FUNCS = {
    "softmax": (f_softmax, lambda n: [((2, n), "f4")], lambda n: [(2, n)]),
    "meanvar": (f_meanvar, lambda n: [((n, 3), "f4")], lambda n: [(3,), (3,)]),
    "matmul": (f_matmul, lambda n: [((2, n), "f4"), ((n, 3), "f4")], lambda n: [(2, 3)]),
    "attention": (f_attention, lambda n: [((n, 4), "f4")] * 3, lambda n: [(n, 4)]),
    "gather": (f_gather, lambda n: [((n, 3), "f4"), ((n,), "i4")], lambda n: [(n, 3)]),
    "concat": (f_concat, lambda n: [((n, 2), "f4"), ((3, 2), "f4"), ((n, 2), "f4")], lambda n: [(2 * n + 3, 2)]),
    "cumsum": (f_cumsum, lambda n: [((2, n), "f4")], lambda n: [(2, n)]),
    "block": (f_block, lambda n: [((n, 16), "f4")] + [(s, "f4") for s in BLOCK_IN], lambda n: [(n, 16), (512, 16)]),
}
LENGTHS = {"block": 512}   # its KV cache holds 512 rows


def run_sweep(name, n, tmp_path):
    if not SWEEP.exists():
        pytest.fail(f"{SWEEP} is missing: run `make {SWEEP.relative_to(BUILD.parent)}`")
    out = tmp_path / f"{name}.bin"
    r = subprocess.run([str(SWEEP), name, str(n), str(out)], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    m = re.search(r"stats calls=(\d+) compiles=(\d+) memory_hits=(\d+) exact_compiles=(\d+)", r.stdout)
    assert m, r.stdout
    calls, compiles, hits, exact = map(int, m.groups())
    return out.read_bytes(), calls, compiles, hits, exact, r.stdout


class Reader:
    def __init__(self, data):
        self.data, self.at = data, 0

    def take(self, shape, dtype):
        a = np.frombuffer(self.data, dtype=dtype, count=int(np.prod(shape)), offset=self.at).reshape(shape)
        self.at += a.nbytes
        return a

    def done(self):
        return self.at == len(self.data)


def rel_err(got, want):
    scale = max(float(np.max(np.abs(want))), 1e-30) if want.size else 1.0
    return float(np.max(np.abs(got.astype(np.float64) - want))) / scale if want.size else 0.0


@pytest.mark.parametrize("name", list(FUNCS))
def test_every_length_equals_numpy(name, tmp_path):
    ref, ins, outs = FUNCS[name]
    top = LENGTHS.get(name, N)
    data, calls, compiles, hits, exact, text = run_sweep(name, top, tmp_path)
    assert calls == top
    assert compiles <= 11, f"{name}: {compiles} compiles for lengths 1..{top}: {text}"
    assert exact == 0, f"{name}: compiled at exact sizes (padding declined): {text}"
    assert hits == top - compiles
    rd = Reader(data)
    worst = (0.0, 0)
    for n in range(1, top + 1):
        args = [rd.take(s, dt) for s, dt in ins(n)]
        got = [rd.take(s, "f4") for s in outs(n)]
        want = ref(n, *[a.astype(np.float64) if a.dtype.kind == "f" else a for a in args])
        for k, (g, w) in enumerate(zip(got, want)):
            assert g.shape == w.shape, f"{name} n={n} output {k}: shape {g.shape}, NumPy {w.shape}"
            assert np.all(np.isfinite(g)), f"{name} n={n} output {k}: not finite"
            e = rel_err(g, w)
            worst = max(worst, (e, n))
            assert e <= RTOL, f"{name} n={n} output {k}: relative error {e:.3g} > {RTOL}"
    assert rd.done(), "the driver wrote more than the test read"
    print(f"{name}: {compiles} compiles for n = 1..{top}, worst relative error {worst[0]:.2e} at n={worst[1]}")


def test_decode_one_compile(tmp_path):
    steps, L, C = 500, 512, 8
    data, calls, compiles, hits, exact, text = run_sweep("decode", steps, tmp_path)
    assert (calls, compiles, hits) == (steps, 1, steps - 1), text
    rd = Reader(data)
    K = np.zeros((L, C))
    V = np.zeros((L, C))
    for step in range(steps):
        x = rd.take((1, C), "f4").astype(np.float64)
        pos = int(rd.take((), "i4"))
        y = rd.take((1, C), "f4")
        assert pos == step
        K[pos], V[pos] = np.tanh(x[0]), np.sin(x[0])
        s = (x @ K[: pos + 1].T) / np.sqrt(C)
        want = softmax(s) @ V[: pos + 1]
        e = rel_err(y, want)
        assert e <= RTOL, f"decode step {step}: relative error {e:.3g}"
    assert rd.done()
