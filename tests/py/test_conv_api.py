"""hlojit.h's convolution and pooling API, and its linear algebra, against JAX.

build/tests/api_hlo (tests/unit/api_hlo.c) builds each case with the public API
(hj_conv, hj_conv_transpose, hj_conv_general, hj_max_pool, hj_avg_pool) and writes the
module; `hlojit run --backend $HLOJIT_BACKEND` runs it on random inputs and the outputs are
compared with the JAX function below on the same inputs (jax.lax.conv_general_dilated,
conv_transpose, reduce_window; written from JAX's documented semantics, not from hlojit's
code); hj_cholesky and hj_triangular_solve against jnp.linalg.cholesky and
lax.linalg.triangular_solve (inputs marked "spd" are symmetric positive definite, "tri"
well-conditioned triangular-ish: a + 4 I); hj_rng_bits / hj_rng_uniform against
lax.rng_bit_generator, bit for bit. Tolerance: 1e-4 relative + 1e-5 absolute for
f32, 2^-7 relative for bf16. The error cases must fail with a message naming the function.
"""
import os
import subprocess

import numpy as np
import pytest

import opcases
from conftest import BACKEND, BUILD, HLOJIT

jax = pytest.importorskip("jax")
jax.config.update("jax_platforms", "cpu")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

DRIVER = BUILD / "tests" / "api_hlo"
NHWC, NCHW = ("NHWC", "HWIO", "NHWC"), ("NCHW", "OIHW", "NCHW")


def avg_exclude(x):   # NCHW, 3x3 stride 2 SAME, divided by the taps inside x
    s = lax.reduce_window(x, 0.0, lax.add, (1, 1, 3, 3), (1, 1, 2, 2), "SAME")
    n = lax.reduce_window(jnp.ones_like(x), 0.0, lax.add, (1, 1, 3, 3), (1, 1, 2, 2), "SAME")
    return s / n


