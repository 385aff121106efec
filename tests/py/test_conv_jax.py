"""Convolution, reduce-window and select-and-scatter against JAX.

Each case is a small JAX function (jax.lax.conv_general_dilated, lax.reduce_window, their
gradients through jax.vjp / jax.grad), lowered by JAX itself to HLO text
(`jax.jit(f).lower(...).as_text(dialect="hlo")`), run by `hlojit run --backend
$HLOJIT_BACKEND` (interp by default; `make test-py-cpu` runs the CPU backend, and the GPU
emulator suite runs the same modules through the CUDA backend's emulator), and compared with
what JAX computed on the CPU. The table covers every field of XLA's convolution: dim_labels
in several orders (NHWC/HWIO, NCHW/OIHW, the transposed forms gradients use), 1-D, 2-D and
3-D windows, strides, "SAME"/"VALID"/explicit padding including negative pads, lhs and rhs
dilation, window reversal (a hand-written module: JAX emits reverse ops instead), feature
groups (grouped and depthwise), batch groups (the weight gradient of a grouped conv), f32,
bf16 (with f32 accumulation: preferred_element_type) and f16, and integer convolutions.

Tolerances: f32 |got - want| <= 1e-4 |want| + 1e-5 * sqrt(taps) (the kernels accumulate in
f32 in another order than XLA); bf16 and f16 results one unit of their precision (2^-7,
2^-10) relative plus the same absolute floor scaled to the type; integers exactly.
On the evaluator run, `hlojit print`'s text must also be read by XLA's parser (jaxlib) and
mean what JAX's text meant (test_print_xla.py's comparison). On a compiling backend the
module must also run with 0 evaluator fallbacks (`--stats`).
HLOJIT_DRYRUN=1 writes the modules without running them (tools/ptx_check.py assembles
their kernels with ptxas).
"""

import numpy as np
import pytest

import opcases

jax = pytest.importorskip("jax")
jax.config.update("jax_platforms", "cpu")
import jaxcase  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

BF16 = opcases.BF16
rand = jaxcase.rand


def run_case(name, f, args, taps=9):
    jaxcase.run_case("conv_" + name, f, args, taps)


# ---- convolution ------------------------------------------------------------------------------

# name: (lhs shape, rhs shape, kwargs of conv_general_dilated)
CONV = {
    "nhwc_same": ((2, 7, 6, 3), (3, 3, 3, 5), dict(window_strides=(1, 1), padding="SAME",
                                                   dimension_numbers=("NHWC", "HWIO", "NHWC"))),
    "nhwc_stride2": ((2, 8, 8, 4), (3, 3, 4, 6), dict(window_strides=(2, 2), padding="SAME",
                                                      dimension_numbers=("NHWC", "HWIO", "NHWC"))),
    "nchw_valid": ((2, 3, 9, 7), (4, 3, 3, 2), dict(window_strides=(1, 2), padding="VALID")),
    "conv1d": ((3, 17, 5), (4, 5, 6), dict(window_strides=(2,), padding=[(2, 1)],
                                           dimension_numbers=("NWC", "WIO", "NWC"))),
    "conv3d": ((1, 5, 6, 4, 2), (2, 3, 2, 2, 3), dict(window_strides=(1, 2, 1), padding="SAME",
                                                      dimension_numbers=("NDHWC", "DHWIO", "NDHWC"))),
    "dilated_groups": ((2, 6, 9, 9), (6, 2, 3, 3), dict(window_strides=(1, 1), padding=[(1, 2), (0, -1)],
                                                        lhs_dilation=(2, 1), rhs_dilation=(1, 2),
                                                        feature_group_count=3)),
    "depthwise": ((2, 9, 9, 8), (3, 3, 1, 16), dict(window_strides=(1, 1), padding="SAME",
                                                    dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                                    feature_group_count=8)),
    "batch_groups": ((4, 6, 6, 3), (3, 3, 3, 6), dict(window_strides=(1, 1), padding="VALID",
                                                      dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                                      batch_group_count=2)),
    "odd_labels": ((5, 3, 2, 6), (3, 2, 6, 4), dict(window_strides=(1, 1), padding=[(1, 0), (0, 1)],
                                                    dimension_numbers=("HWNC", "HWIO", "CNHW"))),
    "1x1": ((2, 5, 5, 8), (1, 1, 8, 12), dict(window_strides=(1, 1), padding="VALID",
                                              dimension_numbers=("NHWC", "HWIO", "NHWC"))),
    "patchify": ((1, 16, 16, 3), (4, 4, 3, 8), dict(window_strides=(4, 4), padding="VALID",
                                                    dimension_numbers=("NHWC", "HWIO", "NHWC"))),
    "big_window_pad": ((1, 3, 3, 2), (5, 5, 2, 3), dict(window_strides=(1, 1), padding=[(4, 4), (4, 4)],
                                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))),
}


