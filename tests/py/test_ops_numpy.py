"""test_ops_numpy.py — every first-wave elementwise HLO op (unary, binary, compare, select,
clamp, convert, bitcast-convert, copy), every element type it is defined on, run by
`build/hlojit run --backend interp` (HLOJIT_BACKEND to change) and compared with NumPy.
test_ops_numpy_shape.py does the same for the shape ops, gather/scatter, reduce, dot, sort.

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
    remainder (x/0 = -1 / x, INT_MIN/-1 = INT_MIN), shifts (amounts >= width), float->int
    convert (saturation, NaN->0), round-nearest-afz. XLA on CPU flushes subnormals, so jax
    only sees integers or f64 copies of narrower floats, never subnormal arithmetic.
bf16 uses ml_dtypes (its conversions round through f32, as XLA does). f16/bf16 references
of transcendental functions are computed in f64 and rounded to the type.
"""

import numpy as np
import pytest
import scipy.special
from jax import lax

import ml_dtypes
import opcases as oc
from opcases import ALL, FLOATS, INTS, NP, SINTS, UINTS, TRANS, check, jx, mixed, module, shape_str

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def r64(fn, x, t, *more):
    """Reference in f64, rounded to type t (f64 -> bf16 goes through f32, as XLA does)."""
    with np.errstate(all="ignore"):
        y = fn(x.astype(np.float64), *[m.astype(np.float64) for m in more])
    return np.asarray(y).astype(NP[t])


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


# reduce-precision (exponent_bits, mantissa_bits): the f16 and bf16 ranges, narrower ones,
# the extremes (1, 0), and each source type's own width (a no-op there).
REDUCE_PRECISION = [(5, 10), (8, 7), (4, 3), (2, 1), (1, 0), (8, 23), (11, 52), (6, 2)]


@pytest.mark.parametrize("t", FLOATS)
@pytest.mark.parametrize("eb,mb", REDUCE_PRECISION)
def test_reduce_precision(t, eb, mb):
    # Reference: jax.lax.reduce_precision = XLA (integer ops on the storage bits, so XLA's
    # flushing of subnormal arithmetic on CPU does not touch it), in the type itself.
    x = oc.unary_input(t, "rp" + t)
    want = jx(lambda v: lax.reduce_precision(v, eb, mb), x)
    check("reduce-precision_%s_%d_%d" % (t, eb, mb),
          module("rp", [x], "%s reduce-precision(p0), exponent_bits=%d, mantissa_bits=%d"
                 % (shape_str(t, x.shape), eb, mb)),
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
    if s in ("s64", "u64"):   # above an f32 tie by 1, beyond f64's 53 bits: one rounding
        x = np.concatenate([x, np.array([2 ** 60 + 2 ** 36 + 1, 2 ** 60 + 2 ** 36], NP[s])])
    want = convert_ref(x, s, d)
    check("convert_%s_%s" % (s, d), module("cvt", [x], "%s convert(p0)" % shape_str(d, x.shape)),
          [x], [want], [d])


def test_convert_f64_f16_rounds_once():
    # f64 values just above a rounding tie of f16: IEEE conversion (NumPy's cast) rounds
    # once and goes up; rounding through f32 first lands exactly on the tie and rounds to
    # even (down). (bf16 follows ml_dtypes, which rounds through f32, like XLA's CPU code.)
    x = np.array([1 + 2 ** -11 + 2 ** -40, -(1 + 2 ** -11 + 2 ** -40), 1 + 2 ** -11,
                  2049 + 2 ** -30, 3.0], np.float64)
    check("convert_f64_f16_rounds_once",
          module("cvt", [x], "%s convert(p0)" % shape_str("f16", x.shape)),
          [x], [x.astype(np.float16)], ["f16"])


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


@pytest.mark.parametrize("t", ALL)
def test_copy(t):
    x = mixed(t, (3, 11), "copy" + t)
    check("copy_" + t, module("copy", [x], "%s copy(p0)" % shape_str(t, x.shape)),
          [x], [x.copy()], [t])
