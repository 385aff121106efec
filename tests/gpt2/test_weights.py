"""The GPT-2 checkpoint loaders (examples/gpt2/weights.c, safetensors.c) through the
ASan+UBSan build of gpt2_wcheck, which reads files into an exact-size heap block under ASan
so that a read past the end of a file is caught.

Good files come from tests/gpt2/gen_checkpoints.py (llm.c's layout written with numpy;
safetensors written by the safetensors library): every tensor must come back byte for byte,
with the right shape, dtype and layout, pointing into the file (no copy) unless misaligned,
and the two formats of one model must agree once the (in, out) / (out, in) layouts are
taken into account. Bad files must each fail with a message naming the file and the field.
"""
import json
import random

import ml_dtypes
import numpy as np
import pytest

import gen_checkpoints as gc
from gpt2_testlib import no_sanitizer_report, report, run

CFG = gc.config()  # L=2 NH=4 C=64 V=300 Vp=320 maxT=32
DT = {"f32": np.float32, "bf16": ml_dtypes.bfloat16}


def wcheck(tool, path, config=None, dump=None):
    cmd = [tool, str(path)] + (["--config", str(config)] if config else []) + \
        (["--dump", str(dump)] if dump else [])
    p = run(cmd)
    no_sanitizer_report(p)
    return p


def parse(out):
    lines = out.decode().strip().split("\n")
    head = dict(kv.split("=") for kv in lines[0].split()[2:])
    fmt = lines[0].split()[1]
    tensors = []
    for l in lines[1:]:
        _, name, dtype, layout, shape, where = l.split()
        tensors.append((name, dtype, layout, tuple(int(x) for x in shape.split("x")), where))
    return fmt, {k: int(v) for k, v in head.items()}, tensors


def llmc_expected(cfg, p):
    """(name, stored array, layout) in gpt2_weights_get's order."""
    out = [("wte", p["wte"], "rows"), ("wpe", p["wpe"], "rows")]
    for kind in gc.PER_LAYER:
        for l in range(cfg["L"]):
            a = p[kind][l]
            out.append((f"{kind}[{l}]", a, "out_in" if a.ndim == 2 else "vector"))
    out += [("lnfw", p["lnfw"], "vector"), ("lnfb", p["lnfb"], "vector")]
    return out


def hf_expected(cfg, t, prefix):
    out = [(prefix + "wte.weight", "rows"), (prefix + "wpe.weight", "rows")]
    for kind in gc.PER_LAYER:
        suffix, tr = gc.HF_LAYER[kind]
        for l in range(cfg["L"]):
            out.append((f"{prefix}h.{l}.{suffix}", "in_out" if tr else "vector"))
    out += [(prefix + "ln_f.weight", "vector"), (prefix + "ln_f.bias", "vector")]
    return [(n, t[n], lay) for n, lay in out]


def check_loaded(p, dump, expected, fmt, cfg, copied=0):
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    got_fmt, head, tensors = parse(p.stdout)
    assert got_fmt == fmt
    Vp = cfg["Vp"] if fmt == "llmc" else cfg["V"]
    assert head == dict(maxT=cfg["maxT"], V=cfg["V"], Vp=Vp, L=cfg["L"], NH=cfg["NH"],
                        C=cfg["C"], copied=copied)
    assert len(tensors) == len(expected) == 4 + 12 * cfg["L"]
    data, at = dump.read_bytes(), 0
    for (name, dtype, layout, shape, where), (ename, arr, elayout) in zip(tensors, expected):
        assert (name, layout, shape) == (ename, elayout, arr.shape)
        assert dtype == ("f32" if arr.dtype == np.float32 else "bf16")
        b = arr.tobytes()
        assert data[at:at + len(b)] == b, f"{name}: values differ"
        at += len(b)
        if not copied:
            assert where == "mapped", name
    assert at == len(data)
    return tensors


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_llmc_good(gpt2_wcheck_asan, tmp_path, dtype):
    p = gc.random_params(CFG, seed=3, dtype=dtype)
    f = tmp_path / "model.bin"
    f.write_bytes(gc.llmc_bytes(CFG, p, dtype))
    r = wcheck(gpt2_wcheck_asan, f, dump=tmp_path / "dump")
    check_loaded(r, tmp_path / "dump", llmc_expected(CFG, p), "llmc", CFG)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("prefix", ["transformer.", ""])