def conv_fn(kw, pref=None):
    return lambda x, w: lax.conv_general_dilated(x, w, preferred_element_type=pref, **kw)


@pytest.mark.parametrize("name", sorted(CONV))
def test_conv_f32(name):
    ls, rs, kw = CONV[name]
    run_case(name, conv_fn(kw), [rand(ls, np.float32, 1), rand(rs, np.float32, 2)], taps=np.prod(rs))


@pytest.mark.parametrize("name", ["nhwc_same", "dilated_groups", "depthwise", "conv1d"])
def test_conv_bf16(name):
    # bf16 in, f32 accumulation, bf16 out (jax's default for bf16 operands)
    ls, rs, kw = CONV[name]
    run_case(name + "_bf16", conv_fn(kw), [rand(ls, BF16, 3), rand(rs, BF16, 4)], taps=np.prod(rs))


@pytest.mark.parametrize("name", ["nhwc_stride2", "nchw_valid"])
def test_conv_bf16_pref_f32(name):
    ls, rs, kw = CONV[name]
    run_case(name + "_bf16_f32", conv_fn(kw, jnp.float32), [rand(ls, BF16, 5), rand(rs, BF16, 6)],
             taps=np.prod(rs))


def test_conv_f16():
    ls, rs, kw = CONV["nhwc_same"]
    run_case("f16", conv_fn(kw), [rand(ls, np.float16, 7), rand(rs, np.float16, 8)], taps=np.prod(rs))


@pytest.mark.parametrize("name", ["nhwc_same", "dilated_groups"])
def test_conv_int(name):
    ls, rs, kw = CONV[name]
    run_case(name + "_s32", conv_fn(kw), [rand(ls, np.int32, 9), rand(rs, np.int32, 10)])


@pytest.mark.parametrize("name", ["nhwc_stride2", "dilated_groups", "depthwise", "conv1d", "odd_labels"])
def test_conv_grads(name):
    # jax.vjp: the input gradient (lhs-dilated, transposed kernel) and the weight gradient
    # (batch and feature swapped in the dim labels; batch_group_count for grouped convs)
    ls, rs, kw = CONV[name]
    f = conv_fn(kw)

    def grads(x, w, g):
        _, vjp = jax.vjp(f, x, w)
        return vjp(g)
    x, w = rand(ls, np.float32, 11), rand(rs, np.float32, 12)
    g = rand(jax.eval_shape(f, x, w).shape, np.float32, 13)
    run_case(name + "_grads", grads, [x, w, g], taps=np.prod(ls))


