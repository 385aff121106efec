"""Golden conformance: the modules of ../shared/hlo-corpus/golden, whose expected outputs
XLA's own tests state as literals (two `derived_*` ones were worked out by hand from
XLA's documented gather clamping rule; see GOLDEN.md there).

Inputs and expected outputs come from each file's header comments, read by a small
parser of XLA's C-brace literals:

    // input NAME (TYPE[dims]) = {{1, 2}, {3, 4}}
    // input x = (((s32[] 42), f32[] 1.0), (f32[] 3.0, s32[] 4))    tuple parameters
    // expected (TYPE[dims], ...) = {...}                            may span lines
    // expected = (s32[] 10, f32[] 20.0)                             tuple results
    // p0 = 1024 -> expected {{1.0, 4.0}, {9.0, 16.0}}               one case per line

Parameter numbers and the types that the header leaves out (a conditional's selector,
the expected array of a conditional) come from the module's ENTRY computation. Each case
runs `hlojit run --backend $HLOJIT_BACKEND` (interp by default) and compares exactly (integers, pred) or within 1e-6
(floats). Every golden module must yield at least one case.
"""

import re

import numpy as np
import pytest

from conftest import BACKEND, corpus_dir, corpus_skip_reason

DTYPES = {"pred": np.bool_, "s8": np.int8, "s16": np.int16, "s32": np.int32,
          "s64": np.int64, "u8": np.uint8, "u16": np.uint16, "u32": np.uint32,
          "u64": np.uint64, "f16": np.float16, "f32": np.float32, "f64": np.float64}
GOLDEN_FILES = 13

# ---- a parser of XLA literals: {..} arrays, (..) tuples, `s32[] 4` typed leaves ----------

_TOK = re.compile(r"\s*(?:(?P<type>[a-z]+\d*\[[\d,]*\])|(?P<num>[-+]?(?:inf|nan|\d+\.?\d*"
                  r"(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?))|(?P<word>true|false)"
                  r"|(?P<p>[{}(),]))")


class _Lit:
    def __init__(self, text):
        self.text, self.pos = text, 0

    def peek(self):
        m = _TOK.match(self.text, self.pos)
        return m

    def next(self):
        m = self.peek()
        if not m:
            raise ValueError(f"bad literal at {self.text[self.pos:self.pos + 30]!r}")
        self.pos = m.end()
        return m

    def expect(self, p):
        m = self.next()
        if m.group("p") != p:
            raise ValueError(f"expected {p!r} at {self.text[m.start():m.start() + 30]!r}")

    def value(self):
        """A nested list, a scalar, or ('tuple', [(type or None, value), ...])."""
        m = self.next()
        if m.group("p") == "{":
            items = []
            while self.peek().group("p") != "}":
                items.append(self.value())
                if self.peek().group("p") == ",":
                    self.next()
            self.expect("}")
            return items
        if m.group("p") == "(":
            items = []
            while self.peek().group("p") != ")":
                t = None
                if self.peek().group("type"):
                    t = self.next().group("type")
                items.append((t, self.value()))
                if self.peek().group("p") == ",":
                    self.next()
            self.expect(")")
            return ("tuple", items)
        if m.group("num"):
            s = m.group("num")
            return float(s) if re.search(r"[.eE]|inf|nan", s) else int(s)
        if m.group("word"):
            return m.group("word") == "true"
        raise ValueError(f"unexpected {m.group(0)!r}")


def parse_literal(text):
    """Parses one literal at the start of |text|; whatever follows it is ignored."""
    return _Lit(text).value()


def _type_dims(t):
    m = re.fullmatch(r"([a-z]+\d*)\[([\d,]*)\]", t)
    return m.group(1), tuple(int(d) for d in m.group(2).split(",") if d)


def to_leaves(value, type_str):
    """Flattens a parsed literal into numpy leaves (tuples depth first). |type_str| is
    `s32[3,2]` for an array; tuple leaves carry their own types."""
    if isinstance(value, tuple) and value[0] == "tuple":
        out = []
        for t, v in value[1]:
            out += to_leaves(v, t)
        return out
    if type_str is None:
        raise ValueError("array literal without a type")
    name, dims = _type_dims(type_str)
    return [np.array(value, dtype=DTYPES[name]).reshape(dims)]


# ---- the module's ENTRY signature ------------------------------------------------------

def entry_signature(text):
    """{param name: (number, type string)} and the ROOT type string of the ENTRY block."""
    body = text[re.search(r"^\s*ENTRY\b", text, re.M).start():]
    body = body[:body.index("\n}") if "\n}" in body else len(body)]
    params = {}
    for m in re.finditer(r"^\s*%?([\w.\-]+) = (.+?)(?:\{[\d,]*\})? parameter\((\d+)\)", body, re.M):
        params[m.group(1)] = (int(m.group(3)), m.group(2))
    root = re.search(r"^\s*ROOT %?[\w.\-]+ = (\S+?)(?:\{[\d,]*\})? ", body, re.M)
    return params, root.group(1) if root else None


