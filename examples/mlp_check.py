"""mlp_check.py — checks examples/mlp (one GPT-2 style transformer block run by hlojit's
evaluator) against NumPy.

Runs build/examples/mlp (or the binary given with --bin) with an output directory, reads the
block's inputs and hlojit's output from the .npy files it writes, recomputes the block in
float64 with NumPy, prints both side by side and the max abs / rel error, and exits 1 when
the relative error (max |hlojit - numpy| / max |numpy|) exceeds 1e-5.

The block, written from the model's definition (not from the C code):
  h   = layernorm(x) * g1 + b1                      (eps 1e-5, biased variance)
  q, k, v = split(h @ Wqkv + bqkv, 3, axis=-1), each reshaped to (B, H, T, D), H = 4
  a   = softmax(q k^T / sqrt(D) with future keys masked to -inf) @ v
  x1  = x + merge_heads(a) @ Wproj + bproj
  out = x1 + gelu_tanh(layernorm(x1) * g2 + b2 @ Wfc + bfc) @ Wfc2 + bfc2
"""
import argparse
import math
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADS = 4
NAMES = ["x", "ln1_g", "ln1_b", "w_qkv", "b_qkv", "w_proj", "b_proj",
         "ln2_g", "ln2_b", "w_fc", "b_fc", "w_fc2", "b_fc2"]


def layernorm(x, g, b, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def attention(h, p):
    B, T, C = h.shape
    D = C // HEADS
    qkv = h @ p["w_qkv"] + p["b_qkv"]
    q, k, v = (qkv[..., i * C:(i + 1) * C].reshape(B, T, HEADS, D).transpose(0, 2, 1, 3)
               for i in range(3))
    scores = np.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(D)
    future = np.triu(np.ones((T, T), dtype=bool), k=1)
    scores = np.where(future, -np.inf, scores)
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    y = np.einsum("bhqk,bhkd->bhqd", w, v).transpose(0, 2, 1, 3).reshape(B, T, C)
    return y @ p["w_proj"] + p["b_proj"]


def block(p):
    x = p["x"]
    x1 = x + attention(layernorm(x, p["ln1_g"], p["ln1_b"]), p)
    h = gelu_tanh(layernorm(x1, p["ln2_g"], p["ln2_b"]) @ p["w_fc"] + p["b_fc"])
    return x1 + h @ p["w_fc2"] + p["b_fc2"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "examples", "mlp"))
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "mlp_out"))
    args = ap.parse_args()

    run = subprocess.run([args.bin, args.out], capture_output=True, text=True)
    sys.stdout.write(run.stdout)
    if run.returncode != 0:
        sys.stderr.write(run.stderr)
        print(f"FAIL: {args.bin} exited with {run.returncode}")
        return 1

    p = {n: np.load(os.path.join(args.out, n + ".npy")).astype(np.float64) for n in NAMES}
    got = np.load(os.path.join(args.out, "out.npy"))
    ref = block(p)
    if got.shape != ref.shape or got.dtype != np.float32:
        print(f"FAIL: hlojit output is {got.dtype}{list(got.shape)}, expected float32{list(ref.shape)}")
        return 1

    g, r = got.reshape(-1).astype(np.float64), ref.reshape(-1)
    print(f"{'i':>3} {'hlojit':>12} {'numpy':>12}")
    for i in range(8):
        print(f"{i:>3} {g[i]:>12.6f} {r[i]:>12.6f}")
    abs_err = float(np.max(np.abs(g - r)))
    rel_err = abs_err / float(np.max(np.abs(r)))
    print(f"max abs error {abs_err:.3e}, rel error (max abs / max |numpy|) {rel_err:.3e}")
    if not np.all(np.isfinite(g)) or rel_err > 1e-5:
        print("FAIL: hlojit differs from NumPy by more than 1e-5")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