CASES = {   # name: (input shapes and dtypes, JAX reference)
    "conv_nhwc_same_bias": ([(2, 7, 6, 3), (3, 3, 3, 5), (5,)],
                            lambda x, w, b: lax.conv_general_dilated(x, w, (2, 1), "SAME", dimension_numbers=NHWC) + b),
    "conv_nchw_groups": ([(2, 6, 9, 9), (6, 2, 3, 3)],
                         lambda x, w: lax.conv_general_dilated(x, w, (1, 1), [(1, 2), (0, 1)], rhs_dilation=(1, 2),
                                                               dimension_numbers=NCHW, feature_group_count=3)),
    "conv_depthwise": ([(1, 8, 8, 4), (3, 3, 1, 8)],
                       lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=NHWC,
                                                             feature_group_count=4)),
    "conv_1d_default": ([(2, 11, 4), (3, 4, 6)],
                        lambda x, w: lax.conv_general_dilated(x, w, (1,), "VALID", dimension_numbers=("NWC", "WIO", "NWC"))),
    "conv_bf16": ([((1, 6, 6, 8), "bf16"), ((3, 3, 8, 4), "bf16")],
                  lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=NHWC)),
    "conv_transpose_same": ([(1, 5, 5, 3), (3, 3, 3, 2)],
                            lambda x, w: lax.conv_transpose(x, w, (2, 2), "SAME", dimension_numbers=NHWC)),
    "conv_transpose_valid": ([(1, 3, 4, 5), (2, 3, 3, 2)],
                             lambda x, w: lax.conv_transpose(x, w, (2, 3), "VALID", dimension_numbers=NCHW)),
    "conv_general_rev": ([(5, 2, 6, 3), (4, 2, 3, 3)],
                         lambda x, w: lax.conv_general_dilated(x, w[:, :, ::-1, :], (1, 2), [(1, 0), (-1, 2)],
                                                               lhs_dilation=(2, 1),
                                                               dimension_numbers=("HNWC", "OHWI", "NCHW"))),
    "max_pool_same": ([(2, 9, 9, 3)],
                      lambda x: lax.reduce_window(x, -np.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")),
    "avg_pool_exclude": ([(1, 2, 7, 7)], avg_exclude),
    "avg_pool_include": ([(1, 6, 6, 2)],
                         lambda x: lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4),
    "chol_lower": ([((7, 7), "spd")], lambda a: jnp.linalg.cholesky(a)),
    "chol_upper_batched": ([((2, 3, 5, 5), "spd")], lambda a: jnp.swapaxes(jnp.linalg.cholesky(a), -1, -2)),
    "chol_solve": ([((6, 6), "spd"), (6, 2)], lambda a, b: jnp.linalg.solve(a, b)),
    "rng_bits_threefry": ([((2,), "u64")], lambda s: lax.rng_bit_generator(
        jnp.asarray(np.asarray(s).view(np.uint32)), (3, 5), dtype=jnp.uint32,
        algorithm=lax.RandomAlgorithm.RNG_THREE_FRY)[1]),
    "rng_uniform_philox": ([((2,), "u64")], lambda s: lax.bitcast_convert_type(
        lax.rng_bit_generator(jnp.asarray(np.asarray(s).view(np.uint32)), (7, 9), dtype=jnp.uint32,
                              algorithm=lax.RandomAlgorithm.RNG_PHILOX)[1] >> 9 | np.uint32(0x3f800000),
        jnp.float32) - 1),
    "trisolve_right_upper": ([((5, 5), "tri"), (3, 5)],
                             lambda a, b: lax.linalg.triangular_solve(a, b, left_side=False, lower=False,
                                                                      unit_diagonal=True)),
}
ERRORS = {"err_features": "hj_conv:", "err_bias": "hj_conv: the bias", "err_pool_window": "hj_max_pool:",
          "err_rank": "hj_conv_transpose:", "err_chol_square": "hj_cholesky: needs square",
          "err_trisolve_type": "hj_triangular_solve:", "err_rng_state": "hj_rng_bits:"}


@pytest.fixture(scope="module")
def driver():
    if not os.access(DRIVER, os.X_OK):
        pytest.skip("%s not built (make %s)" % (DRIVER, DRIVER))
    return DRIVER


def build(driver, name, path):
    return subprocess.run([str(driver), name, str(path)], capture_output=True, text=True, timeout=60)


def test_every_case_is_tested(driver):
    listed = subprocess.run([str(driver), "list"], capture_output=True, text=True).stdout.split()
    assert sorted(listed) == sorted(list(CASES) + list(ERRORS))


@pytest.mark.parametrize("name", sorted(CASES))
def test_api_case(driver, name, tmp_path):
    shapes, ref = CASES[name]
    r = build(driver, name, tmp_path / "m.hlo")
    assert r.returncode == 0, r.stderr
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    args = []
    for s in shapes:
        shape, t = (s, "f32") if isinstance(s[0], int) else s
        a = rng.uniform(-1, 1, shape).astype(np.float32)
        if t == "u64":   # an rng state: random 64-bit words, exactly
            args.append(rng.integers(0, 2**63, shape, dtype=np.uint64))
            continue
        if t == "spd":
            a = (a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(np.float32)
        if t == "tri":
            a = (a + 4 * np.eye(shape[-1])).astype(np.float32)
        args.append(a.astype(opcases.BF16) if t == "bf16" else a)
    want = np.asarray(ref(*[a if a.dtype == np.uint64 else jnp.asarray(a) for a in args]))   # u64: x64 is off
    got = opcases.run("api_" + name, (tmp_path / "m.hlo").read_text(), args, 1)[0]
    got = opcases.from_disk(got)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.dtype, got.shape, want.dtype, want.shape)
    if want.dtype.kind in "ui" or name.startswith("rng"):   # random bits and their floats: exactly
        assert np.array_equal(got, want), "%s: %d of %d differ" % (name, int((got != want).sum()), want.size)
        opcases.remove_case_dir("api_" + name)
        return
    rtol, atol = (2.0 ** -7, 2.0 ** -6) if want.dtype == opcases.BF16 else (1e-4, 1e-5)
    g, w = got.astype(np.float64), want.astype(np.float64)
    bad = np.abs(g - w) > atol + rtol * np.abs(w)
    assert not bad.any(), "%s: %d of %d differ, max abs err %g" % (name, bad.sum(), w.size, np.abs(g - w).max())
    opcases.remove_case_dir("api_" + name)


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_api_errors(driver, name, tmp_path):
    r = build(driver, name, tmp_path / "m.hlo")
    assert r.returncode == 1 and ERRORS[name] in r.stderr, r.stderr
    assert "Sanitizer" not in r.stderr
