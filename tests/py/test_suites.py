"""How `make test` runs the Python files: test-py-cpu (HLOJIT_BACKEND=cpu) runs only the files
that read HLOJIT_BACKEND (the Makefile's PY_BACKEND_TESTS), since the others choose their
backends themselves and test-py has run them. So every file of tests/py and tests/models that reads it (through conftest's
or opcases' BACKEND) must be listed, or it would silently never run on the CPU backend."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]


def listed():
    text = (ROOT / "Makefile").read_text()
    m = re.search(r"^PY_BACKEND_TESTS\s*:=((?:.*\\\n)*.*)$", text, re.M)
    assert m, "the Makefile defines no PY_BACKEND_TESTS"
    return {pathlib.PurePosixPath(w).name for w in m.group(1).replace("\\\n", " ").split()}


def reads_backend(path):
    src = path.read_text()
    return bool(re.search(r"^\s*(from (conftest|opcases) import .*\bBACKEND\b|import (opcases|jaxcase)|"
                          r"from opcases import|.*os\.environ\.get\(\"HLOJIT_BACKEND\")", src, re.M))


def test_every_backend_file_runs_on_cpu():
    files = [*(ROOT / "tests" / "py").glob("test_*.py"), *(ROOT / "tests" / "models").glob("test_*.py")]
    want = {p.name for p in files if reads_backend(p)}
    have = listed()
    assert want - have == set(), f"read HLOJIT_BACKEND but not in PY_BACKEND_TESTS: {sorted(want - have)}"
    assert have - want == set(), f"in PY_BACKEND_TESTS but do not read HLOJIT_BACKEND: {sorted(have - want)}"
