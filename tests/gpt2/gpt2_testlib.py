"""Helpers shared by the GPT-2 example's tests (tests/gpt2): paths of the tools and the data,
running a tool, checking a sanitizer said nothing, and the figures printed at the end."""
import os
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
VOCAB_DIR = os.path.join(ROOT, "examples", "gpt2", "data", "gpt2-bpe")
SHAKESPEARE = [os.path.join(ROOT, "examples", "gpt2", "data", "tinyshakespeare", "input.txt"),
               os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare", "input.txt")]


def tool(env, default):
    """The tool named by $env, else ROOT/default; fails the test if it is not built."""
    path = os.environ.get(env, os.path.join(ROOT, default))
    if not os.path.isabs(path):
        path = os.path.join(ROOT, path)
    if not os.path.exists(path):
        pytest.fail(f"{path} is missing: build it with `make -f examples/gpt2/gpt2.mk gpt2-tools`")
    return path


def run(cmd, data=b"", **kw):
    env = dict(os.environ)
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1")
    return subprocess.run(cmd, input=data, capture_output=True, env=env, timeout=300, **kw)


def no_sanitizer_report(p):
    err = p.stderr.decode(errors="replace")
    assert "AddressSanitizer" not in err and "runtime error" not in err and \
        "LeakSanitizer" not in err, err[-3000:]


# Figures the tests measure (mismatch counts, MB/s), printed at the end of the run.
REPORT = []


def report(line):
    REPORT.append(line)
