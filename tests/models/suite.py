#!/usr/bin/env python3
"""suite.py — runs the suite of real JAX programs (programs.py) through hlojit and prints its
table; test_models.py runs the same, one pytest case per program.

For each program: JAX lowers it (jax.jit(f, keep_unused=True).lower(...), the HLO text JAX
would hand XLA), runs it on its CPU (XLA:CPU: the reference), and writes DIR/NAME/ with
mod.hlo, inK.npy (the flattened inputs, in the entry's parameter order) and the reference
outputs; then `hlojit run --backend B --stats` runs the module on each backend and every
output leaf is compared: max |got - want| / max(1, max |want|) <= the program's tolerance
(programs.py says why each is what it is), integers and booleans exactly, NaNs where JAX has
them. A compiling backend must also report evaluator_fallbacks=0.

Usage: tests/models/suite.py [--backends interp,cpu] [--out DIR] [NAME ...]
  (HLOJIT_BIN: the hlojit to run, e.g. the GPU emulator's tests/cuda_emu_run)
Prints one line per program and backend: status, max relative error, fallbacks, and the
refusal message for programs that do not run."""

import argparse
import hashlib
import os
import re
import subprocess
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np  # noqa: E402
import ml_dtypes  # noqa: E402

import jax  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import programs  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BF16 = np.dtype(ml_dtypes.bfloat16)


def hlojit_bin():
    return os.environ.get("HLOJIT_BIN") or os.path.join(ROOT, "build", "hlojit")


def to_disk(a):
    a = np.array(a, order="C")   # not ascontiguousarray: it makes a 0-d array 1-d
    return a.view("V2") if a.dtype == BF16 else a


def from_disk(a):
    return a.view(BF16) if a.dtype.kind == "V" and a.dtype.itemsize == 2 else a


def _stamp(name):
    """What a case directory was made from: programs.py, jax's version, the program."""
    with open(programs.__file__, "rb") as fh:
        src = fh.read()
    return hashlib.sha256(src + ("%s %s" % (jax.__version__, name)).encode()).hexdigest()


CACHE = os.environ.get("HLOJIT_MODELS_CACHE") or os.path.join(ROOT, "build", "models-cache")


def prepare(name, out_dir=None):
    """Lowers program |name|, runs it in JAX, writes its case directory under |out_dir|
    (default CACHE); returns it with the number of inputs, the reference outputs and the
    tolerance. A directory made from the same programs.py and jax (its stamp) is reused:
    `make test` runs the suite on three backends and through ptxas, and JAX's part (flax's
    init, lowering, XLA's run) need not be paid each time."""
    d = os.path.join(out_dir or CACHE, name)
    stamp = os.path.join(d, "stamp.txt")
    if os.path.exists(stamp) and open(stamp).read().split()[0] == _stamp(name):
        meta = open(stamp).read().split()
        nin, nout, tol = int(meta[1]), int(meta[2]), float(meta[3])
        want = [from_disk(np.load(os.path.join(d, "want%d.npy" % k))) for k in range(nout)]
        return d, nin, want, tol
    f, args, tol = programs.PROGRAMS[name]()
    os.makedirs(d, exist_ok=True)
    jf = jax.jit(f, keep_unused=True)
    hlo = jf.lower(*args).as_text(dialect="hlo")
    with open(os.path.join(d, "mod.hlo"), "w") as fh:
        fh.write(hlo)
    ins = jax.tree_util.tree_leaves(args)
    for i, a in enumerate(ins):
        np.save(os.path.join(d, "in%d.npy" % i), to_disk(a))
    want = [np.asarray(w) for w in jax.tree_util.tree_leaves(jf(*args))]
    for k, w in enumerate(want):
        np.save(os.path.join(d, "want%d.npy" % k), to_disk(w))
    with open(stamp, "w") as fh:
        fh.write("%s %d %d %r\n" % (_stamp(name), len(ins), len(want), tol))
    return d, len(ins), want, tol


def compare(want, got, tol):
    """The worst relative error over the leaves, or a string saying what does not match."""
    worst = 0.0
    for k, (w, g) in enumerate(zip(want, got)):
        if g.shape != w.shape or g.dtype != w.dtype:
            return "out%d: got %s%s, want %s%s" % (k, g.dtype, g.shape, w.dtype, w.shape)
        if w.dtype.kind in "biu":
            bad = int(np.count_nonzero(g != w))
            if bad:
                return "out%d: %d of %d differ" % (k, bad, w.size)
            continue
        wf, gf = w.astype(np.float64), g.astype(np.float64)
        if not np.array_equal(np.isnan(wf), np.isnan(gf)):
            return "out%d: NaNs differ" % k
        ok = ~np.isnan(wf)
        if not ok.any():
            continue
        if not np.array_equal(wf[ok & np.isinf(wf)], gf[ok & np.isinf(wf)]):
            return "out%d: infinities differ" % k
        fin = ok & ~np.isinf(wf)
        if fin.any():
            err = float(np.max(np.abs(gf[fin] - wf[fin])) / max(1.0, float(np.max(np.abs(wf[fin])))))
            worst = max(worst, err)
            if err > tol:
                return "out%d: relative error %.3g > %.3g" % (k, err, tol)
    return worst


def run(d, nin, want, tol, backend):
    """(status, error or message, fallbacks, ms): status ok / wrong / refused / crashed."""
    cmd = [hlojit_bin(), "run", os.path.join(d, "mod.hlo"), "--backend", backend, "--stats",
           "--out", os.path.join(d, "out_" + backend)]
    for i in range(nin):
        cmd += ["--input", os.path.join(d, "in%d.npy" % i)]
    t = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    ms = (time.time() - t) * 1e3
    m = re.search(r"evaluator_fallbacks=(\d+)", r.stderr)
    fb = int(m.group(1)) if m else None
    if r.returncode != 0:
        lines = r.stderr.strip().splitlines()
        msg = next((ln for ln in lines if ln.startswith("hlojit")), lines[0] if lines else "exit %d" % r.returncode)
        return ("refused" if r.returncode == 1 else "crashed"), msg, fb, ms
    got = [from_disk(np.load(os.path.join(d, "out_" + backend, "out%d.npy" % k))) for k in range(len(want))]
    res = compare(want, got, tol)
    if isinstance(res, str):
        return "wrong", res, fb, ms
    return "ok", res, fb, ms


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backends", default="interp,cpu")
    ap.add_argument("--out", default=CACHE, help="the case directories (default: the test run's cache)")
    ap.add_argument("names", nargs="*")
    a = ap.parse_args()
    names = a.names or list(programs.PROGRAMS)
    print("%-14s %-8s %-8s %-10s %-9s %s" % ("program", "backend", "status", "max err", "fallbacks", "note"))
    bad = 0
    for n in names:
        d, nin, want, tol = prepare(n, a.out)
        for b in a.backends.split(","):
            st, res, fb, ms = run(d, nin, want, tol, b)
            err = "%.2e" % res if st == "ok" else "-"
            note = "" if st == "ok" else str(res)[:90]
            if st == "ok" and b != "interp" and fb:
                st, note = "fallback", "%d ops on the evaluator" % fb
            expected = n in programs.NOT_YET and st == "refused"
            bad += st != "ok" and not expected
            print("%-14s %-8s %-8s %-10s %-9s %s" % (n, b, st, err, "-" if fb is None else fb, note), flush=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
