"""The ops beyond convolution that real JAX programs use, against JAX: sort, argsort, top_k,
cumulative ops, scatters, dots of every type pair, composite calls.

Each case is a small JAX function lowered by JAX itself to HLO text and run through hlojit on
$HLOJIT_BACKEND (interp, cpu, or the GPU emulator), every output compared with JAX's
(jaxcase.run_case). On a compiling backend these run as the sort and scatter kernels
(emitters/sort.c, scatter.c and their GPU twins; topk becomes a sort, passes/sort_lower.c)
with 0 evaluator fallbacks.

What the table covers: rows that are not powers of two (1, 3, 37, 1000, 1025), sorts along
a leading dim, ties (values rounded to a few levels), NaN, +-inf and +-0 (JAX's comparator
orders them by total order after canonicalising NaN and -0), stable argsort ascending and
descending, several operands with one and two keys, s32, bf16, f16 and bool keys; top_k with
ties, NaN, k = n, bf16, 3-D and k > 64 (which becomes a sort); cumsum/cummax/cumprod; scatters: add, set (duplicate indices: the last
update wins, XLA's order), max, min, mul, out-of-bounds indices dropped, 2-D indices, an
embedding gradient, a vmapped scatter (batching dims), segment_sum, s32 data; dots bf16,
f16, f64 (under jax.enable_x64), s8 -> s32, u8 -> u32, s32, mixed (f32 x bf16, f16 x f32), batched
(bf16 and f16 run as an f32 dot and one rounding, XLA:CPU's rule; f64 and integer dots as
loop kernels); a jax.lax.composite call (is_composite=true: the decomposition runs).

Tolerances: sorts, permutations, top_k, set/max/min scatters and integers bit-exact (the
same comparisons in the same order); float scatter-adds and cumsums within test_conv_jax's
f32 tolerance (XLA:CPU adds in the same order, so they agree to the bit in practice, but the
test does not insist).
"""

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_platforms", "cpu")
import jaxcase  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

BF16 = jaxcase.BF16


def keys(shape, dtype, seed, levels=None, specials=False):
    """Random keys; |levels| rounds them to that many values (ties); |specials| plants NaN,
    -NaN, +-inf and +-0."""
    r = np.random.default_rng(seed)
    x = r.uniform(-1, 1, size=shape)
    if levels:
        x = np.round(x * levels / 2) / (levels / 2)
    x = x.astype(np.float32)
    if specials and x.size >= 8:
        flat = x.reshape(-1)
        pos = r.choice(flat.size, 8, replace=False)
        flat[pos] = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, np.nan, 0.0]
    if np.dtype(dtype).kind in "iu":
        return (x * 50).astype(dtype)
    if np.dtype(dtype) == np.bool_:
        return x > 0
    return x.astype(dtype)


def sort_case(name, f, args):
    jaxcase.run_case("sort_" + name, f, args, exact=True)


def scatter_case(name, f, args, exact=False):
    jaxcase.run_case("scatter_" + name, f, args, exact=exact)


# ---- sort, argsort, top_k -------------------------------------------------------------------

