"""test_ops_numpy.py — every first-wave HLO op, every element type it is defined on, run by
`build/hlojit run --backend interp` (HLOJIT_BACKEND to change) and compared with NumPy.

One test id per op x element type (x variant). Each case is a one-op HLO module written by
opcases.module(); inputs are edge values (NaN, +-inf, -0.0, extremes, subnormals, rounding
ties, INT_MIN, -1, 0, ...) followed by seeded random values; binary ops take every pair of
edge values. The reference of each case is stated next to it:
  - NumPy in the element type itself for ops that round once or not at all (+ - * / sqrt
    fmod floor ceil rint abs negate max min compare select convert-to-float reshape ...):
    compared exactly (bit for bit; NaN matches NaN);
  - NumPy / SciPy in f64, rounded to the type, for transcendental functions: tolerance
    opcases.TRANS (f32: 2 ulp or 1e-6 rel, f64: 2 ulp or 1e-14 rel, f16/bf16: 1 ulp);
  - jax.lax (x64 enabled, CPU) where NumPy lacks XLA's exact semantics: integer divide and
    remainder (x/0, INT_MIN/-1), shifts (amounts >= width), float->int convert
    (saturation, NaN->0), round-nearest-afz, dynamic-slice / dynamic-update-slice (clamped
    starts), pad (negative and interior padding), gather (clamped indices), scatter
    (out-of-bounds windows skipped). XLA on CPU flushes subnormals, so jax only sees data it
    moves or integers, never subnormal arithmetic.
bf16 uses ml_dtypes (its conversions round through f32, as XLA does).
"""

import numpy as np
import pytest
import scipy.special
import jax
from jax import lax

import ml_dtypes
import opcases as oc
from opcases import ALL, FLOATS, INTS, NP, SINTS, UINTS, TRANS, module, check, shape_str

jax.config.update("jax_platforms", "cpu")
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def jx(fn, *args):
    """Runs a jax.lax reference with 64-bit types enabled; returns numpy."""
    with jax.enable_x64(True):
        return np.asarray(fn(*args))


def r64(fn, x, t, *more):
    """Reference in f64, rounded to type t (f64 -> bf16 goes through f32, as XLA does)."""
    with np.errstate(all="ignore"):
        y = fn(x.astype(np.float64), *[m.astype(np.float64) for m in more])
    return np.asarray(y).astype(NP[t])


def ids(xs):
    return [str(x) for x in xs]


# ---- self-check: the comparison can fail ------------------------------------------------

def test_compare_detects_wrong_expectations():
    a = np.array([1.0, np.nan, -0.0, 3.0], np.float32)
    assert oc.compare(a, a.copy(), "f32") == []
    wrong = np.array([1.0, np.nan, 0.0, 3.0], np.float32)     # +0 vs -0: bits differ
    assert oc.compare(a, wrong, "f32") != []
    assert oc.compare(a, wrong, "f32", zero_sign=False) == []
    off = np.nextafter(np.float32(3), np.float32(4), dtype=np.float32)
    assert oc.compare(a, np.array([1.0, np.nan, -0.0, off], np.float32), "f32") != []
    near = np.array([1.0, np.nan, -0.0, 3.0 * (1 + 5e-7)], np.float32)   # within 1e-6 rel
    assert oc.compare(a, near, "f32", tol=TRANS) == []
    far = np.array([1.0, np.nan, -0.0, 3.0 * (1 + 3e-6)], np.float32)    # 3e-6 rel, 37 ulp
    assert oc.compare(a, far, "f32", tol=TRANS) != []
    h = np.array([1.0, 2.0], np.float16)
    h2 = np.array([1.0, np.nextafter(np.float16(2), np.float16(3))], np.float16)
    assert oc.compare(h, h2, "f16", tol=TRANS) == []                    # 1 ulp
    h3 = np.array([1.0, np.nextafter(h2[1], np.float16(3))], np.float16)
    assert oc.compare(h, h3, "f16", tol=TRANS) != []                    # 2 ulp
    assert oc.compare(a, np.array([1.0, 0.0, -0.0, 3.0], np.float32), "f32", tol=TRANS) != []
    assert oc.compare(np.array([1, 2], np.int8), np.array([1, 3], np.int8), "s8") != []
    assert oc.compare(np.array([1, 2], np.int8), np.array([1, 2], np.int16), "s16") != []
    b = np.array([1.0, 2.0], ml_dtypes.bfloat16)
    assert oc.compare(b.view("V2"), b, "bf16") == []
    assert oc.compare(b.view("V2"), b + b, "bf16") != []


# ---- unary ------------------------------------------------------------------------------

def xla_sign(x):
    # XLA: sign(+-0) = +-0, sign(NaN) = NaN; np.sign gives +0 for -0, so keep zeros as is.
    return np.where(x == 0, x, np.sign(x))


# name -> (reference on f64, tolerance, input range for the random part)
UNARY_FLOAT = {
    "exponential": (np.exp, TRANS, (-20, 20)),
    "exponential-minus-one": (np.expm1, TRANS, (-5, 5)),
    "log": (np.log, TRANS, (0, 100)),
    "log-plus-one": (np.log1p, TRANS, (-1, 10)),
    "logistic": (scipy.special.expit, TRANS, (-20, 20)),
    "tanh": (np.tanh, TRANS, (-5, 5)),
    "rsqrt": (lambda x: 1.0 / np.sqrt(x), TRANS, (0, 100)),
    "cbrt": (np.cbrt, TRANS, (-100, 100)),
    "sine": (np.sin, TRANS, (-10, 10)),
    "cosine": (np.cos, TRANS, (-10, 10)),
    "erf": (scipy.special.erf, TRANS, (-4, 4)),
    # exact: one rounding (sqrt) or none (the rest); reference rounded once from f64
    "sqrt": (np.sqrt, None, (0, 100)),
    "floor": (np.floor, None, (-10, 10)),
    "ceil": (np.ceil, None, (-10, 10)),
    "round-nearest-even": (np.rint, None, (-10, 10)),
    "abs": (np.abs, None, (-10, 10)),
    "negate": (np.negative, None, (-10, 10)),
    "sign": (xla_sign, None, (-10, 10)),
}


