"""The command-line tool's interface: help, version, exit codes and error messages, the
run summary, --out files, --random-inputs, and .npy reading/writing of every dtype
checked against NumPy (and ml_dtypes for bf16). Hostile .npy files go through the
ASan+UBSan build (build/asan/hlojit): each must give exit 1 and a "FILE: ..." message,
never a crash or a sanitizer report.
"""

import random
import re

import ml_dtypes
import numpy as np
import pytest

ADD = """HloModule add
ENTRY main {
  x = f32[2,3] parameter(0)
  y = f32[2,3] parameter(1)
  ROOT s = f32[2,3] add(x, y)
}
"""


def module(tmp_path, text, name="m.hlo"):
    p = tmp_path / name
    p.write_text(text)
    return p


def copy_module(tmp_path, t, dims):
    shape = f"{t}[{','.join(map(str, dims))}]"
    return module(tmp_path, f"HloModule c\nENTRY main {{\n  p = {shape} parameter(0)\n"
                            f"  ROOT c = {shape} copy(p)\n}}\n", f"copy_{t}.hlo")


def test_help(hlojit):
    r = hlojit("--help")
    assert r.returncode == 0
    assert "usage: hlojit print MODULE.hlo" in r.stdout
    for opt in ("--backend", "--input", "--random-inputs", "--out"):
        assert opt in r.stdout


def test_version(hlojit):
    r = hlojit("--version")
    assert r.returncode == 0 and re.fullmatch(r"hlojit \d+\.\d+\n", r.stdout), r.stdout


def test_no_args_and_unknown_command(hlojit):
    assert hlojit().returncode == 1
    r = hlojit("frobnicate")
    assert r.returncode == 1 and "unknown command 'frobnicate'" in r.stderr


def test_missing_file(hlojit, tmp_path):
    for cmd in ("print", "run"):
        r = hlojit(cmd, tmp_path / "nope.hlo")
        assert r.returncode == 1
        assert "nope.hlo" in r.stderr and r.stderr.startswith("hlojit: "), r.stderr


def test_print_canonical(hlojit, tmp_path):
    r = hlojit("print", module(tmp_path, ADD))
    assert r.returncode == 0, r.stderr
    assert "ENTRY" in r.stdout and "add(" in r.stdout and "f32[2,3]{1,0}" in r.stdout


def test_parse_error_has_position_and_caret(hlojit, tmp_path):
    p = module(tmp_path, ADD.replace("add(x, y)", "addd(x, y)"), "bad.hlo")
    r = hlojit("print", p)
    assert r.returncode == 1
    m = re.search(r"bad\.hlo:(\d+):(\d+): ", r.stderr)
    assert m, r.stderr
    assert (int(m.group(1)), int(m.group(2))) == (5, 21), r.stderr
    assert "addd" in r.stderr
    lines = r.stderr.splitlines()
    src = next(i for i, l in enumerate(lines) if "addd(x, y)" in l and "bad.hlo" not in l)
    caret = lines[src + 1]
    assert caret.strip() == "^" and caret.index("^") == lines[src].index("addd"), r.stderr


def test_bad_input_count(hlojit, tmp_path):
    p = module(tmp_path, ADD)
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((2, 3), np.float32))
    r = hlojit("run", p, "--input", x)
    assert r.returncode == 1
    assert "takes 2 inputs" in r.stderr and "1 --input was given" in r.stderr, r.stderr
    r = hlojit("run", p)
    assert r.returncode == 1 and "--random-inputs" in r.stderr


def test_wrong_input_shape_and_dtype(hlojit, tmp_path):
    p = module(tmp_path, ADD)
    good, bad = tmp_path / "good.npy", tmp_path / "bad.npy"
    np.save(good, np.zeros((2, 3), np.float32))
    np.save(bad, np.zeros((3, 2), np.float32))
    r = hlojit("run", p, "--input", good, "--input", bad)
    assert r.returncode == 1
    assert "bad.npy" in r.stderr and "f32[3,2]" in r.stderr and "f32[2,3]" in r.stderr, r.stderr
    np.save(bad, np.zeros((2, 3), np.int32))
    r = hlojit("run", p, "--input", good, "--input", bad)
    assert r.returncode == 1 and "s32[2,3]" in r.stderr, r.stderr


