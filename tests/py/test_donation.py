"""Donation (input_output_alias) with JAX as the outside client, and the tool's --profile.

JAX lowers `jax.jit(f, donate_argnums=...)` to HLO text whose module header carries
`input_output_alias={ {0}: (0, {}, may-alias), ... }`. For a KV-cache decode step (two
donated caches updated by dynamic-update-slice, attention over the updated caches) and a
few smaller functions:
  - `hlojit print` keeps the alias exactly as JAX wrote it, and XLA's own parser (jaxlib)
    reads our text back with the same alias config;
  - `hlojit run` (CPU backend and evaluator) gives JAX's outputs, which also equal a NumPy
    formulation of the step; on the CPU backend the caches are updated in place
    (`--stats`: dus=2, copies=0), and `--runs 3` carries the donated state over runs;
  - `--profile` prints one line per thunk, slowest first, and the compile times;
    HLOJIT_PROFILE=1 prints the report when the executable goes.
"""
import os
import re
import subprocess

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.environ.get("HLOJIT_TOOL") or os.path.join(ROOT, "build", "hlojit")

jax = pytest.importorskip("jax")
jnp = jax.numpy
lax = jax.lax
hlo = pytest.importorskip("jaxlib._hlo")

jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_default_matmul_precision", "highest")

T, C = 32, 16


def decode_step(ck, cv, x, wq, wk, wv, pos):
    q, k, v = x @ wq, x @ wk, x @ wv                       # (1, C)
    ck = lax.dynamic_update_slice(ck, k, (pos, 0))
    cv = lax.dynamic_update_slice(cv, v, (pos, 0))
    s = (q @ ck.T) / np.float32(np.sqrt(C))                 # (1, T)
    s = jnp.where(jnp.arange(T)[None, :] <= pos, s, -jnp.inf)
    y = jax.nn.softmax(s, axis=-1) @ cv                     # (1, C)
    return ck, cv, y


def decode_numpy(ck, cv, x, wq, wk, wv, pos):
    x64 = x.astype(np.float64)
    q, k, v = x64 @ wq, x64 @ wk, x64 @ wv
    ck, cv = ck.astype(np.float64).copy(), cv.astype(np.float64).copy()
    ck[pos], cv[pos] = k[0], v[0]
    s = (q @ ck.T) / np.sqrt(C)
    s[:, pos + 1:] = -np.inf
    p = np.exp(s - s.max())
    p /= p.sum()
    return ck, cv, p @ cv


def decode_args(rng, pos):
    f = lambda *s: rng.standard_normal(s).astype(np.float32) * 0.5
    return [f(T, C), f(T, C), f(1, C), f(C, C), f(C, C), f(C, C), np.int32(pos)]


CASES = {
    "decode": (decode_step, (0, 1), lambda rng: decode_args(rng, 5)),
    "axpy": (lambda x, d: x * np.float32(0.5) + d, (0,),
             lambda rng: [rng.standard_normal(64).astype(np.float32) for _ in range(2)]),
    "late_read": (lambda c, u: (lax.dynamic_update_slice(c, u, (3,)), c.sum()), (0,),
                  lambda rng: [rng.standard_normal(16).astype(np.float32),
                               rng.standard_normal(2).astype(np.float32)]),
}


def lowered(name):
    fn, donate, make = CASES[name]
    args = make(np.random.default_rng(len(name)))
    jitted = jax.jit(fn, donate_argnums=donate)
    text = jitted.lower(*args).as_text(dialect="hlo")
    want = [np.asarray(o) for o in jax.tree_util.tree_leaves(jax.jit(fn)(*args))]
    return text, args, want


def alias_of(text):
    m = re.search(r"input_output_alias=\{ (.*?) \}", text.splitlines()[0])
    return m.group(1) if m else None


@pytest.fixture(scope="module")
def tool():
    if not os.access(TOOL, os.X_OK):
        pytest.skip("build/hlojit not built (run make)")
    return TOOL


def write_case(tmp_path, name):
    text, args, want = lowered(name)
    path = tmp_path / f"{name}.hlo"
    path.write_text(text)
    ins = []
    for i, a in enumerate(args):
        p = tmp_path / f"{name}.in{i}.npy"
        np.save(p, np.asarray(a))
        ins += ["--input", str(p)]
    return text, path, ins, want