@pytest.mark.parametrize("t", FLOATS)
@pytest.mark.parametrize("op", list(UNARY_FLOAT))
def test_unary_float(op, t):
    fn, tol, (lo, hi) = UNARY_FLOAT[op]
    x = oc.unary_input(t, op + t, lo=lo, hi=hi)
    if op == "sqrt":
        with np.errstate(all="ignore"):
            want = np.sqrt(x)          # NumPy in the type itself (ml_dtypes for bf16)
    else:
        want = r64(fn, x, t)
    check("%s_%s" % (op, t), module(op, [x], "%s %s(p0)" % (shape_str(t, x.shape), op)),
          [x], [want], [t], tol=tol)


@pytest.mark.parametrize("t", FLOATS)
def test_round_nearest_afz(t):
    # Reference: jax.lax.round(AWAY_FROM_ZERO) on the f64 copy (no f64 subnormals: XLA on
    # CPU flushes them), rounded back (exact: integers and halves are representable).
    x = oc.unary_input(t, "afz" + t)
    x = x[~((np.abs(x.astype(np.float64)) < 1e-300) & (x != 0))]
    want = jx(lambda v: lax.round(v, lax.RoundingMethod.AWAY_FROM_ZERO),
              x.astype(np.float64)).astype(NP[t])
    check("round-nearest-afz_" + t,
          module("afz", [x], "%s round-nearest-afz(p0)" % shape_str(t, x.shape)),
          [x], [want], [t])


@pytest.mark.parametrize("t", FLOATS)
def test_is_finite(t):
    x = oc.unary_input(t, "isf" + t)
    check("is-finite_" + t, module("isf", [x], "pred[%d] is-finite(p0)" % x.size),
          [x], [np.isfinite(x)], ["pred"])


# Integer unary ops (NumPy in the type: wraps like XLA, abs(INT_MIN) == INT_MIN).
UNARY_INT = {
    "abs": (np.abs, SINTS),
    "negate": (np.negative, INTS),
    "sign": (np.sign, SINTS),
    "not": (np.invert, ["pred"] + INTS),     # np.invert on bool is logical not
}


@pytest.mark.parametrize("op,t", [(op, t) for op, (_, ts) in UNARY_INT.items() for t in ts])
def test_unary_int(op, t):
    x = oc.unary_input(t, op + t)
    with np.errstate(all="ignore"):
        want = UNARY_INT[op][0](x)
    check("%s_%s" % (op, t), module(op, [x], "%s %s(p0)" % (shape_str(t, x.shape), op)),
          [x], [want], [t])


# ---- binary -----------------------------------------------------------------------------

def binary_case(op, t, a, b, want, tol=None, zero_sign=True, out_t=None):
    out_t = out_t or t
    check("%s_%s" % (op, t),
          module(op, [a, b], "%s %s(p0, p1)" % (shape_str(out_t, a.shape), op)),
          [a, b], [want], [out_t], tol=tol, zero_sign=zero_sign)


# NumPy in the element type: one IEEE rounding (or none) -> exact; integers wrap.
BINARY_NUMPY = {
    "add": (np.add, INTS + FLOATS),
    "subtract": (np.subtract, INTS + FLOATS),
    "multiply": (np.multiply, INTS + FLOATS),
    "maximum": (np.maximum, ALL),         # NaN propagates (XLA and NumPy)
    "minimum": (np.minimum, ALL),
    "and": (np.bitwise_and, ["pred"] + INTS),
    "or": (np.bitwise_or, ["pred"] + INTS),
    "xor": (np.bitwise_xor, ["pred"] + INTS),
}


@pytest.mark.parametrize("op,t", [(op, t) for op, (_, ts) in BINARY_NUMPY.items() for t in ts])
def test_binary_numpy(op, t):
    a, b = oc.binary_inputs(t, op + t)
    with np.errstate(all="ignore"):
        want = BINARY_NUMPY[op][0](a, b)
    # max/min of +0 and -0 may return either zero (XLA does not specify it)
    binary_case(op, t, a, b, want, zero_sign=op not in ("maximum", "minimum"))


@pytest.mark.parametrize("t", FLOATS)
def test_divide_float(t):
    a, b = oc.binary_inputs(t, "div" + t)
    with np.errstate(all="ignore"):
        want = np.divide(a, b)       # NumPy in the type: x/0 = +-inf, 0/0 = NaN
    binary_case("divide", t, a, b, want)


@pytest.mark.parametrize("t", FLOATS)
def test_remainder_float(t):
    a, b = oc.binary_inputs(t, "rem" + t)
    with np.errstate(all="ignore"):
        want = np.fmod(a, b)         # XLA remainder on floats is C fmod (exact)
    binary_case("remainder", t, a, b, want)