SORTS = {
    "f32_row1000": (lambda x: jnp.sort(x, axis=-1), [((16, 1000), np.float32, 10)]),
    "f32_specials": (lambda x: jnp.sort(x, axis=-1), [((4, 37), np.float32, None, True)]),
    "f32_axis0": (lambda x: jnp.sort(x, axis=0), [((37, 5), np.float32, 6)]),
    "f32_len1": (lambda x: jnp.sort(x, axis=-1), [((3, 1), np.float32, None)]),
    "f32_len3": (lambda x: jnp.sort(x, axis=-1), [((5, 3), np.float32, 2)]),
    "f32_len1025": (lambda x: jnp.sort(x), [((1025,), np.float32, 40)]),
    "f32_3d_mid": (lambda x: jnp.sort(x, axis=1), [((3, 33, 4), np.float32, 8)]),
    "argsort_ties": (lambda x: jnp.argsort(x, axis=-1), [((8, 100), np.float32, 5)]),
    "argsort_desc": (lambda x: jnp.argsort(x, axis=-1, descending=True), [((8, 100), np.float32, 5)]),
    "argsort_specials": (lambda x: jnp.argsort(x), [((64,), np.float32, 4, True)]),
    "sort_and_argsort": (lambda x: (jnp.sort(x, axis=-1), jnp.argsort(x, axis=-1)),
                         [((16, 1000), np.float32, None)]),
    "kv_one_key": (lambda k, v: lax.sort((k, v), dimension=1, num_keys=1),
                   [((6, 50), np.float32, 4), ((6, 50), np.int32, None)]),
    "kv_two_keys": (lambda a, b, v: lax.sort((a, b, v), dimension=0, num_keys=2),
                    [((40, 3), np.int32, 3), ((40, 3), np.float32, 3), ((40, 3), np.float32, None)]),
    "s32": (lambda x: jnp.sort(x, axis=-1), [((4, 77), np.int32, None)]),
    "bf16": (lambda x: jnp.sort(x, axis=-1), [((4, 65), BF16, 20, True)]),
    "f16": (lambda x: jnp.argsort(x, axis=-1), [((4, 65), np.float16, 20)]),
    "bool": (lambda x: jnp.argsort(x), [((30,), np.bool_, None)]),
    "top_k": (lambda x: lax.top_k(x, 5), [((8, 100), np.float32, 6)]),
    "top_k_specials": (lambda x: lax.top_k(x, 7), [((2, 40), np.float32, 3, True)]),
    "top_k_all": (lambda x: lax.top_k(x, 9), [((3, 9), np.float32, 2)]),
    "top_k_s32": (lambda x: lax.top_k(x, 4), [((5, 31), np.int32, None)]),
    "top_k_bf16": (lambda x: lax.top_k(x, 3), [((4, 50), BF16, 6, True)]),
    "top_k_3d": (lambda x: lax.top_k(x, 2), [((2, 3, 17), np.float32, 4)]),
    "top_k_large_k": (lambda x: lax.top_k(x, 100), [((3, 300), np.float32, 20, True)]),   # k > 64: a sort
}


@pytest.mark.parametrize("name", sorted(SORTS))
def test_sort(name):
    f, specs = SORTS[name]
    args = []
    for i, sp in enumerate(specs):
        shape, dtype, levels = sp[:3]
        args.append(keys(shape, dtype, 100 + i, levels, len(sp) > 3 and sp[3]))
    sort_case(name, f, args)


CUMULATIVE = {
    "cumsum": lambda x: jnp.cumsum(x, axis=-1),
    "cummax": lambda x: lax.cummax(x, axis=1),
    "cumprod0": lambda x: jnp.cumprod(1 + 0.01 * x, axis=0),
}


@pytest.mark.parametrize("name", sorted(CUMULATIVE))
def test_cumulative(name):
    jaxcase.run_case("sort_" + name, CUMULATIVE[name], [keys((16, 300), np.float32, 7)], taps=300)


# ---- scatter --------------------------------------------------------------------------------

def idx(n, hi, seed, lo=0):
    return np.random.default_rng(seed).integers(lo, hi, size=n).astype(np.int32)


def test_scatter_add_duplicates():
    scatter_case("add", lambda x, i, u: x.at[i].add(u),
                 [keys((64, 16), np.float32, 1), idx(200, 64, 2), keys((200, 16), np.float32, 3)])


def test_scatter_set_last_wins():
    scatter_case("set", lambda x, i, u: x.at[i].set(u),
                 [keys((50, 8), np.float32, 1), idx(120, 50, 2), keys((120, 8), np.float32, 3)], exact=True)


@pytest.mark.parametrize("op", ["max", "min", "mul"])
def test_scatter_combiners(op):
    f = {"max": lambda x, i, u: x.at[i].max(u), "min": lambda x, i, u: x.at[i].min(u),
         "mul": lambda x, i, u: x.at[i].multiply(u)}[op]
    scatter_case(op, f, [keys((33,), np.float32, 1), idx(90, 33, 2), keys((90,), np.float32, 3)],
                 exact=op != "mul")


def test_scatter_out_of_bounds_dropped():
    scatter_case("drop", lambda x, i, u: x.at[i].add(u, mode="drop"),
                 [keys((20, 4), np.float32, 1), idx(60, 26, 2, lo=-6), keys((60, 4), np.float32, 3)])


def test_scatter_2d_index():
    scatter_case("2d", lambda x, i, j, u: x.at[i, j].add(u),
                 [keys((12, 9, 3), np.float32, 1), idx(40, 12, 2), idx(40, 9, 3), keys((40, 3), np.float32, 4)])


def test_scatter_embedding_grad():
    def loss(table, ids, w):
        return jnp.sum(jnp.tanh(table[ids]) * w)
    scatter_case("embed_grad", jax.grad(loss),
                 [keys((300, 32), np.float32, 1), idx(500, 300, 2), keys((500, 32), np.float32, 3)])