def test_cpu_backend_and_stats(hlojit, tmp_path):
    p = module(tmp_path, ADD)
    r = hlojit("run", p, "--random-inputs", "1", "--backend", "cpu", "--stats")
    assert r.returncode == 0, r.stderr
    assert "stats: backend=cpu" in r.stderr and "fusions=1" in r.stderr, r.stderr
    ref = hlojit("run", p, "--random-inputs", "1", "--backend", "interp")
    assert ref.returncode == 0 and r.stdout == ref.stdout, (r.stdout, ref.stdout)
    r = hlojit("run", p, "--random-inputs", "1", "--stats")     # auto: the CPU backend
    assert r.returncode == 0 and "stats: backend=cpu" in r.stderr, r.stderr


def test_cuda_backend_unsupported(hlojit, tmp_path):
    r = hlojit("run", module(tmp_path, ADD), "--random-inputs", "1", "--backend", "cuda")
    assert r.returncode == 1
    assert "cuda" in r.stderr.lower() and re.search(r"not|unsupported", r.stderr, re.I), r.stderr


def test_bad_options(hlojit, tmp_path):
    p = module(tmp_path, ADD)
    for args, msg in ((["--backend", "tpu"], "unknown backend 'tpu'"),
                      (["--random-inputs", "x1"], "bad seed"),
                      (["--frob"], "unknown option '--frob'"),
                      (["--out"], "--out needs a value"),
                      (["--random-inputs", "1", "--input", "a.npy"], "not both")):
        r = hlojit("run", p, *args)
        assert r.returncode == 1 and msg in r.stderr, (args, r.stderr)


def test_run_summary_and_out(hlojit, tmp_path):
    p = module(tmp_path, ADD)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.full((2, 3), 0.5, np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    r = hlojit("run", p, "--backend", "interp", "--input", tmp_path / "x.npy",
               "--input=" + str(tmp_path / "y.npy"), "--out", tmp_path / "o" / "deep")
    assert r.returncode == 0, r.stderr
    assert r.stdout == ("out0 f32[2,3] min=0.5 max=5.5 mean=3 "
                        "first=[0.5, 1.5, 2.5, 3.5, 4.5, 5.5]\n"), r.stdout
    got = np.load(tmp_path / "o" / "deep" / "out0.npy")
    assert got.dtype == np.float32 and np.array_equal(got, x + y)


def test_tuple_outputs_and_inputs_flattened(hlojit, tmp_path):
    p = module(tmp_path, """HloModule t
ENTRY main {
  p = (s32[2], (f32[], pred[3])) parameter(0)
  a = s32[2] get-tuple-element(p), index=0
  q = (f32[], pred[3]) get-tuple-element(p), index=1
  b = f32[] get-tuple-element(q), index=0
  c = pred[3] get-tuple-element(q), index=1
  ROOT t = (pred[3], s32[2], f32[]) tuple(c, a, b)
}
""")
    ins = [np.array([7, -9], np.int32), np.array(2.5, np.float32), np.array([1, 0, 1], bool)]
    args = []
    for k, a in enumerate(ins):
        np.save(tmp_path / f"i{k}.npy", a)
        args += ["--input", tmp_path / f"i{k}.npy"]
    r = hlojit("run", p, *args, "--out", tmp_path / "o")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("out0 pred[3] min=0 max=1 ") and lines[0].endswith("first=[1, 0, 1]")
    assert lines[1].startswith("out1 s32[2] min=-9 max=7 mean=-1 ")
    assert lines[2].startswith("out2 f32[] min=2.5 max=2.5 mean=2.5 first=[2.5]")
    for k, want in enumerate((ins[2], ins[0], ins[1])):
        got = np.load(tmp_path / "o" / f"out{k}.npy")
        assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)


