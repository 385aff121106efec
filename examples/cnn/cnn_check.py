#!/usr/bin/env python3
"""cnn_check.py — runs examples/cnn on a model make_model.py makes and checks every layer
against JAX's.

Makes DIR/model (make_model.py: random weights with batch norm folded in, seeded images,
JAX's outputs of each layer), runs `cnn DIR/model DIR/out --backend B` for each backend
asked for, and compares DIR/out/<layer>.npy with DIR/model/ref_<layer>.npy:
max |hlojit - jax| / max |jax| <= 1e-5 per layer (float32 both sides; the sums run in
another order). The run must report evaluator_fallbacks=0 (every op in a kernel). Prints a
table (layer, shape, max abs, relative error) per backend; exit status 1 on any failure.

Usage: cnn_check.py [--bin build/examples/cnn] [--dir build/cnn] [--backend cpu,interp]
"""
import argparse
import os
import re
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
LAYERS = ["stem", "pool", "block1", "block2", "dw", "gap", "logits"]
RTOL = 1e-5


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "examples", "cnn"))
    ap.add_argument("--dir", default=os.path.join(ROOT, "build", "cnn"))
    ap.add_argument("--backend", default="cpu,interp")
    a = ap.parse_args()
    model = os.path.join(a.dir, "model")
    subprocess.run([sys.executable, os.path.join(HERE, "make_model.py"), model], check=True)
    ok = True
    for be in a.backend.split(","):
        out = os.path.join(a.dir, "out_" + be)
        r = subprocess.run([a.bin, model, out, "--backend", be], capture_output=True, text=True)
        print(r.stdout, end="")
        if r.returncode != 0:
            print("cnn (%s) failed:\n%s" % (be, r.stderr))
            ok = False
            continue
        m = re.search(r"evaluator_fallbacks=(\d+)", r.stdout)
        if be != "interp" and (not m or m.group(1) != "0"):
            print("FAIL: %s: the run has evaluator fallbacks" % be)
            ok = False
        print("%-8s %-8s %-16s %12s %12s" % ("backend", "layer", "shape", "max abs err", "rel err"))
        for layer in LAYERS:
            got = np.load(os.path.join(out, layer + ".npy"))
            want = np.load(os.path.join(model, "ref_" + layer + ".npy"))
            if got.shape != want.shape:
                print("FAIL: %s %s: shape %s, JAX %s" % (be, layer, got.shape, want.shape))
                ok = False
                continue
            err = float(np.abs(got.astype(np.float64) - want).max())
            rel = err / max(float(np.abs(want).max()), 1e-30)
            flag = "" if rel <= RTOL else "  FAIL (> %g)" % RTOL
            ok &= rel <= RTOL
            print("%-8s %-8s %-16s %12.3g %12.3g%s" % (be, layer, str(want.shape), err, rel, flag))
    print("cnn_check: %s" % ("every layer matches JAX" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