@pytest.mark.parametrize("name", sorted(CASES))
def test_print_keeps_alias_and_xla_reads_it(tool, tmp_path, name):
    text, path, _, _ = write_case(tmp_path, name)
    assert alias_of(text), "JAX wrote no input_output_alias"
    r = subprocess.run([tool, "print", str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert alias_of(r.stdout) == alias_of(text)
    opts = hlo.HloPrintOptions.short_parsable()
    theirs = hlo.hlo_module_from_text(text).to_string(opts)
    ours = hlo.hlo_module_from_text(r.stdout).to_string(opts)
    assert alias_of(ours) == alias_of(theirs) == alias_of(text)


@pytest.mark.parametrize("backend", ["cpu", "interp"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_run_equals_jax(tool, tmp_path, name, backend):
    _, path, ins, want = write_case(tmp_path, name)
    out = tmp_path / "out"
    r = subprocess.run([tool, "run", str(path), "--backend", backend, "--out", str(out), "--stats"] + ins,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    for k, w in enumerate(want):
        got = np.load(out / f"out{k}.npy")
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)
    if backend == "cpu" and name == "decode":
        stats = r.stderr
        assert "dus=2" in stats and "copies=0" in stats, stats
    if backend == "cpu" and name == "late_read":
        assert "copies=1" in r.stderr or "dus=1" in r.stderr, r.stderr


def test_decode_equals_numpy():
    _, args, want = lowered("decode")
    ref = decode_numpy(*args)
    for w, n in zip(want, ref):
        np.testing.assert_allclose(w, n, rtol=1e-5, atol=1e-6)


def test_runs_carry_donated_state(tool, tmp_path):
    path = tmp_path / "inc.hlo"
    path.write_text("HloModule inc, input_output_alias={ {}: (0, {}, may-alias) }\n"
                    "ENTRY main {\n  x = f32[8] parameter(0)\n  one = f32[] constant(1)\n"
                    "  b = f32[8] broadcast(one), dimensions={}\n  ROOT y = f32[8] add(x, b)\n}\n")
    x = np.arange(8, dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    for backend in ("cpu", "interp"):
        r = subprocess.run([tool, "run", str(path), "--backend", backend, "--input", str(tmp_path / "x.npy"),
                            "--runs", "3", "--out", str(tmp_path / backend)], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        np.testing.assert_array_equal(np.load(tmp_path / backend / "out0.npy"), x + 3)
    r = subprocess.run([tool, "run", str(path), "--random-inputs", "1", "--runs", "0"], capture_output=True,
                       text=True)
    assert r.returncode == 1 and "--runs: bad count '0'" in r.stderr


def test_profile(tool, tmp_path):
    _, path, ins, _ = write_case(tmp_path, "decode")
    r = subprocess.run([tool, "run", str(path), "--backend", "cpu", "--profile", "--runs", "4"] + ins,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    head = [i for i, l in enumerate(lines) if l.startswith("profile of")]
    assert head, r.stderr
    assert "4 runs" in lines[head[0]]
    rows = []
    for l in lines[head[0] + 2:]:
        if l.startswith("compile:"):
            break
        rows.append(l.split())
    assert rows, r.stderr
    ms = [float(row[0]) for row in rows]
    assert ms == sorted(ms, reverse=True)
    # columns: ms share calls GB/s GFLOP/s bytes(number unit) flops kind instruction [kernel]
    kinds = {row[8] for row in rows}
    assert {"matmul", "dus"} <= kinds, kinds
    assert any(l.startswith("compile:") for l in lines)
    # an in-place dus moves the update (C floats read, C written) and its indices, not the
    # T x C cache
    dus = [row for row in rows if row[8] == "dus"]
    assert len(dus) == 2 and all(row[6] == "B" and float(row[5]) < T * C * 4 / 4 for row in dus), dus
    env = dict(os.environ, HLOJIT_PROFILE="1")
    r = subprocess.run([tool, "run", str(path), "--backend", "cpu"] + ins, capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode == 0 and "profile of 'jit_decode_step'" in r.stderr, r.stderr
