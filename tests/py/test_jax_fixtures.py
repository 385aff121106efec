"""JAX fixtures: HLO modules that JAX lowered, with JAX's own inputs and outputs
(tests/fixtures/jax, made by tests/gen/gen_jax_fixtures.py; MANIFEST.txt lists
`NAME nin nout`).

Each fixture runs as `hlojit run NAME.hlo --backend $HLOJIT_BACKEND (interp) --input NAME.in0.npy ...
--out DIR`, and every DIR/outK.npy is compared with NAME.outK.npy:
  - integers and pred: exactly;
  - f32 (and f64): |got - want| <= 1e-5 * |want| + 1e-6 elementwise — a relative
    tolerance of 1e-5, with an absolute floor of 1e-6 so that values near zero (where a
    relative bound means nothing) are judged on absolute error;
  - f16 / bf16: the same form with 2^-10 / 2^-7 relative and 1e-5 absolute (half an
    ulp-ish, as JAX and the evaluator may round once differently);
  - NaN where JAX has NaN, and infinities equal.
On failure the message lists every output's max abs and max rel error.
"""

import numpy as np
import pytest

from conftest import BACKEND, JAX_FIXTURES

TOL = {  # dtype -> (rtol, atol)
    np.dtype(np.float64): (1e-5, 1e-6),
    np.dtype(np.float32): (1e-5, 1e-6),
    np.dtype(np.float16): (2.0 ** -10, 1e-5),
}


def manifest():
    rows = []
    for line in (JAX_FIXTURES / "MANIFEST.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, nin, nout = line.split()
            rows.append((name, int(nin), int(nout)))
    return rows


FIXTURES = manifest()


def compare(got, want):
    """(ok, description) for one output."""
    if got.dtype != want.dtype or got.shape != want.shape:
        return False, f"got {got.dtype}{list(got.shape)}, want {want.dtype}{list(want.shape)}"
    if want.dtype.kind in "biu":
        bad = int(np.count_nonzero(got != want))
        return bad == 0, f"{bad} of {want.size} elements differ"
    rtol, atol = TOL.get(want.dtype, (2.0 ** -7, 1e-5))
    g, w = got.astype(np.float64), want.astype(np.float64)
    nan_ok = np.array_equal(np.isnan(g), np.isnan(w))
    inf_ok = np.array_equal(np.isinf(w), np.isinf(g)) and np.array_equal(g[np.isinf(w)], w[np.isinf(w)])
    fin = np.isfinite(w) & np.isfinite(g)
    err = np.abs(g[fin] - w[fin])
    rel = err / np.maximum(np.abs(w[fin]), 1e-30)
    ok = nan_ok and inf_ok and bool(np.all(err <= rtol * np.abs(w[fin]) + atol))
    desc = (f"max abs err {err.max(initial=0.0):.3g}, max rel err {rel.max(initial=0.0):.3g}"
            f" (rtol {rtol:.3g}, atol {atol:.3g})" + ("" if nan_ok else ", NaN positions differ")
            + ("" if inf_ok else ", infinities differ"))
    return ok, desc


def test_manifest_complete():
    assert len(FIXTURES) >= 30
    for name, nin, nout in FIXTURES:
        assert (JAX_FIXTURES / f"{name}.hlo").exists(), name
        for k in range(nin):
            assert (JAX_FIXTURES / f"{name}.in{k}.npy").exists(), (name, k)
        for k in range(nout):
            assert (JAX_FIXTURES / f"{name}.out{k}.npy").exists(), (name, k)


def test_compare_catches_errors():
    w = np.array([1.0, 0.0, np.nan, np.inf], np.float32)
    assert compare(w.copy(), w)[0]
    near = w.copy()
    near[0], near[1] = 1 + 5e-6, 5e-7  # within rtol, and within atol of 0
    assert compare(near, w)[0]
    assert not compare(np.array([1.001, 0, np.nan, np.inf], np.float32), w)[0]
    assert not compare(np.array([1.0, 2e-6, np.nan, np.inf], np.float32), w)[0]
    assert not compare(np.array([1.0, 0, 0, np.inf], np.float32), w)[0]
    assert not compare(np.array([1, 2], np.int32), np.array([1, 3], np.int32))[0]


@pytest.mark.parametrize("name,nin,nout", FIXTURES, ids=[f[0] for f in FIXTURES])
def test_jax_fixture(name, nin, nout, hlojit, tmp_path):
    args = ["run", JAX_FIXTURES / f"{name}.hlo", "--backend", BACKEND, "--out", tmp_path]
    for k in range(nin):
        args += ["--input", JAX_FIXTURES / f"{name}.in{k}.npy"]
    r = hlojit(*args)
    assert r.returncode == 0, f"{name}: hlojit failed:\n{r.stderr}"
    report, ok = [], True
    for k in range(nout):
        path = tmp_path / f"out{k}.npy"
        if not path.exists():
            ok = False
            report.append(f"out{k}: missing")
            continue
        good, desc = compare(np.load(path), np.load(JAX_FIXTURES / f"{name}.out{k}.npy"))
        ok &= good
        report.append(f"out{k}: {'ok' if good else 'MISMATCH'}: {desc}")
    if (tmp_path / f"out{nout}.npy").exists():
        ok = False
        report.append(f"more than {nout} outputs")
    assert ok, f"{name}:\n  " + "\n  ".join(report)