# ---- cases from the header ---------------------------------------------------------------

_INPUT = re.compile(r"^input (\S+)(?: \(([a-z]+\d*\[[\d,]*\])\))? =(.*)$", re.S)
_EXPECTED = re.compile(r"^expected(?: \(derived\))?(?: \(([a-z]+\d*\[[\d,]*\])[^)]*\))? =(.*)$", re.S)
_CASE = re.compile(r"^(\w+) = (\S+)\s+-> expected (.*)$", re.S)


def _comment_lines(text):
    out = []
    for line in text.splitlines():
        s = line.strip()
        if not s.startswith("//"):
            break
        out.append(s[2:].strip())
    return out


def golden_cases(path):
    """[(case id, [input arrays in parameter order], [expected leaves])] for one module."""
    text = path.read_text()
    params, root_type = entry_signature(text)
    lines = _comment_lines(text)
    inputs, expected, selectors = {}, None, []
    for i, line in enumerate(lines):
        rest = " ".join(lines[i:])  # a literal may continue on the next comment lines
        if m := _INPUT.match(line):
            name, t = m.group(1), m.group(2)
            lit = parse_literal(rest[rest.index("=") + 1:])
            inputs[name] = to_leaves(lit, t)
        elif m := _EXPECTED.match(line):
            lit = parse_literal(rest[rest.index("=") + 1:])
            expected = to_leaves(lit, m.group(1) or root_type)
        elif m := _CASE.match(line):
            name = m.group(1)
            _, ptype = params[name]
            sel = to_leaves(parse_literal(m.group(2)), ptype)
            want = to_leaves(parse_literal(rest[rest.index("-> expected") + 11:]), root_type)
            selectors.append((f"{name}={m.group(2)}", name, sel, want))

    def ordered(extra):
        named = dict(inputs, **extra)
        missing = set(params) - set(named)
        assert not missing, f"{path.name}: no header value for parameter(s) {missing}"
        leaves = []
        for name in sorted(named, key=lambda n: params[n][0]):
            leaves += named[name]
        return leaves

    if selectors:
        return [(f"{path.stem}[{cid}]", ordered({n: s}), want) for cid, n, s, want in selectors]
    assert expected is not None, f"{path.name}: no expected value in the header"
    return [(path.stem, ordered({}), expected)]


def _collect():
    d = corpus_dir()
    if d is None:
        return [pytest.param(None, None, None, id="no-corpus",
                             marks=pytest.mark.skip(reason=corpus_skip_reason()))]
    out = []
    for f in sorted((d / "golden").glob("*.hlo")):
        for cid, ins, want in golden_cases(f):
            out.append(pytest.param(f, ins, want, id=cid))
    return out


CASES = _collect()


def test_every_golden_module_has_cases(corpus):
    files = sorted((corpus / "golden").glob("*.hlo"))
    assert len(files) == GOLDEN_FILES, [f.name for f in files]
    covered = {c.values[0].name for c in CASES if c.values[0] is not None}
    assert covered == {f.name for f in files}
    conds = [c.id for c in CASES if "conditional" in c.id]
    assert len(conds) == 5, conds  # true/false, and 0, 1, 1024


def test_literal_parser():
    assert parse_literal("{{1, 2}, {3, -4}}  (trailing words)") == [[1, 2], [3, -4]]
    lit = parse_literal("(((s32[] 42), f32[] 1.0), (f32[] 3.0, s32[] 4))   (nested)")
    leaves = to_leaves(lit, None)
    assert [a.dtype for a in leaves] == [np.int32, np.float32, np.float32, np.int32]
    assert [a.item() for a in leaves] == [42, 1.0, 3.0, 4]
    assert to_leaves(parse_literal("true"), "pred[]")[0].dtype == np.bool_


@pytest.mark.parametrize("module,inputs,expected", CASES)
def test_golden(module, inputs, expected, hlojit, tmp_path):
    args = ["run", module, "--backend", BACKEND, "--out", tmp_path / "out"]
    for k, a in enumerate(inputs):
        p = tmp_path / f"in{k}.npy"
        np.save(p, a)
        args += ["--input", p]
    r = hlojit(*args)
    assert r.returncode == 0, f"hlojit failed on {module.name}:\n{r.stderr}"
    got = [np.load(tmp_path / "out" / f"out{k}.npy") for k in range(len(expected))]
    assert not (tmp_path / "out" / f"out{len(expected)}.npy").exists(), "too many outputs"
    for k, (g, w) in enumerate(zip(got, expected)):
        assert g.dtype == w.dtype and g.shape == w.shape, \
            f"out{k}: got {g.dtype}{list(g.shape)}, expected {w.dtype}{list(w.shape)}"
        if np.issubdtype(w.dtype, np.floating):
            err = float(np.max(np.abs(g.astype(np.float64) - w), initial=0.0))
            assert err <= 1e-6, f"out{k}: max abs error {err}\ngot {g}\nexpected {w}"
        else:
            assert np.array_equal(g, w), f"out{k}:\ngot {g}\nexpected {w}"
