"""jaxcase.py — one JAX function against hlojit: lower it with JAX, run the module through
`hlojit run --backend $HLOJIT_BACKEND` (or the GPU emulator, through HLOJIT_BIN), compare every
output with what JAX computed. Shared by test_conv_jax.py and test_coverage_jax.py.

run_case(name, f, args, taps): tolerances are test_conv_jax.py's (its docstring says why):
f32 |got - want| <= 1e-4 |want| + 1e-5 sqrt(taps), bf16/f16 one unit of their precision
relative, integers and booleans exactly; exact=True asks every output to be bit-equal
(sorts, permutations, scatters that apply their updates in XLA's order). On the evaluator
run (unless printed=False), `hlojit print`'s text must also be read by XLA's parser and mean the same; on a
compiling backend the module must run with 0 evaluator fallbacks (`--stats`).
HLOJIT_DRYRUN=1 writes the modules without running them (tools/ptx_check.py).
"""

import os
import re
import subprocess

import numpy as np

import opcases
from conftest import BACKEND, HLOJIT

import jax  # noqa: E402  (the callers importorskip it first)

BF16 = opcases.BF16


def rand(shape, dtype, seed):
    r = np.random.default_rng(seed)
    if np.dtype(dtype).kind in "iu":
        return r.integers(-4, 5, size=shape).astype(dtype)
    return r.uniform(-1, 1, size=shape).astype(np.float32).astype(dtype)


def run_case(name, f, args, taps=9, exact=False, printed=True):
    """Lowers f(*args) with JAX, runs it through hlojit and compares every output; |name|
    names the case's directory under opcases.case_dir."""
    hlo = jax.jit(f).lower(*args).as_text(dialect="hlo")
    want = jax.jit(f)(*args)
    want = jax.tree_util.tree_leaves(want)
    want = [np.asarray(w) for w in want]
    d = opcases.case_dir(name)
    mod = os.path.join(d, "mod.hlo")
    with open(mod, "w") as fh:
        fh.write(hlo)
    cmd = [opcases.BIN, "run", mod, "--backend", BACKEND, "--out", d, "--stats"]
    for i, a in enumerate(args):
        p = os.path.join(d, "in%d.npy" % i)
        np.save(p, opcases.to_disk(np.ascontiguousarray(np.asarray(a))))
        cmd += ["--input", p]
    if os.environ.get("HLOJIT_DRYRUN"):   # tools/ptx_check.py: the module is all it wants
        return
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, "%s\n%s%s\n%s" % (" ".join(cmd), r.stdout, r.stderr, hlo)
    if BACKEND == "interp" and printed:
        check_printed(mod, hlo)
    if BACKEND != "interp":
        m = re.search(r"evaluator_fallbacks=(\d+)", r.stderr)
        assert m and m.group(1) == "0", "evaluator fallbacks on %s:\n%s" % (BACKEND, r.stderr)
    errs = []
    for k, w in enumerate(want):
        g = opcases.from_disk(np.load(os.path.join(d, "out%d.npy" % k)))
        if g.shape != w.shape or g.dtype != w.dtype:
            errs.append("out%d: got %s%s, want %s%s" % (k, g.dtype, g.shape, w.dtype, w.shape))
            continue
        if w.dtype.kind in "biu" or exact:
            if exact and w.dtype.kind not in "biu":   # floats (bf16 is kind V): their bits
                g, w = g.view(np.dtype("u%d" % w.dtype.itemsize)), w.view(np.dtype("u%d" % w.dtype.itemsize))
            bad = int(np.count_nonzero(g != w))
            if bad:
                errs.append("out%d: %d of %d differ" % (k, bad, w.size))
            continue
        rtol = {np.dtype(np.float32): 1e-4, np.dtype(np.float64): 1e-4, np.dtype(np.float16): 2.0 ** -10,
                BF16: 2.0 ** -7}[w.dtype]
        atol = 1e-5 * np.sqrt(taps) if w.dtype.itemsize >= 4 else 2 * rtol * np.sqrt(taps)
        gf, wf = g.astype(np.float64), w.astype(np.float64)
        err = np.abs(gf - wf)
        bad = err > atol + rtol * np.abs(wf)
        if bad.any():
            i = np.unravel_index(int(np.argmax(err)), w.shape)
            errs.append("out%d: %d of %d beyond tolerance; worst at %s: got %r want %r"
                        % (k, int(bad.sum()), w.size, i, gf[i], wf[i]))
    assert not errs, "case %s (dir %s)\n%s\n--- module ---\n%s" % (name, d, "\n".join(errs), hlo)
    opcases.remove_case_dir(name)


def check_printed(mod, hlo):
    """`hlojit print` of the module is read by XLA's own parser and means the same."""
    import test_print_xla as px
    if not hasattr(px.hlo, "hlo_module_from_text"):
        return
    r = subprocess.run([str(HLOJIT), "print", mod], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert px._canonical(r.stdout) == px._canonical(hlo), "printed:\n%s\noriginal:\n%s" % (r.stdout, hlo)
