#!/usr/bin/env python3
"""bench_conv.py — hlojit's convolutions and pools against XLA:CPU on the same modules.

Each row is a JAX function (a ResNet-style convolution, its gradients, a depthwise
convolution, pooling and max-pool's gradient), lowered by JAX to HLO text. XLA:CPU runs it
through jax.jit (best of RUNS calls after a warm-up, block_until_ready); hlojit runs the
same text through build/bench/bench_hlo (compiled once, best of RUNS after two warm-up
runs). The two take turns for ROUNDS rounds and the best time of each is kept, so load
from elsewhere hits both alike: read the ratio, XLA ms / hlojit ms (above 1: hlojit is
faster). Both use every core (XLA's intra-op pool, hlojit's thread pool).

Usage: bench/bench_conv.py [--rounds N] [--runs N] [--only SUBSTRING]
       (`make bench-conv` builds bench_hlo and runs it with the venv's Python)
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
BENCH_HLO = os.path.join(REPO, "build", "bench", "bench_hlo")
NHWC = ("NHWC", "HWIO", "NHWC")


def conv(stride, pad, groups=1):
    return lambda x, w: lax.conv_general_dilated(x, w, (stride, stride), pad, dimension_numbers=NHWC,
                                                 feature_group_count=groups)


def grad_w(f, x, w):
    g = np.ones(jax.eval_shape(f, x, w).shape, np.float32)
    return lambda x, w: jax.vjp(lambda w: f(x, w), w)[1](g)[0]


def grad_x(f, x, w):
    g = np.ones(jax.eval_shape(f, x, w).shape, np.float32)
    return lambda x, w: jax.vjp(lambda x: f(x, w), x)[1](g)[0]


def maxpool(x):
    return lax.reduce_window(x, -np.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")


def avgpool(x):
    return lax.reduce_window(x, np.float32(0), lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4


def rows():
    r = np.random.default_rng(0)
    a = lambda *s: r.uniform(-1, 1, s).astype(np.float32)   # noqa: E731
    x56, w3 = a(8, 56, 56, 64), a(3, 3, 64, 64)
    x28, w3s = a(8, 28, 28, 128), a(3, 3, 128, 256)
    c3, c3s = conv(1, "SAME"), conv(2, "SAME")
    return [
        ("stem 7x7/2 3->64 224", conv(2, "SAME"), [a(4, 224, 224, 3), a(7, 7, 3, 64)]),
        ("3x3 64->64 56", c3, [x56, w3]),
        ("3x3/2 128->256 28", c3s, [x28, w3s]),
        ("1x1 256->64 56", conv(1, "VALID"), [a(8, 56, 56, 256), a(1, 1, 256, 64)]),
        ("depthwise 3x3 64 56", conv(1, "SAME", 64), [x56, a(3, 3, 1, 64)]),
        ("3x3 64->64 56 dW", grad_w(c3, x56, w3), [x56, w3]),
        ("3x3/2 128->256 28 dX", grad_x(c3s, x28, w3s), [x28, w3s]),
        ("maxpool 3x3/2 112", maxpool, [a(8, 112, 112, 64)]),
        ("maxpool 3x3/2 112 grad", lambda x: jax.grad(lambda x: maxpool(x).sum())(x), [a(8, 112, 112, 64)]),
        ("avgpool 2x2 56", avgpool, [x56]),
    ]


def xla_best(fn, args, runs):
    f = jax.jit(fn)
    jax.block_until_ready(f(*args))
    best = 1e30
    for _ in range(runs):
        t = time.perf_counter()
        jax.block_until_ready(f(*args))
        best = min(best, time.perf_counter() - t)
    return best * 1e3


def hlojit_best(path, runs):
    p = subprocess.run([BENCH_HLO, path, str(runs)], capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(p.stderr)
    m = re.search(r"best_ms=([0-9.]+).*fallbacks=(\d+)", p.stdout)
    c = re.search(r"compile_ms=([0-9.]+)", p.stdout)
    return float(m.group(1)), int(m.group(2)), float(c.group(1))


def run_table(tool, rows, width=26):
    """Every row (name, function, args) through XLA and hlojit, printed as one table line each;
    the command line is --rounds, --runs, --only. Returns the worst ratio."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    if not os.path.exists(BENCH_HLO):
        sys.exit("%s: %s missing (make build/bench/bench_hlo)" % (tool, BENCH_HLO))
    print("%s: XLA:CPU (jax %s) vs hlojit on the same HLO; best of %d runs x %d rounds; %d CPUs"
          % (tool, jax.__version__, a.runs, a.rounds, os.cpu_count()))
    print("%-*s %10s %10s %8s %6s %10s" % (width, "case", "XLA ms", "hlojit ms", "ratio", "evals", "compile"))
    worst = None
    with tempfile.TemporaryDirectory() as d:
        for name, fn, args in rows:
            if a.only not in name:
                continue
            path = os.path.join(d, re.sub(r"[^A-Za-z0-9]", "_", name) + ".hlo")
            with open(path, "w") as f:
                f.write(jax.jit(fn).lower(*args).as_text(dialect="hlo"))
            xb, hb, fb, cm = 1e30, 1e30, 0, 0
            for _ in range(a.rounds):
                xb = min(xb, xla_best(fn, args, a.runs))
                h, fb, cm = hlojit_best(path, a.runs)
                hb = min(hb, h)
            ratio = xb / hb
            worst = ratio if worst is None else min(worst, ratio)
            print("%-*s %10.3f %10.3f %8.2f %6d %8.0fms" % (width, name, xb, hb, ratio, fb, cm), flush=True)
    print("ratio = XLA ms / hlojit ms (above 1: hlojit faster); evals = evaluator fallbacks (must be 0); "
          "worst ratio %.2f" % (worst or 0))
    return worst


def main():
    run_table("bench_conv", rows())


if __name__ == "__main__":
    main()
