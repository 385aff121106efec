"""The printer's text is read by XLA's own HLO parser, and means what the input meant.

For every XLA-written module we have (the JAX fixtures, and the shared XLA corpus when it
is present), `build/hlojit print` writes our canonical text; XLA's parser (jaxlib bundles
XLA: jaxlib._hlo.hlo_module_from_text) must accept it, and XLA's own canonical printing of
our text must equal XLA's canonical printing of the original, once the attributes hlojit
drops on purpose (metadata, backend_config, operand_precision, sharding,
frontend_attributes, module flags) are taken out. Instruction order within a computation
is compared as a multiset: XLA re-sorts unscheduled modules.
"""
import glob
import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.environ.get("HLOJIT_TOOL") or os.path.join(ROOT, "build", "hlojit")

hlo = pytest.importorskip("jaxlib._hlo")
if not hasattr(hlo, "hlo_module_from_text"):
    pytest.skip("this jaxlib exposes no HLO text parser", allow_module_level=True)


def _corpus():
    d = os.environ.get("HLOJIT_CORPUS") or os.path.join(ROOT, "..", "shared", "hlo-corpus")
    return d if os.path.isdir(d) else None


def _modules():
    files = sorted(glob.glob(os.path.join(ROOT, "tests", "fixtures", "jax", "*.hlo")))
    c = _corpus()
    if c:
        files += sorted(glob.glob(os.path.join(c, "*.hlo")) + glob.glob(os.path.join(c, "golden", "*.hlo")))
    return files


_DROPPED = [r", operand_precision=\{[^}]*\}", r", sharding=\{[^}]*\}",
            r', frontend_attributes=\{(?:"[^"]*"|[^{}"])*\}',   # quoted values may hold braces
            r", output_to_operand_aliasing=\{.*?\)\}"]   # a buffer hint (custom-calls), no meaning


def _canonical(text):
    """XLA's parse + print, without the parts hlojit does not keep; one sorted line list
    per computation."""
    opts = hlo.HloPrintOptions.short_parsable()
    opts.print_metadata = False
    opts.print_backend_config = False
    opts.print_large_constants = True
    s = hlo.hlo_module_from_text(text).to_string(opts)
    for pat in _DROPPED:
        s = re.sub(pat, "", s)
    comps = []
    for block in s.split("\n\n")[1:]:  # the first block is the HloModule line
        lines = [l.strip() for l in block.strip().splitlines()]
        if lines:
            comps.append((lines[0], sorted(lines[1:])))
    return comps


def _print(path):
    return subprocess.run([TOOL, "print", path], capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def tool():
    if not os.access(TOOL, os.X_OK):
        pytest.skip("build/hlojit not built (run make)")
    return TOOL


@pytest.mark.parametrize("path", _modules(), ids=os.path.basename)
def test_xla_reads_our_text(tool, path):
    src = open(path).read()
    r = _print(path)
    if "c128" in src and r.returncode != 0:
        return  # the module hlojit must reject (complex types), with an error
    assert r.returncode == 0, r.stderr
    ours = r.stdout
    hlo.hlo_module_from_text(ours)  # raises with XLA's message when it does not parse
    assert _canonical(ours) == _canonical(src)


def test_corpus_is_covered_or_skipped():
    n = len(_modules())
    assert n >= 20, "the JAX fixtures are missing"