def test_scatter_vmapped():
    f = jax.vmap(lambda x, i, u: x.at[i].add(u))
    scatter_case("vmap", f, [keys((4, 10, 3), np.float32, 1), np.stack([idx(7, 10, s) for s in range(4)]),
                             keys((4, 7, 3), np.float32, 3)])


def test_scatter_segment_sum():
    f = lambda d, s: jax.ops.segment_sum(d, s, num_segments=10)  # noqa: E731
    scatter_case("segment_sum", f, [keys((100, 5), np.float32, 1), idx(100, 10, 2)])


def test_scatter_s32():
    scatter_case("s32", lambda x, i, u: x.at[i].add(u),
                 [keys((40,), np.int32, 1), idx(100, 40, 2), keys((100,), np.int32, 3)], exact=True)


# ---- dots of every type pair (XLA's rules: bf16/f16 through an f32 dot, integers exact) ------

DOTS = {
    "bf16": (BF16, BF16, None), "f16": (np.float16, np.float16, None), "f64": (np.float64, np.float64, None),
    "bf16_to_f32": (BF16, BF16, np.float32), "s8_to_s32": (np.int8, np.int8, np.int32),
    "s32": (np.int32, np.int32, None), "u8_to_u32": (np.uint8, np.uint8, np.uint32),
    "f32_bf16": (np.float32, BF16, None), "f16_f32": (np.float16, np.float32, None),
}


@pytest.mark.parametrize("name", sorted(DOTS))
def test_dot_types(name):
    lt, rt, pt = DOTS[name]
    if np.dtype(lt).kind in "iu":
        a, b = keys((3, 24, 40), lt, 1), keys((3, 40, 17), rt, 2)
    else:
        a, b = keys((3, 24, 40), np.float32, 1).astype(lt), keys((3, 40, 17), np.float32, 2).astype(rt)
    f = lambda x, y: lax.dot_general(x, y, (((2,), (1,)), ((0,), (0,))), preferred_element_type=pt)  # noqa: E731
    with jax.enable_x64(name == "f64"):   # f64 arrays stay f64 only under x64
        jaxcase.run_case("dot_" + name, f, [a, b], taps=40)


# ---- composite calls (jax.lax.composite: the decomposition runs) ----------------------------

def test_composite_call():
    from functools import partial

    @partial(lax.composite, name="hlojit.softplus")
    def softplus(x):
        return jnp.log1p(jnp.exp(x))
    # hlojit prints the call without is_composite (its meaning is the decomposition, which
    # XLA reads back as a plain call), so the printed text is not XLA's: printed=False
    jaxcase.run_case("composite", lambda x: softplus(x) * 2, [keys((5, 7), np.float32, 1)], printed=False)


# ---- jnp.linalg / lax.linalg: custom-calls to jaxlib's LAPACK targets, run by LAPACK --------

def spd(n, batch=(), seed=1):
    a = keys((*batch, n, n), np.float32, seed)
    return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n, dtype=np.float32)).astype(np.float32)


