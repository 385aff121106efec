"""test_ops_numpy_shape.py — the first-wave HLO ops that move or combine data (iota,
broadcast, reshape, transpose, slice, dynamic-slice, dynamic-update-slice, concatenate, pad,
reverse, gather, scatter, reduce, dot, sort), every element type they are defined on, run by
`build/hlojit run` and compared with NumPy; the conventions are test_ops_numpy.py's.

References, stated per test: NumPy's index operations (exact); jax.lax with x64 where NumPy
has no function with XLA's exact semantics — clamped dynamic-slice / dynamic-update-slice
starts (allow_negative_indices=False: JAX's default would wrap them NumPy-style), pad with
negative and interior padding, gather (clamped starts), scatter (out-of-bounds windows
skipped). Sums and dots use small integers so that every summation order is exact, plus one
random f32/f64 case each with a stated tolerance.
"""

import os

import numpy as np
import pytest
from jax import lax

import ml_dtypes
import opcases as oc
from opcases import ALL, FLOATS, INTS, NP, UINTS, check, jx, mixed, module, shape_str

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def ids(xs):
    return [str(x) for x in xs]


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


# Mixed precision (XLA allows floats of different widths: f32 x bf16 -> f32, the weights kept
# in bf16). Shapes reach every CPU path: M = 1 (the gemvs, B normal with rows of B one or 8 at
# a time, and transposed), M = 7 and
# 64 (packed gemm, a remainder row block), N and K off the vector width. Reference: NumPy in
# f64 on the widened rhs (bf16 -> f32 is exact), 1e-5 of the sum of |terms|; and on the CPU
# and the evaluator, the f32 dot of the widened rhs through the same backend, which must give
# the same bits (the CUDA backend runs a mixed dot in the evaluator, its f32 dot on the GPU:
# another summation order).
@pytest.mark.parametrize("m,k,n,trans", [(1, 67, 45, False), (1, 67, 45, True), (1, 67, 1100, False),
                                         (7, 130, 37, False),
                                         (7, 130, 37, True), (64, 768, 100, False),
                                         (64, 768, 100, True)])
def test_dot_f32_bf16(m, k, n, trans):
    r = oc.rng_for("dotbf%d_%d_%d_%d" % (m, k, n, trans))
    a = r.normal(0, 1, (m, k)).astype(np.float32)
    b = r.normal(0, 1, (n, k) if trans else (k, n)).astype(ml_dtypes.bfloat16)
    bw = b.astype(np.float32)
    attrs = "lhs_contracting_dims={1}, rhs_contracting_dims={%d}" % (1 if trans else 0)
    bm = bw.T if trans else bw
    want = (a.astype(np.float64) @ bm.astype(np.float64)).astype(np.float32)
    scale = (np.abs(a).astype(np.float64) @ np.abs(bm).astype(np.float64)).max()
    name = "dot_f32_bf16_%dx%dx%d%s" % (m, k, n, "t" if trans else "")
    hlo = module("dot", [a, b], "f32[%d,%d] dot(p0, p1), %s" % (m, n, attrs))
    dot_case(name, "f32", a, b, attrs, want, tol=(0, 1e-5 * scale))
    if oc.BACKEND not in ("cpu", "interp"):
        return
    got = oc.run(name + "_bits", hlo, [a, b], 1)
    ref = oc.run(name + "_f32", module("dot", [a, bw], "f32[%d,%d] dot(p0, p1), %s" % (m, n, attrs)),
                 [a, bw], 1)
    if got is not None:
        assert np.array_equal(got[0].view(np.uint32), ref[0].view(np.uint32)), name
        oc.remove_case_dir(name + "_bits")
        oc.remove_case_dir(name + "_f32")


def test_dot_mixed_ints_rejected():
    # Integer types of different widths are not a mixed-precision dot: a clear parse error.
    a = np.ones((2, 3), np.int32)
    b = np.ones((3, 2), np.int16)
    hlo = module("dot", [a, b], "s32[2,2] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}")
    if os.environ.get("HLOJIT_DRYRUN"):
        return
    with pytest.raises(oc.RunError, match="element types differ"):
        oc.run("dot_mixed_ints", hlo, [a, b], 1)
    oc.remove_case_dir("dot_mixed_ints")


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


# u64 is left out: jax.lax.top_k on CPU returns u64 values above 2^53 rounded as doubles
# (2708600709339372262 -> ...032), where the topk of XLA's semantics moves them unchanged.
@pytest.mark.parametrize("t", [t for t in ALL if t not in ("pred", "u64")])
@pytest.mark.parametrize("k", [0, 1, 4, 9])
def test_topk(k, t):
    # Reference: jax.lax.top_k (XLA's topk on CPU; largest, ties to the lower index) on edge
    # values with many repeats; its values are data moved, never computed. Indices exact.
    x = mixed(t, (4, 9), "topk" + t)
    x[:, 3] = x[:, 5]                      # ties
    wv, wi = jx(lambda v: lax.top_k(v, k), x)
    hlo = module("topk", [x], "(%s, s32[4,%d]) topk(p0), k=%d, largest=true"
                 % (shape_str(t, (4, k)), k, k))
    check("topk_%d_%s" % (k, t), hlo, [x], [wv.astype(NP[t]), wi.astype(np.int32)], [t, "s32"])


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
