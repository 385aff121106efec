"""Kernel counts of the optimised module printed by `hlojit opt MODULE.hlo` (the pass
pipeline with the fusion passes) on the JAX-made modules of tests/fixtures/hlo_pass
(tests/gen/gen_pass_fixtures.py): GELU one kernel, softmax and layer norm one each (their two
reduces chained in one row kernel), a GPT-2 block at most 11 with the MLP's bias and GELU
inside a kOutput (matmul) fusion.

The count is hlo_count_kernels (passes/fusion.c) when the tool prints it (a line
"kernels: N"); otherwise the same rule is applied to the printed ENTRY: every instruction
except parameter, constant, tuple, get-tuple-element, bitcast and reshape. The C tests
(tests/unit/test_fusion.c) check the same counts through the C API and the values before
and after. Skipped, saying so, while the tool has no `opt` command.
"""

import re
import subprocess

import pytest

from conftest import HLOJIT, REPO

FIXTURES = REPO / "tests" / "fixtures" / "hlo_pass"
NOT_KERNELS = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "reshape"}
INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*(.*?)\s([a-z][a-z0-9\-]*)\(")


def optimise(name):
    if not HLOJIT.exists():
        pytest.skip(f"{HLOJIT} not built")
    r = subprocess.run([str(HLOJIT), "opt", str(FIXTURES / f"{name}.hlo")],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0 and ("unknown" in r.stderr.lower() or "usage" in r.stderr.lower()):
        pytest.skip("hlojit has no `opt` command yet: " + r.stderr.strip()[:200])
    assert r.returncode == 0, r.stderr
    return r.stdout, r.stderr


def computations(text):
    """name -> list of instruction lines, and the entry's name."""
    comps, cur, entry = {}, None, None
    for line in text.splitlines():
        m = re.match(r"^(ENTRY\s+)?%?([\w.\-]+)\s*(\(.*\))?.*\{\s*$", line)
        if m and not line.startswith(" "):
            cur = m.group(2)
            comps[cur] = []
            if m.group(1):
                entry = cur
        elif line.startswith("}"):
            cur = None
        elif cur is not None and line.strip():
            comps[cur].append(line)
    return comps, entry


def opcode(line):
    m = INSTR.match(line)
    return m.group(2) if m else None


def kernels(stdout, stderr):
    m = re.search(r"kernels:\s*(\d+)", stdout + stderr)
    if m:
        return int(m.group(1))
    comps, entry = computations(stdout)
    assert entry, stdout[:2000]
    return sum(1 for l in comps[entry] if opcode(l) not in NOT_KERNELS)


@pytest.mark.parametrize("name,most,least", [
    ("gelu_tanh", 1, 1), ("softmax", 1, 1), ("layernorm", 1, 1), ("moments", 1, 1),
    ("gpt2_block", 11, 1),
])
def test_kernel_count(name, most, least):
    out, err = optimise(name)
    k = kernels(out, err)
    assert least <= k <= most, f"{name}: {k} kernels\n{out}"


def test_gpt2_block_matmul_epilogues():
    out, err = optimise("gpt2_block")
    comps, entry = computations(out)
    epilogues = []
    for line in comps[entry]:
        if opcode(line) == "fusion" and "kind=kOutput" in line:
            callee = re.search(r"calls=%?([\w.\-]+)", line).group(1)
            ops = {opcode(l) for l in comps[callee]}
            assert "dot" in ops, line
            epilogues.append(ops)
    assert any("tanh" in ops and "broadcast" in ops for ops in epilogues), epilogues
    assert sum("broadcast" in ops for ops in epilogues) >= 3   # the biases
