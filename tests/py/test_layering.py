"""The layering of hlojit_impl/ (hlojit_impl/README.md): each part includes only the headers
of the parts below it, so that the IR knows no pass, emitter, backend or evaluator, passes
know no emitter or backend, and the API reaches backends only through backend.h.

Read from the #include lines of every C file of the library, directly and transitively (a
header a file includes brings its own includes along: runtime.h including passes.h would
let a backend call a pass); a violation names the file, the line and the part it reaches."""
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# part -> the parts its files may include (besides their own part and hlojit.h)
ALLOWED = {
    "ir": set(),
    "text": {"ir"},
    "eval": {"ir"},
    "passes": {"ir"},
    "emitters": {"ir"},
    # the compile driver, the thunks (evaluator fallback) and the pass hooks (evaluator
    # for constant folding, printer for dumps)
    "runtime": {"ir", "passes", "emitters", "eval", "text"},
    # the tracing JIT: graphs and executables through the API, the dynamic padder pass
    "jit": {"ir", "api", "passes", "runtime", "emitters", "backend.h"},
    # everything below it (runtime.h brings the emitters' target types along)
    "api": {"ir", "text", "eval", "passes", "runtime", "emitters", "backend.h"},
    "backend.h": {"ir"},
    "backends": {"ir", "eval", "emitters", "runtime", "backend.h"},
    "all.c": None,  # the single-header build includes everything
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def part_of(path: pathlib.Path) -> str:
    rel = path.relative_to(ROOT).as_posix()
    if rel.startswith("backends/"):
        return "backends"
    if rel == "hlojit_impl/backend.h":
        return "backend.h"
    if rel == "hlojit_impl/all.c":
        return "all.c"
    parts = rel.split("/")
    assert parts[0] == "hlojit_impl" and len(parts) == 3, rel
    return parts[1]


def library_files():
    files = sorted((ROOT / "hlojit_impl").rglob("*.[ch]")) + sorted((ROOT / "backends").rglob("*.[ch]"))
    return [f for f in files if "/tests/" not in f.as_posix()]


def target_part(src: pathlib.Path, inc: str):
    tgt = (src.parent / inc).resolve()
    if tgt == ROOT / "hlojit.h":
        return "hlojit.h"
    try:
        return part_of(tgt)
    except (AssertionError, ValueError):
        return None  # outside the library (system-style include written with quotes)


def test_every_library_file_has_a_part():
    files = library_files()
    assert len(files) > 50
    for f in files:
        assert part_of(f) in ALLOWED, f


@pytest.mark.parametrize("path", library_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_includes_follow_the_layers(path):
    me = part_of(path)
    allowed = ALLOWED[me]
    if allowed is None:
        return
    for no, line in enumerate(path.read_text().splitlines(), 1):
        m = INCLUDE.match(line)
        if not m:
            continue
        tgt = target_part(path, m.group(1))
        if tgt in (None, me, "hlojit.h"):
            continue
        assert tgt in allowed, f"{path.relative_to(ROOT)}:{no}: part '{me}' includes '{m.group(1)}' (part '{tgt}')"


def strip_comments(text: str) -> str:
    """The code of a C file with comments blanked out (line numbers kept)."""
    text = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def test_only_backends_name_backend_tables():
    """No code outside backends/ names a backend's table or functions (cpu_*, tp_*,
    hlo_backend_cpu, ...); comments may."""
    pat = re.compile(r"\b(cpu_backend_\w+|hlo_backend_(cpu|interp|cuda)|cpu_jit_\w+|cpu_matmul_\w+|tp_\w+|cuda_\w+)\b")
    for f in sorted((ROOT / "hlojit_impl").rglob("*.[ch]")):
        if f.name == "all.c":
            continue
        for no, line in enumerate(strip_comments(f.read_text()).splitlines(), 1):
            m = pat.search(line)
            assert not m, f"{f.relative_to(ROOT)}:{no}: names '{m.group(0)}'"


def library_includes(path: pathlib.Path):
    """(line number, included path) of every library header |path| includes directly."""
    out = []
    for no, line in enumerate(path.read_text().splitlines(), 1):
        m = INCLUDE.match(line)
        if m:
            tgt = (path.parent / m.group(1)).resolve()
            if tgt.exists() and (ROOT / "hlojit_impl" in tgt.parents or ROOT / "backends" in tgt.parents):
                out.append((no, tgt))
    return out


@pytest.mark.parametrize("path", library_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_transitive_includes_follow_the_layers(path):
    me = part_of(path)
    allowed = ALLOWED[me]
    if allowed is None:
        return
    for no, first in library_includes(path):
        seen, todo = set(), [first]
        while todo:
            h = todo.pop()
            if h in seen:
                continue
            seen.add(h)
            tgt = part_of(h)
            assert tgt in allowed or tgt == me, (
                f"{path.relative_to(ROOT)}:{no}: part '{me}' reaches '{h.relative_to(ROOT)}' (part "
                f"'{tgt}') through '{first.relative_to(ROOT)}'")
            todo.extend(t for _, t in library_includes(h))
