"""test_gpt2_bad_files.py — broken checkpoints and vocabularies (tests/gen/gen_gpt2_bad_files.py).

First the cases themselves: each valid original loads (NumPy reference, tiktoken), each
broken model is refused by the reference with a CheckpointError naming the file, each
broken vocabulary is refused by tiktoken's own GPT-2 loader — so every case really is
broken in a way an outside reader notices. Then, once build/gpt2 exists (its ASan build
build/asan/gpt2 preferred), the C program on every model case: exit status 0 for the
valid ones, 1 with a message naming the file and one of the case's `mentions` for the
broken ones, and never a sanitizer report.
"""

import json
import pathlib
import sys

import pytest

from conftest import BUILD, REPO, run_tool

sys.path.insert(0, str(REPO / "tests" / "reference"))
sys.path.insert(0, str(REPO / "tests" / "gen"))
import gen_gpt2_bad_files as gen_bad  # noqa: E402
import gpt2  # noqa: E402
import gpt2_io  # noqa: E402

# Duplicate header keys: the safetensors library keeps the last one (a JSON object parser),
# so the reference cannot see it; a C reader that walks the header must refuse it.
REFERENCE_BLIND = {"st_duplicate_name"}


@pytest.fixture(scope="module")
def bad(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpt2bad")
    gen_bad.main(["--out", str(out)])
    return out, json.loads((out / "manifest.json").read_text(encoding="utf-8"))


def test_cases_are_what_they_claim(bad):
    out, cases = bad
    assert len(cases) > 50
    for e in cases:
        p = out / e["path"]
        ok = not e["mentions"]
        if e["kind"] == "vocab":
            if ok:
                gpt2.load_tokenizer(p)
            else:
                with pytest.raises(Exception):
                    gpt2.load_tokenizer(p)
            continue
        if ok or e["name"] in REFERENCE_BLIND:
            gpt2_io.load(p)
            continue
        with pytest.raises(gpt2_io.CheckpointError) as err:
            gpt2_io.load(p)
        assert e["name"] in str(err.value), (e["name"], str(err.value))


def c_program():
    for p in (BUILD / "asan" / "gpt2", BUILD / "gpt2"):
        if p.exists():
            return p
    return None


@pytest.mark.skipif(c_program() is None, reason="build/gpt2 not built")
def test_c_program_refuses_each_broken_model(bad):
    out, cases = bad
    exe = c_program()
    failures = []
    for e in cases:
        if e["kind"] == "vocab":
            continue
        r = run_tool(exe, ["--model", out / e["path"], "--ids", "1,2", "--tokens", "1",
                           "--greedy", "--backend", "interp"], timeout=120)
        san = "Sanitizer" in r.stderr or "runtime error" in r.stderr
        want_rc = 0 if not e["mentions"] else 1
        named = not e["mentions"] or (e["name"] in r.stderr and any(
            m.lower() in r.stderr.lower() for m in e["mentions"]))
        if san or r.returncode != want_rc or not named:
            failures.append(f"{e['name']} ({e['what']}): rc {r.returncode}, stderr "
                            f"{r.stderr.strip()[-300:]!r}")
    assert not failures, "\n".join(failures)