@pytest.mark.parametrize("t", INTS)
@pytest.mark.parametrize("op", ["divide", "remainder"])
def test_divide_remainder_int(op, t):
    # Reference: jax.lax.div / lax.rem = XLA: truncation, x/0 = -1 (all ones), x%0 = x,
    # INT_MIN/-1 = INT_MIN, INT_MIN%-1 = 0. The grid of specials holds all of these.
    a, b = oc.binary_inputs(t, op + t)
    want = jx(lax.div if op == "divide" else lax.rem, a, b)
    binary_case(op, t, a, b, want)


@pytest.mark.parametrize("t", FLOATS)
@pytest.mark.parametrize("op", ["power", "atan2"])
def test_power_atan2_float(op, t):
    # Reference: np.power / np.arctan2 in f64 (C99 special cases: pow(x, 0) = 1,
    # pow(1, NaN) = 1, pow(-8, 1/3) = NaN, pow(0, -1) = inf ...), rounded to the type.
    a, b = oc.binary_inputs(t, op + t)
    want = r64(np.power if op == "power" else np.arctan2, a, t, b)
    binary_case(op, t, a, b, want, tol=TRANS)


@pytest.mark.parametrize("t", INTS)
def test_power_int(t):
    # Reference: np.power in the type (repeated multiplication, wraps). Exponents >= 0 only:
    # XLA's result for negative integer exponents is not something NumPy defines.
    r = oc.rng_for("powi" + t)
    a = np.concatenate([oc.specials(t), oc.random_values(t, 32, r)])
    a = np.repeat(a, 6)
    b = np.tile(np.array([0, 1, 2, 3, 7, 40], NP[t]), a.size // 6)
    with np.errstate(all="ignore"):
        want = np.power(a, b)
    binary_case("power", t, a, b, want)


def shift_amounts(t):
    w = NP[t].itemsize * 8
    s = [0, 1, 2, w - 1, w, w + 1, 2 * w, 100, int(np.iinfo(NP[t]).max)]
    if t in SINTS:
        s += [-1, -w, int(np.iinfo(NP[t]).min)]
    return np.array([v for v in s if np.iinfo(NP[t]).min <= v <= np.iinfo(NP[t]).max], NP[t])


@pytest.mark.parametrize("t", INTS)
@pytest.mark.parametrize("op", ["shift-left", "shift-right-arithmetic", "shift-right-logical"])
def test_shift(op, t):
    # Reference: jax.lax.shift_* = XLA: amounts >= width (as unsigned) give 0, or all sign
    # bits for the arithmetic right shift.
    a, b = oc.binary_inputs(t, op + t, b_specials=shift_amounts(t))
    fn = {"shift-left": lax.shift_left, "shift-right-arithmetic": lax.shift_right_arithmetic,
          "shift-right-logical": lax.shift_right_logical}[op]
    binary_case(op, t, a, b, jx(fn, a, b))


CMP = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
       "GT": np.greater, "GE": np.greater_equal}


@pytest.mark.parametrize("t", ALL)
@pytest.mark.parametrize("d", list(CMP))
def test_compare(d, t):
    # Reference: NumPy comparisons (IEEE: NaN unordered, only NE true; -0 == +0).
    a, b = oc.binary_inputs(t, "cmp" + d + t)
    check("compare_%s_%s" % (d, t),
          module("cmp", [a, b], "pred[%d] compare(p0, p1), direction=%s" % (a.size, d)),
          [a, b], [CMP[d](a, b)], ["pred"])


@pytest.mark.parametrize("t", ALL)
def test_select(t):
    a, b = oc.binary_inputs(t, "sel" + t)
    p = oc.rng_for("selp" + t).integers(0, 2, a.size).astype(np.bool_)
    check("select_" + t,
          module("sel", [p, a, b], "%s select(p0, p1, p2)" % shape_str(t, a.shape)),
          [p, a, b], [np.where(p, a, b)], [t])


@pytest.mark.parametrize("t", INTS + FLOATS)
@pytest.mark.parametrize("bounds", ["scalar", "array"])
def test_clamp(bounds, t):
    # Reference: XLA defines clamp(lo, x, hi) = min(max(x, lo), hi): np.minimum/np.maximum.
    x = oc.unary_input(t, "clamp" + t)
    r = oc.rng_for("clampb" + bounds + t)
    if bounds == "scalar":
        lo, hi = (np.array(v, NP[t]) for v in ((-2.5, 3.0) if t in FLOATS else
                                               ((0, 100) if t in UINTS else (-3, 100))))
    else:
        lo, hi = oc.random_values(t, x.size, r), oc.random_values(t, x.size, r)
    want = np.minimum(np.maximum(x, lo), hi)
    check("clamp_%s_%s" % (bounds, t),
          module("clamp", [lo, x, hi], "%s clamp(p0, p1, p2)" % shape_str(t, x.shape)),
          [lo, x, hi], [want], [t], zero_sign=False)


# ---- convert, bitcast-convert, copy -----------------------------------------------------

def convert_ref(x, s, d):
    if s in FLOATS and d in INTS:
        # Reference: jax.lax.convert_element_type = XLA: saturates, NaN -> 0, truncates.
        return jx(lambda v: lax.convert_element_type(v, NP[d]), x)
    with np.errstate(all="ignore"):
        if s in FLOATS and d == "pred":
            return x != 0                    # NaN -> true
        # NumPy / ml_dtypes astype: ints wrap, one IEEE rounding (to bf16 through f32).
        return x.astype(NP[d])


