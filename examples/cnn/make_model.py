#!/usr/bin/env python3
"""make_model.py — the weights, the input images and JAX's layer-by-layer outputs for
examples/cnn (cnn.c), written as .npy files into one directory.

The model, a small ResNet for 32x32 RGB images (NHWC, 10 classes), in inference mode:
  stem   conv 3x3, 3 -> 16, batch norm, relu
  pool   max pool 3x3 stride 2 "same"                               -> 16x16x16
  block1 conv 3x3 16 -> 16, bn, relu, conv 3x3, bn, + x, relu
  block2 conv 3x3 stride 2 16 -> 32, bn, relu, conv 3x3, bn,
         + conv 1x1 stride 2 16 -> 32 (projection shortcut), relu      -> 8x8x32
  dw     depthwise conv 3x3 (32 groups), bn, relu
  gap    average pool over the 8x8 positions                         -> 32
  logits dense 32 -> 10
Batch norm is folded into the convolution before it (w * gamma / sqrt(var + eps), bias
beta - mean * gamma / sqrt(var + eps)), as an inference engine does; the folded weights
and biases are what cnn.c reads. Weights are random (He-style, seeded), the batch norm
statistics random around 0 and 1, the images uniform in [0, 1): the point is to check the
arithmetic, not to classify. The reference is computed by JAX (jax.lax.conv_general_dilated,
reduce_window) on the CPU, in float32, from the model's definition above.

Usage: make_model.py OUT_DIR [--batch N] [--seed S]
Writes OUT_DIR/<param>.npy (the names cnn.c reads), images.npy, and ref_<layer>.npy for
stem, pool, block1, block2, dw, gap, logits.
"""
import argparse
import os

import numpy as np

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

NHWC = ("NHWC", "HWIO", "NHWC")
EPS = 1e-5


def conv(x, w, b, stride=1, groups=1):
    y = lax.conv_general_dilated(x, w, (stride, stride), "SAME", dimension_numbers=NHWC,
                                 feature_group_count=groups)
    return y + b


def forward(p, x):
    r = {}
    h = jax.nn.relu(conv(x, p["stem_w"], p["stem_b"]))
    r["stem"] = h
    h = lax.reduce_window(h, -np.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
    r["pool"] = h
    a = jax.nn.relu(conv(h, p["b1c1_w"], p["b1c1_b"]))
    h = jax.nn.relu(conv(a, p["b1c2_w"], p["b1c2_b"]) + h)
    r["block1"] = h
    a = jax.nn.relu(conv(h, p["b2c1_w"], p["b2c1_b"], stride=2))
    s = conv(h, p["b2sc_w"], p["b2sc_b"], stride=2)
    h = jax.nn.relu(conv(a, p["b2c2_w"], p["b2c2_b"]) + s)
    r["block2"] = h
    h = jax.nn.relu(conv(h, p["dw_w"], p["dw_b"], groups=h.shape[-1]))
    r["dw"] = h
    g = h.mean(axis=(1, 2))
    r["gap"] = g
    r["logits"] = g @ p["fc_w"] + p["fc_b"]
    return r


def folded_conv(rng, k, cin, cout, groups=1):
    """A conv's weights (HWIO, input features per group) with a random batch norm folded in."""
    fan_in = k * k * cin // groups
    w = rng.normal(0, np.sqrt(2.0 / fan_in), (k, k, cin // groups, cout)).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, cout).astype(np.float32)
    beta = rng.normal(0, 0.1, cout).astype(np.float32)
    mean = rng.normal(0, 0.1, cout).astype(np.float32)
    var = rng.uniform(0.5, 1.5, cout).astype(np.float32)
    scale = gamma / np.sqrt(var + EPS)
    return (w * scale).astype(np.float32), (beta - mean * scale).astype(np.float32)


def make_params(seed):
    rng = np.random.default_rng(seed)
    p = {}
    for name, k, cin, cout, groups in [("stem", 3, 3, 16, 1), ("b1c1", 3, 16, 16, 1), ("b1c2", 3, 16, 16, 1),
                                        ("b2c1", 3, 16, 32, 1), ("b2c2", 3, 32, 32, 1), ("b2sc", 1, 16, 32, 1),
                                        ("dw", 3, 32, 32, 32)]:
        p[name + "_w"], p[name + "_b"] = folded_conv(rng, k, cin, cout, groups)
    p["fc_w"] = rng.normal(0, np.sqrt(1.0 / 32), (32, 10)).astype(np.float32)
    p["fc_b"] = rng.normal(0, 0.1, 10).astype(np.float32)
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    p = make_params(a.seed)
    x = np.random.default_rng(a.seed + 1).uniform(0, 1, (a.batch, 32, 32, 3)).astype(np.float32)
    for k, v in p.items():
        np.save(os.path.join(a.out, k + ".npy"), v)
    np.save(os.path.join(a.out, "images.npy"), x)
    ref = jax.jit(forward)(p, x)
    for k, v in ref.items():
        np.save(os.path.join(a.out, "ref_" + k + ".npy"), np.asarray(v, np.float32))
    print("make_model: %d params, images (%d, 32, 32, 3), %d reference layers in %s"
          % (len(p), a.batch, len(ref), a.out))


if __name__ == "__main__":
    main()
