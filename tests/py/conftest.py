"""Shared pytest fixtures for hlojit's Python conformance tests.

The tests drive the command-line tool (build/hlojit, and build/asan/hlojit, the
ASan+UBSan build, for the hostile-input tests) and compare what it writes with
references the project did not compute: XLA's golden literals, JAX's outputs, NumPy.

HLOJIT_BACKEND (interp by default) picks the backend of the suites that run modules
(golden, JAX fixtures, round trip, ops).

The XLA corpus lives outside the repository, in ../shared/hlo-corpus next to the
repo root (or wherever $HLOJIT_CORPUS points); tests that need it are skipped,
saying so, when it is absent.
"""

import os
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = REPO / "build"
HLOJIT = pathlib.Path(os.environ.get("HLOJIT_BIN", BUILD / "hlojit"))
HLOJIT_ASAN = BUILD / "asan" / "hlojit"
JAX_FIXTURES = REPO / "tests" / "fixtures" / "jax"
# The backend the conformance suites run on (`make test-py-cpu` sets cpu): interp (the
# reference evaluator, the default), cpu, or auto.
BACKEND = os.environ.get("HLOJIT_BACKEND", "interp")

# Sanitizer reports must fail the process and be recognisable in stderr.
SAN_ENV = {
    "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:exitcode=99",
    "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1:exitcode=99",
}


def corpus_dir():
    """The corpus directory, or None when it is not there."""
    env = os.environ.get("HLOJIT_CORPUS")
    p = pathlib.Path(env) if env else REPO.parent / "shared" / "hlo-corpus"
    return p if p.is_dir() else None


def corpus_skip_reason():
    env = os.environ.get("HLOJIT_CORPUS")
    where = f"$HLOJIT_CORPUS={env}" if env else str(REPO.parent / "shared" / "hlo-corpus")
    return f"no HLO corpus at {where} (the corpus is not part of the repository)"


def run_tool(binary, args, timeout=600, env=None):
    """Runs |binary| with |args| (strings or paths); returns CompletedProcess (text)."""
    e = dict(os.environ)
    e.update(SAN_ENV)
    if env:
        e.update(env)
    return subprocess.run([str(binary)] + [str(a) for a in args], capture_output=True,
                          text=True, errors="replace", timeout=timeout, env=e)


def _need(path):
    if not path.exists():
        pytest.fail(f"{path} is missing: build it first (`make all` / `make test`)")
    return path


@pytest.fixture(scope="session")
def hlojit_bin():
    return _need(HLOJIT)


@pytest.fixture(scope="session")
def hlojit_asan_bin():
    return _need(HLOJIT_ASAN)


@pytest.fixture(scope="session")
def corpus():
    d = corpus_dir()
    if d is None:
        pytest.skip(corpus_skip_reason())
    return d


@pytest.fixture
def hlojit(hlojit_bin):
    """hlojit(args...) -> CompletedProcess of build/hlojit."""
    return lambda *args, timeout=600: run_tool(hlojit_bin, args, timeout=timeout)


@pytest.fixture
def hlojit_asan(hlojit_asan_bin):
    """The same, with the ASan+UBSan build; a sanitizer report fails the test."""

    def run(*args, timeout=600):
        r = run_tool(hlojit_asan_bin, args, timeout=timeout)
        assert "Sanitizer" not in r.stderr and "runtime error" not in r.stderr, r.stderr
        assert r.returncode in (0, 1), f"exit {r.returncode}: {r.stderr}"
        return r

    return run


# ---- HLOJIT_BACKEND=cuda (make test-gpu): skipped, saying why, without a usable GPU ------------

_CUDA_PROBE = """HloModule probe
ENTRY main {
  x = f32[4] parameter(0)
  ROOT y = f32[4] add(x, x)
}
"""


def cuda_unavailable():
    """None when `hlojit run --backend cuda` works here; else why not (no driver, no device,
    or the CUDA test double, which runs no kernels, unless HLOJIT_GPU_TEST_ON_DOUBLE=1 asks
    for a dry run of the tests themselves)."""
    lib = os.environ.get("HLOJIT_LIBCUDA", "")
    if "cuda_double" in lib and not os.environ.get("HLOJIT_GPU_TEST_ON_DOUBLE"):
        return "no CUDA device: HLOJIT_LIBCUDA=%s is the CUDA test double, which runs no kernels" % lib
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        p = pathlib.Path(d) / "probe.hlo"
        p.write_text(_CUDA_PROBE)
        try:
            r = subprocess.run([str(HLOJIT), "run", str(p), "--backend", "cuda", "--random-inputs", "1"],
                               capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as e:
            return "cannot run %s: %s" % (HLOJIT, e)
    if r.returncode != 0:
        return (r.stderr.strip().splitlines() or ["hlojit run --backend cuda failed"])[-1]
    return None


def pytest_collection_modifyitems(config, items):
    if BACKEND != "cuda":
        return
    why = cuda_unavailable()
    if why:
        mark = pytest.mark.skip(reason="HLOJIT_BACKEND=cuda: " + why)
        for item in items:
            item.add_marker(mark)