@pytest.mark.parametrize("d", ALL)
@pytest.mark.parametrize("s", ALL)
def test_convert(s, d):
    x = oc.unary_input(s, "cvt" + s + d)
    if s in FLOATS:   # values just past the target's range and between its steps
        extra = [127.5, 128.0, 255.5, 256.0, -128.5, -129.0, 32767.5, 65535.0, 65536.0,
                 2147483520.0, 4294967040.0, 1e10, -1e10, 1e19, 1e20, 0.999, -0.999, 65520.0]
        x = np.concatenate([x, np.array(extra, np.float64).astype(NP[s])])
    want = convert_ref(x, s, d)
    check("convert_%s_%s" % (s, d), module("cvt", [x], "%s convert(p0)" % shape_str(d, x.shape)),
          [x], [want], [d])


SIZES = {1: ["s8", "u8"], 2: ["s16", "u16", "f16", "bf16"], 4: ["s32", "u32", "f32"],
         8: ["s64", "u64", "f64"]}


@pytest.mark.parametrize("s,d", [(s, d) for g in SIZES.values() for s in g for d in g])
def test_bitcast_convert(s, d):
    x = oc.unary_input(s, "bc" + s + d)       # reference: ndarray.view (same bits)
    check("bitcast-convert_%s_%s" % (s, d),
          module("bc", [x], "%s bitcast-convert(p0)" % shape_str(d, x.shape)),
          [x], [x.view(NP[d])], [d])