def test_safetensors_good(gpt2_wcheck_asan, tmp_path, dtype, prefix):
    p = gc.random_params(CFG, seed=4, dtype=dtype)
    t = gc.hf_tensors(CFG, p, prefix)
    tensors = dict(t)
    # What real exports carry besides: the tied head and old attention-mask buffers.
    tensors["lm_head.weight"] = t[prefix + "wte.weight"].copy()
    tensors[prefix + "h.0.attn.bias"] = np.tril(np.ones((1, 1, 32, 32), np.float32))
    tensors[prefix + "h.1.attn.masked_bias"] = np.array(-1e4, np.float32)
    gc.write_safetensors(str(tmp_path / "model.safetensors"), tensors)
    gc.write_config(tmp_path / "config.json", CFG)
    r = wcheck(gpt2_wcheck_asan, tmp_path / "model.safetensors", dump=tmp_path / "dump")
    check_loaded(r, tmp_path / "dump", hf_expected(CFG, t, prefix), "safetensors", CFG)


def test_same_model_both_formats(gpt2_wcheck_asan, tmp_path):
    """llm.c (out, in) and HF (in, out) of one model: equal after transposing by layout."""
    cfg = gc.config(L=3, NH=2, C=32, V=100, Vp=128, maxT=16)
    p = gc.random_params(cfg, seed=5)
    (tmp_path / "model.bin").write_bytes(gc.llmc_bytes(cfg, p))
    gc.write_safetensors(str(tmp_path / "model.safetensors"), gc.hf_tensors(cfg, p))
    gc.write_config(tmp_path / "config.json", cfg)
    views = {}
    for name in ("model.bin", "model.safetensors"):
        r = wcheck(gpt2_wcheck_asan, tmp_path / name, dump=tmp_path / (name + ".dump"))
        assert r.returncode == 0, r.stderr.decode()
        _, _, tensors = parse(r.stdout)
        data, at, out = (tmp_path / (name + ".dump")).read_bytes(), 0, []
        for _, _, layout, shape, _ in tensors:
            n = int(np.prod(shape)) * 4
            a = np.frombuffer(data[at:at + n], np.float32).reshape(shape)
            out.append(a.T if layout == "in_out" else a)  # everything as (out, in)
            at += n
        views[name] = out
    a, b = views["model.bin"], views["model.safetensors"]
    assert np.array_equal(a[0][:cfg["V"]], b[0])  # wte without llm.c's padding rows
    for x, y in zip(a[1:], b[1:]):
        assert np.array_equal(x, y)


def test_safetensors_misaligned_is_copied(gpt2_wcheck_asan, tmp_path):
    """A header length that leaves the data 2 bytes off 4-byte alignment: the f32 tensors
    are copied (counted), values still exact."""
    p = gc.random_params(CFG, seed=6)
    t = gc.hf_tensors(CFG, p)
    entries, data = gc.st_entries(t)
    raw = gc.st_bytes(entries, data, pad_to=None)
    n = int.from_bytes(raw[:8], "little")
    pad = (2 - (8 + n)) % 4
    raw = gc.st_bytes(entries, data, pad_to=None, extra=b" " * pad)
    (tmp_path / "model.safetensors").write_bytes(raw)
    gc.write_config(tmp_path / "config.json", CFG)
    r = wcheck(gpt2_wcheck_asan, tmp_path / "model.safetensors", dump=tmp_path / "dump")
    check_loaded(r, tmp_path / "dump", hf_expected(CFG, t, "transformer."), "safetensors",
                 CFG, copied=len(t))
    assert all(x[4] == "copied" for x in parse(r.stdout)[2])


