"""Fixtures of the GPT-2 example's tests: the tools (built by `make -f examples/gpt2/gpt2.mk
gpt2-tools`; GPT2_TOK, GPT2_TOK_ASAN and GPT2_WCHECK_ASAN override their paths) and the
tinyshakespeare text; prints the measured figures at the end of the run."""
import os

import pytest

from gpt2_testlib import REPORT, SHAKESPEARE, tool


@pytest.fixture(scope="session")
def gpt2_tok():
    return tool("GPT2_TOK", "build/examples/gpt2_tok")


@pytest.fixture(scope="session")
def gpt2_tok_asan():
    return tool("GPT2_TOK_ASAN", "build/asan/examples/gpt2_tok")


@pytest.fixture(scope="session")
def gpt2_wcheck_asan():
    return tool("GPT2_WCHECK_ASAN", "build/asan/examples/gpt2_wcheck")


@pytest.fixture(scope="session")
def shakespeare():
    for p in SHAKESPEARE:
        if os.path.exists(p):
            with open(p, "rb") as f:
                return f.read()
    pytest.skip("skipped: no tinyshakespeare input.txt (examples/gpt2/data or ../shared/data)")


def pytest_terminal_summary(terminalreporter):
    if REPORT:
        terminalreporter.section("gpt2 figures")
        for line in REPORT:
            terminalreporter.write_line(line)
