"""opcases.py — helpers for op-by-op tests of hlojit against NumPy / ml_dtypes / JAX.

What it does: builds a one-op HLO text module for a case, writes its inputs as .npy,
runs `build/hlojit run MOD.hlo --backend interp --input ... --out DIR` and compares every
output with a reference computed by NumPy (ml_dtypes for bf16; jax.lax only where NumPy has
no function with XLA's exact semantics — each test says which).

Conventions (the project's): bf16 arrays travel as raw 2-byte patterns, numpy dtype 'V2'
(ml_dtypes bfloat16 `.view('V2')`); pred is numpy bool.

Comparison rules (compare()):
  - integers and pred: exact;
  - floats, tol=None ("exact"): bit-identical, except that any NaN matches any NaN and,
    with zero_sign=False, -0.0 matches +0.0;
  - floats, tol=TRANS (transcendental functions): NaN where the reference is NaN, the same
    infinities, and otherwise within ULPS[type] units in the last place of the type or
    within RTOL[type] relative error:  f32 2 ulp or 1e-6 rel;  f64 2 ulp or 1e-14 rel;
    f16/bf16 1 ulp (the reference is computed in f64/f32 and rounded to the type);
  - floats, tol=(rtol, atol): |got - want| <= atol + rtol*|want| (reductions and dots).

Environment: HLOJIT_BIN (default build/hlojit), HLOJIT_BACKEND (default interp),
HLOJIT_TEST_OUT (default tests/out/ops_numpy; each test process works in run-PID/ there,
one directory per case with its module, inputs, outputs and a repro.sh; a case that passes
is removed, a failing one stays, so it reproduces with one command), HLOJIT_DRYRUN=1 (write
modules and compute references without running hlojit: checks the test code itself).
"""

import os
import re
import shlex
import subprocess
import zlib

import numpy as np
import ml_dtypes

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BIN = os.environ.get("HLOJIT_BIN", os.path.join(REPO, "build", "hlojit"))
BACKEND = os.environ.get("HLOJIT_BACKEND", "interp")
# One directory per test process (several runs may share the tree); passing cases are
# removed, failing ones stay for reproduction.
OUT_ROOT = os.path.join(os.environ.get("HLOJIT_TEST_OUT", os.path.join(REPO, "tests", "out", "ops_numpy")),
                        "run-%d" % os.getpid())

BF16 = np.dtype(ml_dtypes.bfloat16)

# HLO element type name -> numpy dtype (bf16: ml_dtypes.bfloat16 in memory, 'V2' on disk).
NP = {
    "pred": np.dtype(np.bool_),
    "s8": np.dtype(np.int8), "s16": np.dtype(np.int16),
    "s32": np.dtype(np.int32), "s64": np.dtype(np.int64),
    "u8": np.dtype(np.uint8), "u16": np.dtype(np.uint16),
    "u32": np.dtype(np.uint32), "u64": np.dtype(np.uint64),
    "f16": np.dtype(np.float16), "bf16": BF16,
    "f32": np.dtype(np.float32), "f64": np.dtype(np.float64),
}
SINTS = ["s8", "s16", "s32", "s64"]
UINTS = ["u8", "u16", "u32", "u64"]
INTS = SINTS + UINTS
FLOATS = ["f16", "bf16", "f32", "f64"]
ALL = ["pred"] + INTS + FLOATS
BITS = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}
UINT_OF_BITS = {16: np.uint16, 32: np.uint32, 64: np.uint64}

TRANS = "trans"
ULPS = {"f16": 1, "bf16": 1, "f32": 2, "f64": 2}
RTOL = {"f16": 0.0, "bf16": 0.0, "f32": 1e-6, "f64": 1e-14}


def type_of(dtype):
    for k, v in NP.items():
        if v == dtype:
            return k
    raise KeyError(dtype)


def is_float(t):
    return t in FLOATS


def is_int(t):
    return t in INTS


# ---- data --------------------------------------------------------------------------------

