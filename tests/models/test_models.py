"""The suite of real JAX programs (programs.py) on $HLOJIT_BACKEND, one case per program:
every output within the program's tolerance of JAX's (XLA:CPU's) result, and on a compiling
backend (cpu, the GPU emulator) no op left to the evaluator. Programs hlojit does not run yet
(programs.NOT_YET) are strict xfails: they must be refused with a clear error, and the day
they run the xfail turns into a failure that asks for them to join the suite."""

import os
import shutil
import sys

import pytest

pytest.importorskip("flax")
pytest.importorskip("optax")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import programs  # noqa: E402
import suite  # noqa: E402

BACKEND = os.environ.get("HLOJIT_BACKEND", "interp")


@pytest.mark.parametrize("name", list(programs.PROGRAMS))
def test_program(name):
    dry = os.environ.get("HLOJIT_DRYRUN")   # tools/ptx_check.py: the module is all it wants
    if dry and name in programs.NOT_YET:
        return
    d, nin, want, tol = suite.prepare(name)   # cached for the other backends' runs (suite.prepare)
    if dry:   # the module where ptx_check collects them
        out = os.path.join(os.environ.get("HLOJIT_TEST_OUT", os.path.join(suite.ROOT, "build")), "models", name)
        os.makedirs(out, exist_ok=True)
        shutil.copy(os.path.join(d, "mod.hlo"), os.path.join(out, "mod.hlo"))
        return
    st, res, fb, _ = suite.run(d, nin, want, tol, BACKEND)   # outputs in d/out_BACKEND
    if name in programs.NOT_YET:
        assert st == "refused", "%s was expected to be refused (%s) but is %s: %s" % (
            name, programs.NOT_YET[name], st, res)
        pytest.xfail(programs.NOT_YET[name])
    assert st == "ok", "%s on %s: %s: %s (case dir %s)" % (name, BACKEND, st, res, d)
    if BACKEND != "interp":
        assert fb == 0, "%s on %s: %d ops on the evaluator" % (name, BACKEND, fb)