LINALG = {
    "cholesky": (lambda a: jnp.linalg.cholesky(a), lambda: [spd(9)]),
    "cholesky_batched": (lambda a: jnp.linalg.cholesky(a), lambda: [spd(5, (2, 3))]),
    "cholesky_upper": (lambda a: lax.linalg.cholesky(a, symmetrize_input=False).T, lambda: [spd(6)]),
    "cholesky_not_spd": (lambda a: jnp.linalg.cholesky(a), lambda: [-spd(4)]),   # NaNs, as JAX
    "solve": (lambda a, b: jnp.linalg.solve(a, b), lambda: [keys((7, 7), np.float32, 1) + 4 * np.eye(7, dtype=np.float32),
                                                           keys((7, 3), np.float32, 2)]),
    "solve_batched": (lambda a, b: jnp.linalg.solve(a, b), lambda: [keys((3, 5, 5), np.float32, 1) + 3 * np.eye(5, dtype=np.float32),
                                                                   keys((3, 5, 2), np.float32, 2)]),
    "lu": (lambda a: lax.linalg.lu(a), lambda: [keys((6, 6), np.float32, 3)]),
    "lu_wide": (lambda a: lax.linalg.lu(a), lambda: [keys((4, 7), np.float32, 3)]),
    "inv": (lambda a: jnp.linalg.inv(a), lambda: [keys((6, 6), np.float32, 4) + 3 * np.eye(6, dtype=np.float32)]),
    "tri_left_lower": (lambda a, b: lax.linalg.triangular_solve(a, b, left_side=True, lower=True),
                       lambda: [spd(6), keys((6, 4), np.float32, 2)]),
    "tri_right_upper_t": (lambda a, b: lax.linalg.triangular_solve(a, b, left_side=False, lower=False, transpose_a=True),
                          lambda: [spd(5), keys((3, 5), np.float32, 2)]),
    "tri_unit": (lambda a, b: lax.linalg.triangular_solve(a, b, left_side=True, lower=True, unit_diagonal=True),
                 lambda: [spd(5), keys((5, 2), np.float32, 2)]),
    "det": (lambda a: jnp.linalg.det(a), lambda: [keys((2, 5, 5), np.float32, 6)]),
    "qr_reduced": (lambda a: jnp.linalg.qr(a), lambda: [keys((7, 4), np.float32, 7)]),
    "qr_complete": (lambda a: jnp.linalg.qr(a, mode="complete"), lambda: [keys((5, 3), np.float32, 7)]),
    "qr_batched": (lambda a: jnp.linalg.qr(a), lambda: [keys((3, 4, 4), np.float32, 8)]),
    "eigh": (lambda a: jnp.linalg.eigh(a), lambda: [spd(6)]),
    "eigvalsh_batched": (lambda a: jnp.linalg.eigvalsh(a), lambda: [spd(5, (3,))]),
    "svd_full": (lambda a: jnp.linalg.svd(a), lambda: [keys((6, 4), np.float32, 9)]),
    "svd_economy": (lambda a: jnp.linalg.svd(a, full_matrices=False), lambda: [keys((4, 7), np.float32, 9)]),
    "svd_values": (lambda a: jnp.linalg.svd(a, compute_uv=False), lambda: [keys((2, 5, 3), np.float32, 9)]),
    "lstsq_pinv": (lambda a: jnp.linalg.pinv(a), lambda: [keys((6, 3), np.float32, 10)]),
}


@pytest.mark.parametrize("name", sorted(LINALG))
def test_linalg(name):
    f, args = LINALG[name]
    jaxcase.run_case("linalg_" + name, f, args(), taps=16)


def test_linalg_f64():
    with jax.enable_x64(True):
        a = spd(8).astype(np.float64)
        jaxcase.run_case("linalg_f64", lambda a, b: (jnp.linalg.cholesky(a), jnp.linalg.solve(a, b),
                                                     jnp.linalg.qr(b), jnp.linalg.eigh(a), jnp.linalg.svd(b)),
                         [a, keys((8, 2), np.float32, 5).astype(np.float64)], taps=16)


# ---- rng-bit-generator: XLA's three-fry and philox, bit for bit ---------------------------

RNG = {   # name: (algorithm, data shape, dtype, u32 words of the state: JAX's u64[2])
    "threefry_u32": ("RNG_THREE_FRY", (3, 5), np.uint32, 4),
    "threefry_u32_odd": ("RNG_THREE_FRY", (3, 7, 5), np.uint32, 4),
    "threefry_u32_scalar": ("RNG_THREE_FRY", (), np.uint32, 4),
    "threefry_u64": ("RNG_THREE_FRY", (4, 9), np.uint64, 4),
    "threefry_u8": ("RNG_THREE_FRY", (6, 10), np.uint8, 4),
    "philox_u32": ("RNG_PHILOX", (7, 3), np.uint32, 4),
    "philox_u32_even": ("RNG_PHILOX", (5, 6), np.uint32, 4),
    "philox_u64": ("RNG_PHILOX", (9,), np.uint64, 4),
    "philox_u16": ("RNG_PHILOX", (3, 11), np.uint16, 4),
    "default_u32": ("RNG_DEFAULT", (1000,), np.uint32, 4),
}


@pytest.mark.parametrize("name", sorted(RNG))
def test_rng_bit_generator(name):
    alg, shape, dt, words = RNG[name]
    a = getattr(lax.RandomAlgorithm, alg)
    # the counter's low word near 2^32 - 1: the carry into the high words is exercised
    state = np.array([0x12345678, 0x9abcdef0, 0xfffffff0, 0x7][:words], np.uint32)
    with jax.enable_x64(dt == np.uint64):
        jaxcase.run_case("rng_" + name, lambda s: lax.rng_bit_generator(s, shape, dtype=dt, algorithm=a),
                         [state], exact=True)