def rng_for(name):
    """A deterministic generator per case name (stable across runs and machines)."""
    return np.random.default_rng(zlib.crc32(name.encode()))


def float_specials(t):
    """Edge values of float type t: zeros of both signs, infinities, NaN, extremes,
    the smallest normal and subnormal, halves (rounding ties) and ordinary values."""
    fi = ml_dtypes.finfo(NP[t]) if t == "bf16" else np.finfo(NP[t])
    tiny = float(fi.smallest_normal)
    sub = float(fi.smallest_subnormal)
    vals = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3.0, -3.0, 0.1, -0.1,
            7.25, -7.75, 100.0, -100.0, 1e-3, np.inf, -np.inf, np.nan,
            float(fi.max), -float(fi.max), tiny, -tiny, sub, -sub, float(fi.eps)]
    return np.array(vals, dtype=np.float64).astype(NP[t])


def int_specials(t):
    ii = np.iinfo(NP[t])
    lo, hi = int(ii.min), int(ii.max)
    base = [0, 1, 2, 3, 7, 8, 100, hi, hi - 1, hi // 2, hi // 2 + 1]
    if lo < 0:
        base += [-1, -2, -3, -7, -8, -100, lo, lo + 1, lo // 2]
    return np.array([v for v in base if lo <= v <= hi], dtype=NP[t])


def specials(t):
    if t == "pred":
        return np.array([False, True], dtype=np.bool_)
    return float_specials(t) if is_float(t) else int_specials(t)


def random_values(t, n, rng, lo=None, hi=None):
    """n random values of type t: floats ~ a mix of N(0, 3) and uniform [lo, hi];
    integers uniform over the whole type (or [lo, hi])."""
    if t == "pred":
        return rng.integers(0, 2, n).astype(np.bool_)
    if is_float(t):
        lo = -10.0 if lo is None else lo
        hi = 10.0 if hi is None else hi
        half = n // 2
        v = np.concatenate([rng.normal(0, 3, half), rng.uniform(lo, hi, n - half)])
        return v.astype(NP[t])
    ii = np.iinfo(NP[t])
    lo = int(ii.min) if lo is None else lo
    hi = int(ii.max) if hi is None else hi
    return rng.integers(lo, hi, n, dtype=NP[t], endpoint=True)


def unary_input(t, name, n_random=64, lo=None, hi=None):
    """Specials followed by random values, one flat array."""
    r = rng_for(name)
    return np.concatenate([specials(t), random_values(t, n_random, r, lo, hi)])


def binary_inputs(t, name, n_random=64, b_specials=None):
    """Every pair of specials (a grid) followed by random pairs; flat arrays a, b."""
    s = specials(t)
    sb = s if b_specials is None else b_specials
    ga, gb = np.meshgrid(s, sb, indexing="ij")
    r = rng_for(name)
    a = np.concatenate([ga.ravel(), random_values(t, n_random, r)])
    b = np.concatenate([gb.ravel(), random_values(t, n_random, r)])
    return a, b


def mixed(t, shape, name):
    """An array of |shape|: the type's edge values first, then random values."""
    n = int(np.prod(shape))
    v = np.concatenate([specials(t), random_values(t, n, rng_for(name))])[:n]
    return v.reshape(shape)


# ---- HLO text ----------------------------------------------------------------------------

def shape_str(t, shape):
    return "%s[%s]" % (t, ",".join(str(int(d)) for d in shape))


def arr_shape(a):
    return shape_str(type_of(a.dtype), a.shape)


def module(name, params, root, comps=""):
    """An HLO module: |params| are numpy arrays (or (type, shape) pairs) for parameter(i),
    |root| the ROOT line's right-hand side (operands named p0, p1, ...), |comps| helper
    computations written before the entry."""
    lines = ["HloModule %s" % re.sub(r"[^A-Za-z0-9_]", "_", name), ""]
    if comps:
        lines += [comps.strip("\n"), ""]
    lines.append("ENTRY main {")
    for i, p in enumerate(params):
        s = arr_shape(p) if isinstance(p, np.ndarray) else shape_str(*p)
        lines.append("  p%d = %s parameter(%d)" % (i, s, i))
    lines.append("  ROOT r = %s" % root)
    lines.append("}")
    return "\n".join(lines) + "\n"


def scalar_comp(name, t, op, extra=""):
    """A scalar computation (a, b) -> op(a, b), e.g. reducers; op 'replace' returns b."""
    if op == "replace":
        return "%s {\n  a = %s[] parameter(0)\n  ROOT b = %s[] parameter(1)\n}\n" % (name, t, t)
    rt = "pred" if op == "compare" else t
    return ("%s {\n  a = %s[] parameter(0)\n  b = %s[] parameter(1)\n  ROOT c = %s[] %s(a, b)%s\n}\n"
            % (name, t, t, rt, op, extra))


def jx(fn, *args):
    """Runs a jax.lax reference (CPU, 64-bit types enabled); returns numpy. XLA on CPU
    flushes subnormals: give it integers or data it only moves, never subnormal math."""
    import jax
    jax.config.update("jax_platforms", "cpu")
    with jax.enable_x64(True):
        return np.asarray(fn(*args))


# ---- running -----------------------------------------------------------------------------

def to_disk(a):
    """bf16 -> raw 'V2' (the project's .npy convention); everything else as is."""
    return a.view("V2") if a.dtype == BF16 else a


def from_disk(a, want_type=None):
    """Reads back 'V2' as bf16; normalises pred stored as u1 to bool when pred is wanted."""
    if a.dtype.kind == "V" and a.dtype.itemsize == 2:
        return a.view(BF16)
    if want_type == "pred" and a.dtype == np.uint8:
        return a.astype(np.bool_)
    return a


class RunError(Exception):
    pass


def case_dir(name):
    d = os.path.join(OUT_ROOT, re.sub(r"[^A-Za-z0-9_.=-]", "_", name))
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.unlink(os.path.join(d, f))
    return d


def remove_case_dir(name):
    d = os.path.join(OUT_ROOT, re.sub(r"[^A-Za-z0-9_.=-]", "_", name))
    if os.path.isdir(d):
        for f in os.listdir(d):
            os.unlink(os.path.join(d, f))
        os.rmdir(d)
        try:
            os.rmdir(OUT_ROOT)     # only when it is empty
        except OSError:
            pass


def run(name, hlo, inputs, nout):
    """Runs |hlo| on |inputs| through the CLI; returns the list of |nout| output arrays
    (bf16 as ml_dtypes arrays). Everything stays in the case directory."""
    d = case_dir(name)
    mod = os.path.join(d, "mod.hlo")
    with open(mod, "w") as f:
        f.write(hlo)
    cmd = [BIN, "run", mod, "--backend", BACKEND]
    for i, a in enumerate(inputs):
        p = os.path.join(d, "in%d.npy" % i)
        np.save(p, to_disk(np.array(a, order="C")))   # (ascontiguousarray makes 0-d 1-d)
        cmd += ["--input", p]
    cmd += ["--out", d]
    with open(os.path.join(d, "repro.sh"), "w") as f:
        f.write(" ".join(shlex.quote(c) for c in cmd) + "\n")
    if os.environ.get("HLOJIT_DRYRUN"):
        return None
    if not os.path.exists(BIN):
        raise RunError("%s does not exist (run `make`)" % BIN)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise RunError("hlojit failed (rc %d) on case %s\n$ %s\n%s%s\n--- module ---\n%s"
                       % (p.returncode, name, " ".join(cmd), p.stdout, p.stderr, hlo))
    outs = []
    for i in range(nout):
        path = os.path.join(d, "out%d.npy" % i)
        if not os.path.exists(path):
            raise RunError("case %s: %s missing (stdout: %s)" % (name, path, p.stdout))
        outs.append(np.load(path))
    return outs


# ---- comparison --------------------------------------------------------------------------

def _ordered(a, t):
    """Float bits -> integers ordered like the floats (-0 and +0 both 0), as Python ints."""
    bits = BITS[t]
    u = np.ascontiguousarray(a).view(UINT_OF_BITS[bits]).ravel().tolist()
    sign = 1 << (bits - 1)
    return [(-(x & (sign - 1))) if x & sign else x for x in u]


def compare(got, want, t, tol=None, zero_sign=True, max_report=8, inputs=()):
    """Returns a list of human-readable mismatch lines; empty when |got| matches |want|.
    |t| is the HLO element type of the output; |want| is an array of that type. Inputs of
    the output's size (elementwise ops) are shown at each bad position."""
    want = np.asarray(want)
    got = from_disk(np.asarray(got), t)
    if got.shape != want.shape:
        return ["shape: got %s, want %s" % (got.shape, want.shape)]
    if got.dtype != NP[t]:
        return ["dtype: got %s, want %s (%s)" % (got.dtype, NP[t], t)]
    g, w = got.ravel(), want.ravel()
    if not is_float(t):
        bad = np.nonzero(g != w)[0]
    else:
        gf, wf = g.astype(np.float64), w.astype(np.float64)
        gn, wn = np.isnan(gf), np.isnan(wf)
        if tol is None:
            same = (g.view(UINT_OF_BITS[BITS[t]]) == w.view(UINT_OF_BITS[BITS[t]]))
            if not zero_sign:
                same |= (gf == wf)
            ok = (gn & wn) | (same & ~gn & ~wn)
        elif tol == TRANS:
            og, ow = _ordered(g, t), _ordered(w, t)
            ulp = np.array([abs(x - y) for x, y in zip(og, ow)], dtype=np.float64)
            with np.errstate(invalid="ignore", over="ignore"):
                rel = np.abs(gf - wf) / np.abs(wf)
                finite = np.isfinite(wf) & np.isfinite(gf)
                close = finite & ((ulp <= ULPS[t]) | (rel <= RTOL[t]))
            ok = (gn & wn) | (~gn & ~wn & ((gf == wf) | close))
        else:
            rtol, atol = tol
            with np.errstate(invalid="ignore", over="ignore"):
                close = np.abs(gf - wf) <= atol + rtol * np.abs(wf)
            ok = (gn & wn) | (~gn & ~wn & ((gf == wf) | close))
        bad = np.nonzero(~ok)[0]
    if len(bad) == 0:
        return []
    lines = ["%d of %d elements differ (type %s, tol %s)" % (len(bad), g.size, t, tol)]
    for i in bad[:max_report]:
        idx = np.unravel_index(i, want.shape) if want.ndim else ()
        ins = [repr(x.ravel()[i]) for x in inputs if np.asarray(x).size == g.size]
        lines.append("  at %s: got %r, want %r%s" % (tuple(int(k) for k in idx), g[i], w[i],
                                                   "  (inputs " + ", ".join(ins) + ")" if ins else ""))
    return lines


def check(name, hlo, inputs, wants, types, tol=None, zero_sign=True, context=None):
    """Runs the case and asserts every output matches. |wants| and |types| are lists
    (one per output). On failure the message names the case directory, the bad positions
    with the inputs there (elementwise ops), |context| and the module."""
    assert len(wants) == len(types)
    for w, t in zip(wants, types):
        assert np.asarray(w).dtype == NP[t], "case %s: reference dtype %s is not %s" % (
            name, np.asarray(w).dtype, t)
    outs = run(name, hlo, inputs, len(wants))
    if outs is None:   # HLOJIT_DRYRUN: references and modules only
        return
    errs = []
    for k, (g, w, t) in enumerate(zip(outs, wants, types)):
        e = compare(g, w, t, tol=tol, zero_sign=zero_sign, inputs=inputs)
        if e:
            errs.append("output %d: " % k + "\n".join(e))
    if not errs:
        remove_case_dir(name)
        return
    if errs:
        msg = ["case %s (dir %s; repro.sh there reruns it)" % (name, os.path.join(OUT_ROOT, name))] + errs
        if context:
            msg.append(context)
        msg.append("--- module ---\n" + hlo)
        raise AssertionError("\n".join(msg))
