"""Round trip through the HLO text printer, over every module XLA or JAX wrote: the
corpus (../shared/hlo-corpus, top level and golden/) and tests/fixtures/jax/*.hlo.

For each module:
  1. `hlojit print M` succeeds (parse + verify + print);
  2. printing the printed text again gives the same text (the printer's output is a
     fixed point of parse+print);
  3. `hlojit run --random-inputs 1` on the original and on the printed text give
     bitwise identical outputs: the printed text means what the original meant. Skipped
     for modules whose parameters hold more than RUN_LIMIT elements in all (the
     evaluator is slow on purpose).
The one c128 module must instead fail to print with a message naming c128 and a
file:line:col position.
"""

import re

import pytest

from conftest import BACKEND, JAX_FIXTURES, corpus_dir, corpus_skip_reason

RUN_LIMIT = 5_000_000
C128 = "gpu_tests_reduce_large_row_to_scalar_c128.hlo"


def modules():
    out = [pytest.param(p, id=f"jax/{p.name}") for p in sorted(JAX_FIXTURES.glob("*.hlo"))]
    d = corpus_dir()
    if d is None:
        out.append(pytest.param(None, id="corpus",
                                marks=pytest.mark.skip(reason=corpus_skip_reason())))
    else:
        for p in sorted(d.glob("*.hlo")) + sorted((d / "golden").glob("*.hlo")):
            out.append(pytest.param(p, id=f"corpus/{p.relative_to(d)}"))
    return out


def entry_param_elements(text):
    """Total elements of the ENTRY computation's parameters in printed (canonical) text."""
    m = re.search(r"^ENTRY .*?^}", text, re.M | re.S)
    assert m, "no ENTRY computation in the printed text"
    total = 0
    for line in m.group(0).splitlines():
        if re.search(r"\bparameter\(\d+\)", line):
            shape = line.split("=", 1)[1].split(" parameter(")[0]
            for dims in re.findall(r"[a-z]+\d*\[([^\]]*)\]", shape):
                n = 1
                for d in filter(None, dims.split(",")):
                    n *= int(d.lstrip("<="))
                total += n
    return total


def print_twice(hlojit, path, tmp_path):
    """Prints |path|, then the printed text; returns (printed text, its path)."""
    r1 = hlojit("print", path)
    assert r1.returncode == 0, f"print failed:\n{r1.stderr}"
    printed = tmp_path / "printed.hlo"
    printed.write_text(r1.stdout)
    r2 = hlojit("print", printed)
    assert r2.returncode == 0, f"printing the printed text failed:\n{r2.stderr}\n{r1.stdout}"
    assert r2.stdout == r1.stdout, "print(parse(print(M))) differs from print(M)"
    return r1.stdout, printed


@pytest.mark.parametrize("path", modules())
def test_print_fixed_point(path, hlojit, tmp_path):
    if path.name == C128:
        r = hlojit("print", path)
        assert r.returncode == 1, f"c128 module printed?\n{r.stdout[:500]}"
        assert "c128" in r.stderr, r.stderr
        assert re.search(re.escape(path.name) + r":\d+:\d+:", r.stderr), r.stderr
        return
    print_twice(hlojit, path, tmp_path)


@pytest.mark.parametrize("path", modules())
def test_run_original_vs_printed(path, hlojit, tmp_path):
    if path.name == C128:
        pytest.skip("c128 is not supported (checked by test_print_fixed_point)")
    text, printed = print_twice(hlojit, path, tmp_path)
    n = entry_param_elements(text)
    if n > RUN_LIMIT:
        pytest.skip(f"{path.name}: {n} parameter elements > {RUN_LIMIT}, too slow for the evaluator")
    outs = []
    for tag, src in (("a", path), ("b", printed)):
        r = hlojit("run", src, "--backend", BACKEND, "--random-inputs", "1",
                   "--out", tmp_path / tag)
        assert r.returncode == 0, f"run of {tag}={src.name} failed:\n{r.stderr}"
        outs.append(r.stdout)
    assert outs[0] == outs[1], f"summaries differ:\n{outs[0]}\nvs\n{outs[1]}"
    files = sorted(p.name for p in (tmp_path / "a").glob("out*.npy"))
    assert files and files == sorted(p.name for p in (tmp_path / "b").glob("out*.npy"))
    for f in files:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), \
            f"{f} differs between the original and the printed module"