def test_random_inputs_deterministic(hlojit, tmp_path):
    p = module(tmp_path, ADD)
    a = hlojit("run", p, "--random-inputs", "7", "--out", tmp_path / "a")
    b = hlojit("run", p, "--random-inputs", "7", "--out", tmp_path / "b")
    c = hlojit("run", p, "--random-inputs", "8")
    assert a.returncode == b.returncode == c.returncode == 0
    assert a.stdout == b.stdout != c.stdout
    v = np.load(tmp_path / "a" / "out0.npy")
    assert np.all(v >= -2) and np.all(v < 2)


@pytest.mark.parametrize("t,np_t", [("s8", np.int8), ("s16", np.int16), ("s32", np.int32),
                                    ("s64", np.int64), ("u8", np.uint8), ("u16", np.uint16),
                                    ("u32", np.uint32), ("u64", np.uint64), ("pred", np.bool_),
                                    ("f16", np.float16), ("f32", np.float32),
                                    ("f64", np.float64)])
def test_random_inputs_ranges(hlojit, tmp_path, t, np_t):
    r = hlojit("run", copy_module(tmp_path, t, [64]), "--random-inputs", "3", "--out", tmp_path)
    assert r.returncode == 0, r.stderr
    v = np.load(tmp_path / "out0.npy")
    assert v.dtype == np_t
    if t.startswith("s"):
        assert v.min() >= -8 and v.max() < 8 and len(set(v.tolist())) > 4
    elif t.startswith("u"):
        assert v.max() < 16 and len(set(v.tolist())) > 4
    elif t == "pred":
        assert 0 < v.sum() < 64
    else:
        assert v.min() >= -1 and v.max() < 1 and len(set(v.tolist())) > 16


@pytest.mark.parametrize("t,arr", [
    ("s8", np.array([-128, 0, 127], np.int8)), ("s16", np.array([-32768, 5], np.int16)),
    ("s32", np.array([[1, -2], [3, 2**31 - 1]], np.int32)),
    ("s64", np.array([-2**63, 2**62 + 1], np.int64)), ("u8", np.array([255, 1], np.uint8)),
    ("u16", np.array([65535], np.uint16)), ("u32", np.array([2**32 - 1], np.uint32)),
    ("u64", np.array([2**64 - 1, 3], np.uint64)), ("pred", np.array([True, False])),
    ("f16", np.array([1.5, -65504, np.inf], np.float16)),
    ("f32", np.array([np.pi, -0.0, np.nan], np.float32)),
    ("f64", np.array([np.e, 1e300], np.float64)),
    ("f32", np.array(3.25, np.float32)),                      # 0-d
    ("f32", np.zeros((2, 0, 3), np.float32)),                 # empty
    ("s32", np.arange(24, dtype=np.int32).reshape(2, 3, 4)),
])
def test_npy_roundtrip_dtypes(hlojit, tmp_path, t, arr):
    np.save(tmp_path / "in.npy", arr)
    r = hlojit("run", copy_module(tmp_path, t, arr.shape), "--input", tmp_path / "in.npy",
               "--out", tmp_path)
    assert r.returncode == 0, r.stderr
    got = np.load(tmp_path / "out0.npy")
    assert got.dtype == arr.dtype and got.shape == arr.shape
    assert got.tobytes() == arr.tobytes()


def test_npy_bf16_convention(hlojit, tmp_path):
    """bf16 is read from ml_dtypes' '<V2' and from '|V2', and written as '|V2' raw bits."""
    a = np.array([[1.5, -2.0, 3.0e38], [0.0, -0.0, 1e-3]], dtype=ml_dtypes.bfloat16)
    p = copy_module(tmp_path, "bf16", a.shape)
    for src in (a, a.view("V2")):
        np.save(tmp_path / "in.npy", src)
        r = hlojit("run", p, "--input", tmp_path / "in.npy", "--out", tmp_path)
        assert r.returncode == 0, r.stderr
        raw = np.load(tmp_path / "out0.npy")
        assert raw.dtype == np.dtype("V2")
        assert np.array_equal(raw.view(ml_dtypes.bfloat16), a)
        assert r.stdout.startswith("out0 bf16[2,3] min=-2 max=3.")