def test_mixed_dtypes_and_config_options(gpt2_wcheck_asan, tmp_path):
    """Per-tensor dtypes; config given with --config, with n_ctx instead of n_positions."""
    p = gc.random_params(CFG, seed=7)
    t = gc.hf_tensors(CFG, p)
    for k in list(t)[::3]:
        t[k] = t[k].astype(ml_dtypes.bfloat16)
    gc.write_safetensors(str(tmp_path / "model.safetensors"), t)
    c = gc.hf_config(CFG)
    del c["n_positions"]
    (tmp_path / "cfg.json").write_text(json.dumps(c))
    r = wcheck(gpt2_wcheck_asan, tmp_path / "model.safetensors", config=tmp_path / "cfg.json",
               dump=tmp_path / "dump")
    check_loaded(r, tmp_path / "dump", hf_expected(CFG, t, "transformer."), "safetensors", CFG)


# ---- bad files ----------------------------------------------------------------------------

def expect_error(tool, path, words, config=None, named=None):
    """|path| fails with a message that names |named| (default |path|) and has |words|."""
    r = wcheck(tool, path, config=config)
    msg = r.stderr.decode(errors="replace")
    assert r.returncode == 1, f"rc {r.returncode}: {msg}"
    for w in [str(named or path)] + words:
        assert w in msg, f"{w!r} not in {msg!r}"
    return msg


def llmc_file(tmp_path, name="model.bin", header=None, cfg=CFG, dtype="f32", extra=b"",
              cut=None):
    p = gc.random_params(cfg, seed=8, dtype=dtype)
    raw = bytearray(gc.llmc_bytes(cfg, p, dtype) + extra)
    for i, v in (header or {}).items():
        raw[4 * i:4 * i + 4] = int(v).to_bytes(4, "little", signed=True)
    f = tmp_path / name
    f.write_bytes(bytes(raw[:cut]))
    return f


LLMC_BAD = {
    "magic": ({0: 20240327}, ["bad magic 20240327", "header int 0"]),
    "version1": ({1: 1}, ["unknown version 1"]),
    "version4": ({1: 4}, ["unknown version 4"]),
    "V0": ({3: 0}, ["header int 3 (V) = 0 is outside"]),
    "Lneg": ({4: -3}, ["header int 4 (L) = -3"]),
    "NH": ({5: 5}, ["header int 6 (C) = 64 is not divisible by header int 5 (NH) = 5"]),
    "Vp": ({7: 299}, ["header int 7 (Vp) = 299 is less than header int 3 (V) = 300"]),
    "Chuge": ({6: 1 << 20}, ["header int 6 (C) = 1048576 is outside"]),
    "maxThuge": ({2: 1 << 30}, ["header int 2 (maxT)"]),
    "Cbigger": ({6: 128, 5: 4}, ["implies", "truncated"]),
    "Lsmaller": ({4: 1}, ["implies", "trailing bytes"]),
    "bf16_on_f32": ({1: 5}, ["implies", "trailing bytes"]),
}


@pytest.mark.parametrize("name", sorted(LLMC_BAD))
def test_llmc_bad_header(gpt2_wcheck_asan, tmp_path, name):
    header, words = LLMC_BAD[name]
    expect_error(gpt2_wcheck_asan, llmc_file(tmp_path, header=header), words)