def test_conv_window_reversal():
    # XLA's rhs_reversal, written by hand (JAX emits reverse ops): equal to the convolution
    # with the kernel reversed along the flagged spatial dims.
    x, w = rand((1, 6, 5, 2), np.float32, 14), rand((3, 2, 2, 3), np.float32, 15)
    want = np.asarray(lax.conv_general_dilated(x, w[:, ::-1], (1, 1), [(1, 1), (0, 1)],
                                               dimension_numbers=("NHWC", "HWIO", "NHWC")))
    hlo = """HloModule rev
ENTRY e {
  x = f32[1,6,5,2] parameter(0)
  w = f32[3,2,2,3] parameter(1)
  ROOT c = f32[1,6,5,3] convolution(x, w), window={size=3x2 pad=1_1x0_1 rhs_reversal=0x1}, dim_labels=b01f_01io->b01f
}
"""
    opcases.check("conv_rev", hlo, [x, w], [want], ["f32"], tol=(1e-5, 1e-6))


# ---- pooling and its gradient -----------------------------------------------------------------

POOL = {   # name: (input shape, reducer, init, window, strides, padding, base dil, window dil)
    "max_same": ((2, 9, 9, 3), "max", (1, 3, 3, 1), (1, 2, 2, 1), "SAME", None, None),
    "max_valid": ((2, 8, 8, 3), "max", (1, 2, 2, 1), (1, 2, 2, 1), "VALID", None, None),
    "sum_pad": ((2, 3, 7, 6), "sum", (1, 1, 3, 3), (1, 1, 1, 2), [(0, 0), (0, 0), (1, 1), (2, 0)], None, None),
    "min_dilated": ((1, 9, 8), "min", (1, 2, 3), (1, 1, 2), [(0, 0), (1, 1), (0, 2)], (1, 2, 1), (1, 1, 2)),
    "sum_1d_int": ((4, 20), "sum", (1, 5), (1, 3), "SAME", None, None),
    "min_pad": ((2, 7, 7, 2), "min", (1, 3, 2, 1), (1, 2, 1, 1), [(0, 0), (1, 1), (0, 1), (0, 0)], None, None),
}


def pool_fn(red, win, strides, padding, bd, wd):
    # a Python scalar init, so that JAX sees a monoid and can differentiate it
    op, init = {"max": (lax.max, -np.inf), "min": (lax.min, np.inf), "sum": (lax.add, 0)}[red]
    return lambda x: lax.reduce_window(x, x.dtype.type(init), op, win, strides, padding, base_dilation=bd,
                                       window_dilation=wd)


@pytest.mark.parametrize("name", sorted(POOL))
def test_reduce_window(name):
    shape, red, win, strides, padding, bd, wd = POOL[name]
    dt = np.int32 if name.endswith("_int") else np.float32
    run_case("rw_" + name, pool_fn(red, win, strides, padding, bd, wd), [rand(shape, dt, 20)], taps=np.prod(win))


def test_reduce_window_bf16():
    shape, red, win, strides, padding, bd, wd = POOL["sum_pad"]
    run_case("rw_bf16", pool_fn(red, win, strides, padding, bd, wd), [rand(shape, BF16, 21)], taps=np.prod(win))


@pytest.mark.parametrize("name", ["max_same", "max_valid", "min_pad"])
def test_pool_grad(name):
    # max- and min-pool's gradients: JAX emits select-and-scatter (after a pad for SAME;
    # JAX has no VJP for dilated max-pools)
    shape, red, win, strides, padding, bd, wd = POOL[name]
    f = pool_fn(red, win, strides, padding, bd, wd)
    x = rand(shape, np.float32, 22)
    g = rand(jax.eval_shape(f, x).shape, np.float32, 23)

    def grad(x, g):
        _, vjp = jax.vjp(f, x)
        return vjp(g)[0]
    run_case("pg_" + name, grad, [x, g], taps=np.prod(win))


def test_avg_pool_grad():
    shape, red, win, strides, padding, bd, wd = POOL["sum_pad"]
    f = pool_fn(red, win, strides, padding, bd, wd)
    x = rand(shape, np.float32, 24)
    run_case("avg_grad", lambda x: jax.grad(lambda x: (f(x) ** 2).sum())(x), [x], taps=np.prod(win))