def test_npy_versions_and_fortran_order(hlojit, tmp_path):
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4) * 0.5
    p = copy_module(tmp_path, "f32", a.shape)
    for version in ((1, 0), (2, 0), (3, 0)):
        with open(tmp_path / "in.npy", "wb") as f:
            np.lib.format.write_array(f, a, version=version)
        r = hlojit("run", p, "--input", tmp_path / "in.npy", "--out", tmp_path)
        assert r.returncode == 0, (version, r.stderr)
        assert np.array_equal(np.load(tmp_path / "out0.npy"), a)
    np.save(tmp_path / "in.npy", np.asfortranarray(a))  # read back in C order
    r = hlojit("run", p, "--input", tmp_path / "in.npy", "--out", tmp_path)
    assert r.returncode == 0, r.stderr
    assert np.array_equal(np.load(tmp_path / "out0.npy"), a)


def test_npy_rejects(hlojit_asan, tmp_path):
    p = copy_module(tmp_path, "f32", [4])
    f = tmp_path / "x.npy"
    cases = {
        "big-endian": (np.arange(4, dtype=">f4"), "big-endian"),
        "complex": (np.zeros(4, np.complex64), "unsupported dtype '<c8'"),
        "structured": (np.zeros(4, dtype=[("a", "<f4")]), "structured"),
        "rank 9": (np.zeros((1,) * 9, np.float32), "rank"),
    }
    for what, (arr, msg) in cases.items():
        np.save(f, arr)
        r = hlojit_asan("run", p, "--input", f)
        assert r.returncode == 1 and f"x.npy: " in r.stderr and msg in r.stderr, (what, r.stderr)
    np.save(f, np.zeros(4, np.float32))
    good = f.read_bytes()
    for what, data, msg in (("truncated", good[:-1], "needs 16 bytes"),
                            ("trailing", good + b"\0", "needs 16 bytes"),
                            ("not npy", b"hello", "not a .npy file"),
                            ("empty", b"", "not a .npy file"),
                            ("header", good[:20], "truncated .npy header")):
        f.write_bytes(data)
        r = hlojit_asan("run", p, "--input", f)
        assert r.returncode == 1 and "x.npy: " in r.stderr and msg in r.stderr, (what, r.stderr)


def _mutate(rng, data):
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        pos = rng.randrange(min(len(b), 140)) if rng.random() < 0.8 else rng.randrange(len(b))
        op = rng.random()
        if op < 0.5:
            b[pos] = rng.randrange(256)
        elif op < 0.75:
            del b[pos:pos + rng.randint(1, 12)]
        else:
            b[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 6)))
    return bytes(b)


def test_npy_fuzz(hlojit_asan, tmp_path):
    """Mutated .npy files (header bytes mostly) under ASan+UBSan: exit 0 or 1, a message
    naming the file on failure, no sanitizer report (checked by the fixture)."""
    p = copy_module(tmp_path, "f32", [2, 3])
    seeds = []
    for version in ((1, 0), (2, 0), (3, 0)):
        with open(tmp_path / "s.npy", "wb") as f:
            np.lib.format.write_array(f, np.ones((2, 3), np.float32), version=version)
        seeds.append((tmp_path / "s.npy").read_bytes())
    np.save(tmp_path / "s.npy", np.asfortranarray(np.ones((2, 3), np.float32)))
    seeds.append((tmp_path / "s.npy").read_bytes())
    rng = random.Random(1)
    f = tmp_path / "fz.npy"
    failures = 0
    for i in range(150):
        f.write_bytes(_mutate(rng, rng.choice(seeds)))
        r = hlojit_asan("run", p, "--input", f)
        if r.returncode:
            failures += 1
            assert "fz.npy" in r.stderr, r.stderr
    assert failures > 50  # most mutations must be caught


def test_tuple_output_cannot_be_written_as_one_npy(hlojit, tmp_path):
    """Tuple results are flattened, so --out never writes a tuple literal."""
    p = module(tmp_path, """HloModule t
ENTRY main {
  a = f32[] constant(1)
  b = s32[] constant(2)
  ROOT t = (f32[], s32[]) tuple(a, b)
}
""")
    r = hlojit("run", p, "--out", tmp_path)
    assert r.returncode == 0, r.stderr
    assert np.load(tmp_path / "out0.npy").item() == 1.0
    assert np.load(tmp_path / "out1.npy").item() == 2