def test_llmc_truncated_and_trailing(gpt2_wcheck_asan, tmp_path):
    size = len(gc.llmc_bytes(CFG, gc.random_params(CFG, seed=8)))
    cuts = [1, 3, 4, 100, 1023, 1024, 1025, 1024 + 28, size // 2, size - 4, size - 1]
    for cut in cuts:
        f = llmc_file(tmp_path, f"cut{cut}.bin", cut=cut)
        words = ["shorter than llm.c's 1024-byte header"] if cut < 1024 else ["truncated"]
        expect_error(gpt2_wcheck_asan, f, words)
    expect_error(gpt2_wcheck_asan, llmc_file(tmp_path, extra=b"\0" * 4), ["trailing bytes"])
    (tmp_path / "empty.bin").write_bytes(b"")
    expect_error(gpt2_wcheck_asan, tmp_path / "empty.bin", ["empty file"])
    expect_error(gpt2_wcheck_asan, tmp_path / "missing.bin", ["cannot open"])
    report(f"llm.c loader: {len(cuts)} truncations + trailing/empty/missing files, each a clear "
           f"error")


def st_dir(tmp_path, name, tensors=None, entries=None, data=None, raw=None, cfg=CFG,
           **cfg_override):
    """A directory with model.safetensors (from |raw|, or |entries| + |data|, or |tensors|
    through st_entries) and config.json."""
    d = tmp_path / name
    d.mkdir()
    if raw is None:
        if entries is None:
            t = tensors if tensors is not None else \
                gc.hf_tensors(cfg, gc.random_params(cfg, seed=9))
            entries, data = gc.st_entries(t)
        raw = gc.st_bytes(entries, data)
    (d / "model.safetensors").write_bytes(raw)
    gc.write_config(d / "config.json", cfg, **cfg_override)
    return d / "model.safetensors"


def good_parts():
    t = gc.hf_tensors(CFG, gc.random_params(CFG, seed=9))
    entries, data = gc.st_entries(t)
    return t, entries, data


def mutate_entries(fn):
    t, entries, data = good_parts()
    entries = json.loads(json.dumps(entries))
    r = fn(entries, data)
    return entries, r if isinstance(r, bytes) else data


def _shift_after_first(e, d):
    first = "transformer.wte.weight"
    cut = e[first]["data_offsets"][1]
    for k, v in e.items():
        if k != first:
            v["data_offsets"] = [v["data_offsets"][0] + 4, v["data_offsets"][1] + 4]
    return d[:cut] + b"\0" * 4 + d[cut:]


def _overlap(e, d):
    a, b = e["transformer.wte.weight"], e["transformer.wpe.weight"]
    n = b["data_offsets"][1] - b["data_offsets"][0]
    b["data_offsets"] = [a["data_offsets"][0] + 4, a["data_offsets"][0] + 4 + n]


def _set(key, field, value):
    def f(e, d):
        e[key][field] = value
    return f


LNF = "transformer.ln_f.bias"
ST_BAD = {
    "end_past_data": (_set(LNF, "data_offsets", [0, 10 ** 9]), ["run past the end of the data"]),
    "begin_after_end": (_set(LNF, "data_offsets", [8, 4]), ["begin <= end"]),
    "negative_offset": (_set(LNF, "data_offsets", [-4, 252]), ["begin <= end"]),
    "fraction_offset": (_set(LNF, "data_offsets", [1.5, 257.5]), ["begin <= end"]),
    "three_offsets": (_set(LNF, "data_offsets", [0, 4, 8]), ["'data_offsets' is not [begin, end]"]),
    "no_offsets": (lambda e, d: e[LNF].pop("data_offsets"), ["'data_offsets' is not"]),
    "shape_bytes": (_set(LNF, "shape", [65]), ["needs 260 bytes", "give 256"]),
    "shape_negative": (_set(LNF, "shape", [-64]), ["shape dim 0"]),
    "shape_not_list": (_set(LNF, "shape", 64), ["'shape' is missing or not an array"]),
    "dtype_unknown": (_set(LNF, "dtype", "Q4"), ["unknown dtype 'Q4'"]),
    "dtype_missing": (lambda e, d: e[LNF].pop("dtype"), ["'dtype' is missing"]),
    "entry_not_object": (lambda e, d: e.__setitem__(LNF, [1, 2]), ["is not an object"]),
    "overlap": (_overlap, ["overlap", "transformer.wte.weight", "transformer.wpe.weight"]),
    "hole": (_shift_after_first, ["belong to no tensor", "before tensor"]),
    "tail": (lambda e, d: d + b"\0" * 8, ["after the last tensor belong to no tensor"]),
}


@pytest.mark.parametrize("name", sorted(ST_BAD))
def test_safetensors_bad_header_entries(gpt2_wcheck_asan, tmp_path, name):
    fn, words = ST_BAD[name]
    entries, data = mutate_entries(fn)
    f = st_dir(tmp_path, name, entries=entries, data=data)
    expect_error(gpt2_wcheck_asan, f, words)


def test_safetensors_bad_framing(gpt2_wcheck_asan, tmp_path):
    t, entries, data = good_parts()
    good = gc.st_bytes(entries, data)
    n = int.from_bytes(good[:8], "little")
    hdr = good[8:8 + n]
    cases = {
        "short": (good[:5], ["too short for safetensors' 8-byte header length"]),
        "hlen_huge": ((2 ** 63).to_bytes(8, "little") + good[8:], ["runs past the end"]),
        "hlen_past": ((len(good)).to_bytes(8, "little") + good[8:], ["runs past the end"]),
        "hlen_zero": ((0).to_bytes(8, "little") + good[8:], ["header length 0 is not in"]),
        "not_json": (len(hdr).to_bytes(8, "little") + b"{" + b" " * (len(hdr) - 1) + good[8 + n:],
                     ["not a JSON object"]),
        "json_array": (gc.st_bytes([1, 2], data), ["not a JSON object"]),
        "trailing_junk": (gc.st_bytes(entries, data, extra=b"x"),
                          ["bytes after its JSON object"]),
    }
    for name, (raw, words) in cases.items():
        expect_error(gpt2_wcheck_asan, st_dir(tmp_path, name, raw=raw), words)
    cuts = [1, 7, 8, 9, 8 + n // 2, 8 + n - 1, 8 + n, 8 + n + 1, len(good) // 2, len(good) - 1]
    for cut in cuts:
        expect_error(gpt2_wcheck_asan, st_dir(tmp_path, f"cut{cut}", raw=good[:cut]), [])
    report(f"safetensors loader: {len(cases)} bad framings + {len(cuts)} truncations, each a "
           f"clear error")


def test_safetensors_bad_names_and_dtypes(gpt2_wcheck_asan, tmp_path):
    def with_(change):
        t = dict(good_parts()[0])
        change(t)
        return t
    cases = {
        "missing": (lambda t: t.pop("transformer.h.1.mlp.c_fc.bias"),
                    ["tensor 'h.1.mlp.c_fc.bias' is missing"]),
        "missing_wte": (lambda t: t.pop("transformer.wte.weight"), ["'wte.weight' is missing"]),
        "unexpected": (lambda t: t.__setitem__("transformer.h.0.mlp.extra", np.zeros(4, np.float32)),
                       ["unexpected tensor 'transformer.h.0.mlp.extra'"]),
        "layer_past_L": (lambda t: t.__setitem__("h.2.ln_1.weight", np.zeros(64, np.float32)),
                         ["'h.2.ln_1.weight' is for layer 2, but config.json has n_layer = 2"]),
        "twice": (lambda t: t.__setitem__("wte.weight", t["transformer.wte.weight"]),
                  ["are the same weight"]),
        "f16": (lambda t: t.__setitem__(LNF, t[LNF].astype(np.float16)),
                ["dtype F16 is not supported (F32 or BF16)"]),
        "2d_vector": (lambda t: t.__setitem__(LNF, t[LNF].reshape(64, 1)),
                      ["has shape [64, 1]", "needs [64]"]),
        "conv1d_transposed": (lambda t: t.__setitem__("transformer.h.0.attn.c_attn.weight",
                                                      np.ascontiguousarray(t["transformer.h.0.attn.c_attn.weight"].T)),
                              ["has shape [192, 64]", "needs [64, 192]"]),
    }
    for name, (change, words) in cases.items():
        expect_error(gpt2_wcheck_asan, st_dir(tmp_path, name, tensors=with_(change)), words)


# (override, words, the file the message must name: the model or config.json)
CONFIG_BAD = {
    "n_embd": (dict(n_embd=32), ["has shape [300, 64]", "config.json", "needs [300, 32]"], "m"),
    "vocab": (dict(vocab_size=301), ["needs [301, 64]"], "m"),
    "positions": (dict(n_positions=64, n_ctx=64), ["needs [64, 64]"], "m"),
    "n_head": (dict(n_head=3), ["n_embd = 64 is not divisible by n_head = 3"], "c"),
    "more_layers": (dict(n_layer=3), ["tensor 'h.2.ln_1.weight' is missing"], "m"),
    "fewer_layers": (dict(n_layer=1), ["is for layer 1, but config.json has n_layer = 1"], "m"),
    "string": (dict(n_embd="64"), ["'n_embd' is not an integer"], "c"),
    "negative": (dict(n_layer=-2), ["'n_layer' is not an integer"], "c"),
    "missing": (dict(n_head=None), ["'n_head' is missing"], "c"),
    "huge": (dict(n_layer=10 ** 6), ["n_layer = 1000000 is outside 1..4096"], "c"),
}


@pytest.mark.parametrize("name", sorted(CONFIG_BAD))
def test_config_mismatch(gpt2_wcheck_asan, tmp_path, name):
    override, words, named = CONFIG_BAD[name]
    f = st_dir(tmp_path, name)
    c = gc.hf_config(CFG)
    for k, v in override.items():
        if v is None:
            c.pop(k)
        else:
            c[k] = v
    (f.parent / "config.json").write_text(json.dumps(c))
    expect_error(gpt2_wcheck_asan, f, words,
                 named=f if named == "m" else f.parent / "config.json")


def test_config_file_problems(gpt2_wcheck_asan, tmp_path):
    f = st_dir(tmp_path, "nocfg")
    (f.parent / "config.json").unlink()
    expect_error(gpt2_wcheck_asan, f, ["config.json: cannot open"], named=f.parent)
    f = st_dir(tmp_path, "badcfg")
    (f.parent / "config.json").write_text('{"n_layer": 2,')
    expect_error(gpt2_wcheck_asan, f, ["config.json: not a JSON object (bad JSON)"],
                 named=f.parent)


def test_fuzzed_headers(gpt2_wcheck_asan, tmp_path):
    """Random byte edits of a safetensors header and of an llm.c header: each run either
    loads or fails cleanly, never a sanitizer report (checked in wcheck)."""
    rng = random.Random(11)
    t, entries, data = good_parts()
    good = gc.st_bytes(entries, data)
    n = int.from_bytes(good[:8], "little")
    llmc = llmc_file(tmp_path).read_bytes()
    outcomes = {0: 0, 1: 0}
    for i in range(120):
        if i % 2:
            raw = bytearray(good)
            for _ in range(rng.randint(1, 4)):
                raw[rng.randrange(8, 8 + n)] = rng.choice(b'{}[]",:0123456789 -.eE\x00\xff')
            f = st_dir(tmp_path, f"f{i}", raw=bytes(raw))
        else:
            raw = bytearray(llmc)
            for _ in range(rng.randint(1, 3)):
                raw[rng.randrange(0, 32)] = rng.randrange(256)
            f = tmp_path / f"f{i}.bin"
            f.write_bytes(bytes(raw))
        r = wcheck(gpt2_wcheck_asan, f)
        assert r.returncode in (0, 1), r.stderr.decode(errors="replace")
        if r.returncode:
            assert str(f) in r.stderr.decode(errors="replace")
        outcomes[r.returncode] += 1
    report(f"fuzzed checkpoint headers: 120 runs, {outcomes[1]} clear errors, {outcomes[0]} "
           f"loads, no sanitizer report")