@pytest.mark.parametrize("s,d", [("f32", "u8"), ("u8", "f32"), ("f64", "s32"), ("s16", "s8")])
def test_bitcast_convert_resize(s, d):
    # Different widths: XLA adds (or removes) a minor dim of size ratio; bytes are
    # little-endian in memory, like ndarray.view.
    ws, wd = NP[s].itemsize, NP[d].itemsize
    x = oc.random_values(s, 6 * max(1, wd // ws), oc.rng_for("bcr" + s + d))
    x = x.reshape(6, wd // ws) if wd > ws else x.reshape(6)
    want = x.view(NP[d]).reshape(6) if wd > ws else x.view(NP[d]).reshape(6, ws // wd)
    check("bitcast-convert_resize_%s_%s" % (s, d),
          module("bcr", [x], "%s bitcast-convert(p0)" % shape_str(d, want.shape)),
          [x], [want], [d])


def mixed(t, shape, name):
    """An array of |shape|: the type's edge values first, then random values."""
    n = int(np.prod(shape))
    v = np.concatenate([oc.specials(t), oc.random_values(t, n, oc.rng_for(name))])[:n]
    return v.reshape(shape)


@pytest.mark.parametrize("t", ALL)
def test_copy(t):
    x = mixed(t, (3, 11), "copy" + t)
    check("copy_" + t, module("copy", [x], "%s copy(p0)" % shape_str(t, x.shape)),
          [x], [x.copy()], [t])


# ---- shape ops (all types; references are NumPy's index ops unless said) ----------------

@pytest.mark.parametrize("t", [t for t in ALL if t != "pred"])
@pytest.mark.parametrize("dim", [0, 1, 2])
def test_iota(dim, t):
    shape = (3, 5, 4)
    ar = np.arange(shape[dim]).reshape([-1 if i == dim else 1 for i in range(3)])
    want = np.broadcast_to(ar, shape).astype(NP[t])
    check("iota_%d_%s" % (dim, t),
          module("iota", [], "%s iota(), iota_dimension=%d" % (shape_str(t, shape), dim)),
          [], [want], [t])


@pytest.mark.parametrize("t", ALL)
@pytest.mark.parametrize("v", ["vec", "scalar", "2d"])
def test_broadcast(v, t):
    if v == "vec":      # f[3] -> [2,3,4], dimensions={1}
        x = mixed(t, (3,), "bcv" + t)
        want, dims = np.broadcast_to(x[None, :, None], (2, 3, 4)), "1"
    elif v == "scalar":
        x = mixed(t, (), "bcs" + t)
        want, dims = np.broadcast_to(x, (2, 3)), ""
    else:               # [3,4] -> [3,2,4], dimensions={0,2}
        x = mixed(t, (3, 4), "bc2" + t)
        want, dims = np.broadcast_to(x[:, None, :], (3, 2, 4)), "0,2"
    check("broadcast_%s_%s" % (v, t),
          module("bc", [x], "%s broadcast(p0), dimensions={%s}" % (shape_str(t, want.shape), dims)),
          [x], [np.ascontiguousarray(want)], [t])


@pytest.mark.parametrize("t", ALL)
@pytest.mark.parametrize("shapes", [((2, 3, 4), (4, 6)), ((2, 3, 4), (24,)), ((1, 1), ()),
                                    ((6,), (1, 6, 1))], ids=["3to2", "flat", "toscalar", "ones"])
def test_reshape(shapes, t):
    x = mixed(t, shapes[0], "rs" + t)
    want = x.reshape(shapes[1])
    check("reshape_%s_%s" % ("x".join(map(str, shapes[1])) or "scalar", t),
          module("rs", [x], "%s reshape(p0)" % shape_str(t, want.shape)), [x], [want], [t])


@pytest.mark.parametrize("t", ALL)
@pytest.mark.parametrize("perm", [(1, 0, 2), (2, 0, 1), (0, 2, 1)], ids=ids)
def test_transpose(perm, t):
    x = mixed(t, (2, 3, 4), "tr" + t)
    want = np.transpose(x, perm)        # out dim i = operand dim perm[i], like XLA
    check("transpose_%s_%s" % ("".join(map(str, perm)), t),
          module("tr", [x], "%s transpose(p0), dimensions={%s}"
                 % (shape_str(t, want.shape), ",".join(map(str, perm)))),
          [x], [np.ascontiguousarray(want)], [t])


@pytest.mark.parametrize("t", ALL)
def test_slice(t):
    x = mixed(t, (6, 7), "sl" + t)
    want = x[1:5:2, 0:7:3]
    check("slice_" + t,
          module("sl", [x], "%s slice(p0), slice={[1:5:2], [0:7:3]}" % shape_str(t, want.shape)),
          [x], [want], [t])


@pytest.mark.parametrize("t", ALL)
def test_slice_unit_stride(t):
    x = mixed(t, (4, 5, 3), "slu" + t)
    want = x[1:3, 2:5, 0:1]
    check("slice_unit_" + t,
          module("slu", [x], "%s slice(p0), slice={[1:3], [2:5], [0:1]}" % shape_str(t, want.shape)),
          [x], [want], [t])


DS_STARTS = {  # (index type, starts): in range, negative, too large, mixed
    "in": ("s32", (1, 2)), "neg": ("s32", (-3, -1)), "big": ("s32", (4, 100)),
    "mixed": ("s64", (-(2 ** 40), 3)), "u32big": ("u32", (4000000000, 0)), "s8": ("s8", (127, -128)),
}


def ds_params(x, starts_key):
    it, st = DS_STARTS[starts_key]
    return [np.array(s, NP[it]) for s in st]


def ds_cases():
    return [("in", t) for t in ALL] + [(k, "f32") for k in DS_STARTS if k != "in"] + \
           [(k, "s8") for k in ("neg", "big")]


@pytest.mark.parametrize("starts,t", ds_cases())
def test_dynamic_slice(starts, t):
    # Reference: jax.lax.dynamic_slice(allow_negative_indices=False) = XLA's op: starts
    # clamped to [0, dim - size] (JAX's default would wrap negative starts NumPy-style).
    x = mixed(t, (5, 6), "ds" + t)
    idx = ds_params(x, starts)
    want = jx(lambda a, *s: lax.dynamic_slice(a, s, (2, 3), allow_negative_indices=False), x, *idx)
    check("dynamic-slice_%s_%s" % (starts, t),
          module("ds", [x] + idx, "%s dynamic-slice(p0, p1, p2), dynamic_slice_sizes={2,3}"
                 % shape_str(t, (2, 3))),
          [x] + idx, [want], [t])


@pytest.mark.parametrize("starts,t", ds_cases())
def test_dynamic_update_slice(starts, t):
    # Reference: jax.lax.dynamic_update_slice = XLA: starts clamped so the update fits.
    x = mixed(t, (5, 6), "dus" + t)
    u = mixed(t, (2, 3), "dusu" + t)[::-1].copy()
    idx = ds_params(x, starts)
    want = jx(lambda a, b, *s: lax.dynamic_update_slice(a, b, s, allow_negative_indices=False), x, u, *idx)
    check("dynamic-update-slice_%s_%s" % (starts, t),
          module("dus", [x, u] + idx, "%s dynamic-update-slice(p0, p1, p2, p3)"
                 % shape_str(t, x.shape)),
          [x, u] + idx, [want], [t])


@pytest.mark.parametrize("t", ALL)
@pytest.mark.parametrize("axis", [0, 1])
def test_concatenate(axis, t):
    xs = [mixed(t, (2, 3) if axis == 1 else (3, 3), "cat%d%s" % (i, t)) for i in range(3)]
    if axis == 1:
        xs[1] = mixed(t, (2, 1), "cat1" + t)
    want = np.concatenate(xs, axis=axis)
    check("concatenate_%d_%s" % (axis, t),
          module("cat", xs, "%s concatenate(p0, p1, p2), dimensions={%d}"
                 % (shape_str(t, want.shape), axis)), xs, [want], [t])


@pytest.mark.parametrize("t", ALL)
@pytest.mark.parametrize("cfg", ["edge", "interior_negative"])
def test_pad(cfg, t):
    # Reference: jax.lax.pad (XLA's pad: negative low/high crop, interior between elements).
    x = mixed(t, (3, 4), "pad" + t)
    pv = mixed(t, (), "padv" + t + "x")
    cfgs = {"edge": [(1, 2, 0), (0, 3, 0)], "interior_negative": [(-1, 2, 1), (2, -3, 2)]}[cfg]
    want = jx(lambda a, v: lax.pad(a, v, cfgs), x, pv)
    text = "x".join("%d_%d_%d" % c for c in cfgs)
    check("pad_%s_%s" % (cfg, t),
          module("pad", [x, pv], "%s pad(p0, p1), padding=%s" % (shape_str(t, want.shape), text)),
          [x, pv], [want], [t])


@pytest.mark.parametrize("t", ALL)
def test_reverse(t):
    x = mixed(t, (2, 3, 4), "rev" + t)
    check("reverse_" + t,
          module("rev", [x], "%s reverse(p0), dimensions={0,2}" % shape_str(t, x.shape)),
          [x], [np.ascontiguousarray(np.flip(x, axis=(0, 2)))], [t])


# ---- gather / scatter -------------------------------------------------------------------

GATHER = {
    # rows of a table (embedding lookup); indices out of range clamp
    "rows": dict(op=(5, 3), idx=[[1], [4], [-1], [7], [0], [100]], out=(6, 3),
                 attrs="offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, "
                       "index_vector_dim=1, slice_sizes={1,3}",
                 dn=lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
                                               start_index_map=(0,)), sizes=(1, 3)),
    # 2-d windows, both dims indexed; windows that would stick out are moved back in
    "windows": dict(op=(4, 5), idx=[[0, 0], [3, 4], [-2, 1], [1, 9]], out=(4, 2, 3),
                    attrs="offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={0,1}, "
                          "index_vector_dim=1, slice_sizes={2,3}",
                    dn=lax.GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(),
                                                  start_index_map=(0, 1)), sizes=(2, 3)),
    # index_vector_dim = rank (scalar indices), start_index_map onto dim 1
    "cols": dict(op=(3, 6), idx=[[5, -1], [2, 6]], out=(2, 2, 3),
                 attrs="offset_dims={2}, collapsed_slice_dims={1}, start_index_map={1}, "
                       "index_vector_dim=2, slice_sizes={3,1}",
                 dn=lax.GatherDimensionNumbers(offset_dims=(2,), collapsed_slice_dims=(1,),
                                               start_index_map=(1,)), sizes=(3, 1)),
}


def gather_cases():
    return [("rows", "s32", t) for t in ALL] + \
           [(cfg, it, "f32") for cfg in ("windows", "cols") for it in ("s32", "s64", "u32")] + \
           [("rows", it, "f32") for it in ("s64", "s8", "u8")]


@pytest.mark.parametrize("cfg,it,t", gather_cases())
def test_gather(cfg, it, t):
    # Reference: jax.lax.gather(mode=CLIP) = XLA's gather, whose start indices are clamped so
    # the whole slice is in bounds.
    g = GATHER[cfg]
    x = mixed(t, g["op"], "ga" + cfg + t)
    iv = np.array(g["idx"])
    if it in oc.UINTS:
        iv = np.where(iv < 0, np.iinfo(NP[it]).max, iv)
    idx = iv.astype(NP[it])
    if cfg == "cols":
        jidx = idx[..., None]
    else:
        jidx = idx
    want = jx(lambda a, i: lax.gather(a, i, g["dn"], g["sizes"], mode=lax.GatherScatterMode.CLIP),
              x, jidx.astype(np.int64) if it in oc.UINTS else jidx)
    check("gather_%s_%s_%s" % (cfg, it, t),
          module("ga", [x, idx], "%s gather(p0, p1), %s" % (shape_str(t, g["out"]), g["attrs"])),
          [x, idx], [want], [t])


def scatter_module(t, x, idx, upd, combiner, attrs):
    comps = oc.scalar_comp("comb", t, combiner)
    return module("sc", [x, idx, upd], "%s scatter(p0, p1, p2), %s, to_apply=comb"
                  % (shape_str(t, x.shape), attrs), comps)


ROWS_ATTRS = ("update_window_dims={1}, inserted_window_dims={0}, "
              "scatter_dims_to_operand_dims={0}, index_vector_dim=1")
ROWS_DN = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                      scatter_dims_to_operand_dims=(0,))


@pytest.mark.parametrize("t", INTS + FLOATS)
def test_scatter_add(t):
    # Reference: jax.lax.scatter_add(mode=PROMISE_IN_BOUNDS), i.e. XLA's own rule: updates
    # whose window is out of bounds (index -1, 5, 100) are skipped; duplicates accumulate.
    # Small integer values keep float sums exact in every order.
    x = (np.arange(15) % 7).reshape(5, 3).astype(NP[t])
    idx = np.array([[1], [3], [-1], [5], [1], [100], [0]], np.int32)
    upd = (np.arange(21) % 5 + 1).reshape(7, 3).astype(NP[t])
    want = jx(lambda a, i, u: lax.scatter_add(a, i, u, ROWS_DN,
                                              mode=lax.GatherScatterMode.PROMISE_IN_BOUNDS),
              x, idx, upd)
    check("scatter_add_" + t, scatter_module(t, x, idx, upd, "add", ROWS_ATTRS),
          [x, idx, upd], [want], [t])


@pytest.mark.parametrize("t", ALL)
def test_scatter_replace(t):
    # Reference: jax.lax.scatter (replace, PROMISE_IN_BOUNDS); unique in-range indices.
    x = mixed(t, (5, 3), "scr" + t)
    idx = np.array([[4], [-1], [0], [5], [2]], np.int32)
    upd = mixed(t, (5, 3), "scru" + t)[::-1].copy()
    want = jx(lambda a, i, u: lax.scatter(a, i, u, ROWS_DN,
                                          mode=lax.GatherScatterMode.PROMISE_IN_BOUNDS),
              x, idx, upd)
    check("scatter_replace_" + t, scatter_module(t, x, idx, upd, "replace", ROWS_ATTRS),
          [x, idx, upd], [want], [t])


@pytest.mark.parametrize("it", ["s32", "s64", "u32"])
def test_scatter_windows(it):
    # 2-d windows [2,2] into f32[6,4]; a window reaching past the edge ([5,1], [1,3]) or
    # starting before it ([-1,0]) is skipped as a whole (XLA), not clamped.
    x = np.zeros((6, 4), np.float32)
    iv = np.array([[0, 0], [5, 1], [1, 3], [-1, 0], [4, 2], [2, 1]])
    if it == "u32":
        iv = np.where(iv < 0, 4000000000, iv)
    idx = iv.astype(NP[it])
    upd = (np.arange(24) + 1).reshape(6, 2, 2).astype(np.float32)
    dn = lax.ScatterDimensionNumbers(update_window_dims=(1, 2), inserted_window_dims=(),
                                     scatter_dims_to_operand_dims=(0, 1))
    want = jx(lambda a, i, u: lax.scatter_add(a, i, u, dn,
                                              mode=lax.GatherScatterMode.PROMISE_IN_BOUNDS),
              x, idx.astype(np.int64), upd)
    attrs = ("update_window_dims={1,2}, inserted_window_dims={}, "
             "scatter_dims_to_operand_dims={0,1}, index_vector_dim=1")
    check("scatter_windows_" + it, scatter_module("f32", x, idx, upd, "add", attrs),
          [x, idx, upd], [want], ["f32"])


# ---- reduce -----------------------------------------------------------------------------

def identity(t, op):
    if op == "add":
        return np.array(0, NP[t])
    if op == "multiply":
        return np.array(1, NP[t])
    if t == "pred":
        return np.array(op in ("minimum", "and"), np.bool_)
    if t in FLOATS:
        return np.array(-np.inf if op == "maximum" else np.inf, NP[t])
    ii = np.iinfo(NP[t])
    return np.array(ii.min if op == "maximum" else ii.max, NP[t])


def reduce_case(name, t, x, op, dims, want, tol=None, zero_sign=True):
    init = identity(t, op)
    comps = oc.scalar_comp("red", t, op)
    check(name, module("red", [x, init], "%s reduce(p0, p1), dimensions={%s}, to_apply=red"
                       % (shape_str(t, want.shape), ",".join(map(str, dims))), comps),
          [x, init], [want], [t], tol=tol, zero_sign=zero_sign)


@pytest.mark.parametrize("t", INTS + FLOATS)
def test_reduce_sum(t):
    # Reference: np.sum in the type for integers (wraps); floats hold small integers, so
    # the f64 sum rounded to the type is exact in any order.
    r = oc.rng_for("rsum" + t)
    if t in FLOATS:
        x = r.integers(-8, 9, (4, 6)).astype(NP[t])
        want = x.astype(np.float64).sum(axis=1).astype(NP[t])
    else:
        x = oc.random_values(t, 24, r).reshape(4, 6)
        want = np.add.reduce(x, axis=1, dtype=NP[t])
    reduce_case("reduce_add_" + t, t, x, "add", [1], want)


@pytest.mark.parametrize("t", ALL)
@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_reduce_maxmin(op, t):
    # Reference: np.max / np.min over dims {0, 2} (NaN propagates; floats include NaN).
    x = mixed(t, (3, 4, 5), "rmx" + t)
    fn = np.max if op == "maximum" else np.min
    want = fn(x, axis=(0, 2))
    if t in FLOATS:
        xf = x.astype(np.float64)
        want = fn(xf, axis=(0, 2)).astype(NP[t])
    reduce_case("reduce_%s_%s" % (op, t), t, x, op, [0, 2], want, zero_sign=False)


@pytest.mark.parametrize("op", ["and", "or"])
def test_reduce_pred(op):
    x = oc.rng_for("rp" + op).integers(0, 4, (5, 6)) > 0
    x[2, :] = True
    x[3, :] = False
    want = np.all(x, axis=1) if op == "and" else np.any(x, axis=1)
    reduce_case("reduce_%s_pred" % op, "pred", x, op, [1], want)


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_reduce_sum_random(t):
    # Random floats: the summation order is the evaluator's; tolerance 1e-5 (f32) / 1e-12.
    x = oc.rng_for("rsr" + t).normal(0, 1, (3, 50, 4)).astype(NP[t])
    want = x.astype(np.float64).sum(axis=(0, 1)).astype(NP[t])
    tol = (1e-5, 1e-5) if t == "f32" else (1e-12, 1e-12)
    reduce_case("reduce_add_random_" + t, t, x, "add", [0, 1], want, tol=tol)


def test_reduce_multiply_s32():
    x = oc.rng_for("rmul").integers(-3, 4, (4, 5)).astype(np.int32)
    reduce_case("reduce_multiply_s32", "s32", x, "multiply", [1], np.prod(x, axis=1, dtype=np.int32))


ARGMAX = """argmax_cmp {
  av = f32[] parameter(0)
  ai = s32[] parameter(1)
  bv = f32[] parameter(2)
  bi = s32[] parameter(3)
  gt = pred[] compare(av, bv), direction=GT
  eq = pred[] compare(av, bv), direction=EQ
  lt = pred[] compare(ai, bi), direction=LT
  eqlt = pred[] and(eq, lt)
  takea = pred[] or(gt, eqlt)
  v = f32[] select(takea, av, bv)
  i = s32[] select(takea, ai, bi)
  ROOT t = (f32[], s32[]) tuple(v, i)
}
"""


def test_reduce_variadic_argmax():
    # Variadic reduce (value, index) -> the first maximum. Reference: np.max / np.argmax.
    x = oc.rng_for("argmax").integers(-5, 6, (4, 7)).astype(np.float32)   # ties
    ix = np.broadcast_to(np.arange(7, dtype=np.int32), (4, 7)).copy()
    iv, ii = np.array(-np.inf, np.float32), np.array(0, np.int32)
    hlo = module("argmax", [x, ix, iv, ii], "(f32[4], s32[4]) reduce(p0, p1, p2, p3), "
                 "dimensions={1}, to_apply=argmax_cmp", ARGMAX)
    check("reduce_variadic_argmax", hlo, [x, ix, iv, ii],
          [x.max(axis=1), x.argmax(axis=1).astype(np.int32)], ["f32", "s32"])


# ---- dot --------------------------------------------------------------------------------

def dot_case(name, t, a, b, attrs, want, tol=None):
    check(name, module("dot", [a, b], "%s dot(p0, p1), %s" % (shape_str(t, want.shape), attrs)),
          [a, b], [want], [t], tol=tol)


BATCHED = ("lhs_batch_dims={0}, lhs_contracting_dims={2}, "
           "rhs_batch_dims={0}, rhs_contracting_dims={1}")


@pytest.mark.parametrize("t", INTS + FLOATS)
def test_dot_batched(t):
    # (B, M, K) x (B, K, N) -> (B, M, N). Reference: np.einsum in int64 / f64 on small
    # integers (exact in every type and any order), converted to the type.
    r = oc.rng_for("dot" + t)
    lo = 0 if t in UINTS else -3
    a = r.integers(lo, 4, (2, 3, 4)).astype(NP[t])
    b = r.integers(lo, 4, (2, 4, 5)).astype(NP[t])
    wide = np.float64 if t in FLOATS else np.int64
    want = np.einsum("bmk,bkn->bmn", a.astype(wide), b.astype(wide)).astype(NP[t])
    dot_case("dot_batched_" + t, t, a, b, BATCHED, want)


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_dot_random(t):
    # Random (8,16) x (16,8), f64 reference; tolerance 1e-5 (f32) / 1e-12 (f64) relative
    # to the sum of |terms| is implied by (rtol, atol) below.
    r = oc.rng_for("dotr" + t)
    a = r.normal(0, 1, (8, 16)).astype(NP[t])
    b = r.normal(0, 1, (16, 8)).astype(NP[t])
    want = (a.astype(np.float64) @ b.astype(np.float64)).astype(NP[t])
    tol = (1e-5, 1e-5) if t == "f32" else (1e-12, 1e-12)
    dot_case("dot_random_" + t, t, a, b, "lhs_contracting_dims={1}, rhs_contracting_dims={0}",
             want, tol=tol)


def test_dot_two_contracting_and_transposed():
    # lhs (K1, M, K2) x rhs (K2, N, K1): contracting {0,2} x {2,0}, no batch -> (M, N).
    r = oc.rng_for("dot2")
    a = r.integers(-3, 4, (3, 2, 4)).astype(np.float32)
    b = r.integers(-3, 4, (4, 5, 3)).astype(np.float32)
    want = np.einsum("imk,kni->mn", a, b).astype(np.float32)
    dot_case("dot_two_contracting", "f32", a, b,
             "lhs_contracting_dims={0,2}, rhs_contracting_dims={2,0}", want)


def test_dot_batch_not_leading():
    # Batch dim in the middle of both operands: lhs (M, B, K), rhs (K, B, N) -> (B, M, N).
    r = oc.rng_for("dot3")
    a = r.integers(-3, 4, (3, 2, 4)).astype(np.int32)
    b = r.integers(-3, 4, (4, 2, 5)).astype(np.int32)
    want = np.einsum("mbk,kbn->bmn", a, b).astype(np.int32)
    dot_case("dot_batch_middle", "s32", a, b,
             "lhs_batch_dims={1}, lhs_contracting_dims={2}, rhs_batch_dims={1}, "
             "rhs_contracting_dims={0}", want)


def test_dot_vector():
    # Matrix x vector: (3, 4) x (4) -> (3). Reference: np.dot.
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    b = np.array([1.0, -2.0, 0.5, 3.0])
    dot_case("dot_vector", "f64", a, b, "lhs_contracting_dims={1}, rhs_contracting_dims={0}",
             a @ b)


# ---- sort -------------------------------------------------------------------------------

def sort_data(t, name):
    x = mixed(t, (4, 9), name)
    if t in FLOATS:
        # TOTALORDER puts -0 before +0; a stable NumPy sort does too when every -0 comes
        # first in its row. NaNs are positive (NumPy and TOTALORDER put them last).
        x = np.where(np.isnan(x.astype(np.float64)), np.array(np.nan, NP[t]), x)
        x[:, 0] = np.array(-0.0, NP[t])
        x[:, -1] = np.array(0.0, NP[t])
    return x


@pytest.mark.parametrize("t", ALL)
@pytest.mark.parametrize("direction", ["LT", "GT"])
def test_sort(direction, t):
    # Reference: np.sort(kind='stable') along dim 1 (reversed for GT). Float comparators
    # use type=TOTALORDER (as JAX writes them).
    x = sort_data(t, "sort" + t)
    extra = ", type=TOTALORDER" if t in FLOATS else ""
    comps = oc.scalar_comp("cmp", t, "compare", ", direction=%s%s" % (direction, extra))
    # (sorted as f64 and converted back: ml_dtypes' bf16 sort mishandles inf and NaN)
    want = np.sort(x.astype(np.float64) if t in FLOATS else x, axis=1, kind="stable")
    want = want.astype(NP[t])
    if direction == "GT":    # descending: NaN first, +0 before -0
        want = want[:, ::-1]
    check("sort_%s_%s" % (direction, t),
          module("sort", [x], "%s sort(p0), dimensions={1}, to_apply=cmp" % shape_str(t, x.shape),
                 comps), [x], [np.ascontiguousarray(want)], [t])


SORT2 = """cmp2 {
  ak = s32[] parameter(0)
  bk = s32[] parameter(1)
  av = f32[] parameter(2)
  bv = f32[] parameter(3)
  ROOT lt = pred[] compare(ak, bk), direction=LT
}
"""


def test_sort_stable_key_value():
    # Two operands sorted by the first (many equal keys), is_stable=true along dim 0.
    # Reference: np.argsort(kind='stable') applied to both.
    r = oc.rng_for("sort2")
    k = r.integers(0, 4, 20).astype(np.int32)
    v = np.arange(20, dtype=np.float32) * 0.5
    order = np.argsort(k, kind="stable")
    hlo = module("sort2", [k, v], "(s32[20], f32[20]) sort(p0, p1), dimensions={0}, "
                 "is_stable=true, to_apply=cmp2", SORT2)
    check("sort_stable_key_value", hlo, [k, v], [k[order], v[order]], ["s32", "f32"])
