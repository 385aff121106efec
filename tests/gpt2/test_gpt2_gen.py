"""test_gpt2_gen.py — build/gpt2, the GPT-2 program, against a NumPy GPT-2, and its command line.

Verification: `build/gpt2 --verify DIR` and the reference write the same folder (per step:
emb, every block's residual, the last logits; ids.npy), compared here step by step:
emb / residuals by max|a - b| / max|ref| (limit 1e-4), logits by max|a - b| (limit 1e-3),
ids exactly (greedy). The reference is tests/reference/gpt2.py (NumPy, f32). The worst figures measured are
printed at the end of the run.

Models: the bundled Shakespeare model (its 200 greedy ids recorded by the training run,
and 30 steps layer by layer), and random checkpoints at GPT-2's init scales, made here by
gen_checkpoints.py (never committed): a small config (L=2, C=64, NH=4, V=500 padded to 512, maxT=128) as
llm.c f32, llm.c bf16 and Hugging Face safetensors. Variants: one block per graph (the
default) and the whole model as one graph, 2 blocks per graph, the matrices in the
session's kernel layouts (the default) and as the file stores them, prefill through the
tracing JIT (the default; prompt lengths 1, 16, 17, 100, 128) and with one compile per
bucket, matrices copied (the default) and zero-copy over the mapping, the evaluator backend, 1
and 2 threads (bitwise equal), a generation that fills the context, one that grows the
cache through buckets 64 -> 128 -> 256, and the 124M shape (a 500 MB random checkpoint in
the test's temporary folder, about 10 s; HLOJIT_GPT2_124M=0 leaves it out).

Also: which weights are used over the file's mapping and which are copied (--stats' byte
counts), the command line (flags, errors, --help, --stats, --print-ids, --prompt through the
tokenizer, stopping at <|endoftext|>, seeded sampling), hlojit's disk cache across two
processes (every other run has it off, HLOJIT_CACHE_DIR=off) and broken files and vocabularies
through build/asan/gpt2 (ASan + UBSan): exit status 1, a message naming the file, no
sanitizer report.
"""
import json
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
import gen_checkpoints as gen  # noqa: E402
from gpt2_testlib import VOCAB_DIR, report  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "reference"))
import gpt2 as ref  # noqa: E402

GPT2 = pathlib.Path(os.environ.get("HLOJIT_GPT2_BIN", ROOT / "build" / "gpt2"))   # the GPU bundle's: tools/gpu_check.sh
GPT2_ASAN = ROOT / "build" / "asan" / "gpt2"
BUNDLED = ROOT / "examples" / "gpt2" / "data" / "shakespeare"
SMALL = dict(L=2, NH=4, C=64, V=500, Vp=512, maxT=128)
PROMPT = "5,77,300,499,12"
STEPS = 10
STATS = re.compile(r"^stats: compiles=(\d+) mem_hits=(\d+) disk_hits=(\d+) "
                   r"prefill_tok_s=([0-9.]+) decode_tok_s=([0-9.]+)", re.M)

pytestmark = pytest.mark.skipif(not GPT2.exists(), reason=f"skipped: {GPT2} not built (make gpt2)")


def run(exe, args, timeout=600, cache_dir="off"):
    """Runs |exe|; hlojit's disk cache is off unless |cache_dir| names one (so every run
    compiles what it checks)."""
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1", UBSAN_OPTIONS="print_stacktrace=1",
               HLOJIT_CACHE_DIR=str(cache_dir))
    return subprocess.run([str(exe)] + [str(a) for a in args], capture_output=True, text=True,
                          errors="replace", timeout=timeout, env=env)


def sanitizer_quiet(r):
    return not any(s in r.stderr for s in ("AddressSanitizer", "LeakSanitizer", "runtime error"))


def write_model(d, name, cfg, seed, formats=("llmc",), dtype="f32", mutate=None):
    p = gen.gpt2_params(cfg, seed, dtype)
    if mutate:
        mutate(p)
    out = {}
    if "llmc" in formats:
        out["llmc"] = d / f"{name}.bin"
        out["llmc"].write_bytes(gen.llmc_bytes(cfg, p, dtype))
    if "hf" in formats:
        hd = d / f"{name}_hf"
        hd.mkdir(exist_ok=True)
        gen.write_safetensors(str(hd / "model.safetensors"), gen.hf_tensors(cfg, p))
        gen.write_config(str(hd / "config.json"), cfg)
        out["hf"] = hd
    return out


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("gpt2gen")
    m = write_model(d, "small", SMALL, 11, ("llmc", "hf"))
    m["bf16"] = write_model(d, "small_bf16", SMALL, 11, dtype="bf16")["llmc"]
    m["dir"] = d
    return m


def reference(model, ids, tokens, out):
    """The reference's verify folder for a greedy run of |tokens| steps."""
    assert ref._main(["generate", "--model", str(model), "--ids", ids, "--tokens",
                      str(tokens), "--greedy", "--verify", str(out)]) == 0


def compare(ref, got):
    """(worst emb/res rel, worst logits abs, ids identical, steps)."""
    ref, got = pathlib.Path(ref), pathlib.Path(got)
    steps = sorted(int(p.name[5:]) for p in ref.glob("step_*"))
    worst_r = worst_l = 0.0
    for k in steps:
        for f in sorted((ref / f"step_{k}").glob("*.npy")):
            a = np.load(f).astype(np.float64)
            g = got / f"step_{k}" / f.name
            assert g.exists(), f"{g} missing"
            b = np.load(g).astype(np.float64)
            assert a.shape == b.shape, (f.name, a.shape, b.shape)
            d = np.abs(a - b).max() if np.all(np.isfinite(b)) else np.inf
            if f.name == "logits.npy":
                worst_l = max(worst_l, d)
            else:
                worst_r = max(worst_r, d / max(np.abs(a).max(), 1e-30))
    same = np.array_equal(np.load(ref / "ids.npy"), np.load(got / "ids.npy"))
    return worst_r, worst_l, same, len(steps)


def verify(model, args, tmp, tokens=STEPS, ids=PROMPT, ref_model=None, name=""):
    ref, got = tmp / "ref", tmp / "got"
    reference(ref_model or model, ids, tokens, ref)
    r = run(GPT2, ["--model", model, "--ids", ids, "--tokens", tokens, "--greedy",
                   "--verify", got, "--print-ids"] + args)
    assert r.returncode == 0, r.stderr
    wr, wl, same, n = compare(ref, got)
    report(f"verify {name}: {n} steps, emb/res max rel {wr:.2e}, logits max abs {wl:.2e}, "
           f"ids {'identical' if same else 'DIFFERENT'}")
    assert wr <= 1e-4 and wl <= 1e-3 and same, (wr, wl, same)
    return r


VARIANTS = {
    "llmc f32, cpu": ("llmc", ["--backend", "cpu"]),
    "llmc f32, cpu, whole model one graph": ("llmc", ["--backend", "cpu", "--layers-per-graph", "0"]),
    "llmc f32, cpu, 2 blocks per graph, 1 thread": ("llmc", ["--backend", "cpu", "--layers-per-graph", "2", "--threads", "1"]),
    "llmc bf16, cpu": ("bf16", ["--backend", "cpu"]),
    "llmc bf16, cpu, matrices as stored": ("bf16", ["--backend", "cpu", "--layouts", "stored"]),
    "llmc bf16, cpu, widened to f32": ("bf16", ["--backend", "cpu", "--f32-weights"]),
    "safetensors, cpu": ("hf", ["--backend", "cpu"]),
    "llmc f32, interp": ("llmc", ["--backend", "interp"]),
    "llmc f32, cpu, matrices as stored": ("llmc", ["--backend", "cpu", "--layouts", "stored"]),
    "llmc f32, cpu, prefill without the JIT": ("llmc", ["--backend", "cpu", "--no-jit"]),
    "llmc f32, cpu, zero-copy weights": ("llmc", ["--backend", "cpu", "--zero-copy"]),
    "safetensors, cpu, zero-copy, as stored": ("hf", ["--backend", "cpu", "--zero-copy", "--layouts", "stored"]),
    "llmc f32, interp, prefill without the JIT": ("llmc", ["--backend", "interp", "--no-jit"]),
    "safetensors, cpu, matrices as stored": ("hf", ["--backend", "cpu", "--layouts", "stored"]),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_verify_small(models, tmp_path, variant):
    kind, args = VARIANTS[variant]
    verify(models[kind], args, tmp_path, name=f"small ({variant})",
           ref_model=models["bf16"] if kind == "bf16" else models["llmc"])


@pytest.fixture(scope="module")
def bundled():
    meta = BUNDLED / "train_config.json"
    if not (BUNDLED / "model.bin").exists() or not meta.exists():
        pytest.skip(f"skipped: no bundled model in {BUNDLED}")
    return json.loads(meta.read_text())


def test_bundled_greedy_ids(bundled):
    """The 200 greedy ids the training run recorded (JAX-trained weights, NumPy reference)."""
    r = run(GPT2, ["--model", BUNDLED / "model.bin", "--ids", ",".join(map(str, bundled["prompt_ids"])),
                   "--tokens", 200, "--greedy", "--print-ids", "--backend", "cpu"])
    got = ids_of(r)
    same = next((i for i, (a, b) in enumerate(zip(got, bundled["greedy_ids"])) if a != b), None)
    report(f"bundled model: {len(got)} greedy ids, "
           f"{'identical to the training log' if same is None else f'first difference at {same}'}")
    assert got == bundled["greedy_ids"]


def test_verify_bundled(bundled, tmp_path):
    verify(BUNDLED / "model.bin", ["--backend", "cpu"], tmp_path, tokens=30,
           ids=",".join(map(str, bundled["prompt_ids"])), name="bundled Shakespeare model")


@pytest.mark.parametrize("P", [1, 16, 17, 100, 128])
def test_verify_prompt_lengths(models, tmp_path, P):
    """Prefill buckets through the JIT: at, just over and far from a bucket, and maxT."""
    ids = ",".join(str((i * 37 + 5) % SMALL["V"]) for i in range(P))
    verify(models["llmc"], ["--backend", "cpu"], tmp_path, tokens=3, ids=ids,
           name=f"small, prompt of {P}")


def test_verify_until_context_full(models, tmp_path):
    """Prefill bucket 16, then decode steps to position maxT - 1 (a cache this small is
    made maxT long at once)."""
    r = verify(models["llmc"], ["--backend", "cpu"], tmp_path, tokens=200,
               name="small, 124 steps to the context limit")
    assert "context of 128 tokens is full" in r.stderr
    assert len(r.stdout.strip().split(",")) == 128 - 5 + 1


def test_verify_cache_growth(tmp_path):
    """maxT = 16384 makes the full cache 16 MiB, so decode goes through cache buckets 64,
    128 and 256 (the filled rows copied each time): 140 steps from a 5-token prompt."""
    m = write_model(tmp_path, "long", dict(SMALL, maxT=16384), 13)["llmc"]
    r = verify(m, ["--backend", "cpu", "--stats"], tmp_path, tokens=140,
               name="small, maxT 16384, 140 steps over cache buckets 64/128/256")
    assert "compiles=8 " in r.stderr, r.stderr  # 3 prefill graphs, embed + head + 3 blocks


def test_bf16_kept_equals_widened(models, tmp_path):
    # bf16 -> f32 is exact, so matrices kept in bf16 (the CPU default) and widened to f32
    # at load (--f32-weights) must give the same bits at every step, in both layouts.
    for lay in ("kernel", "stored"):
        for f32 in (False, True):
            r = run(GPT2, ["--model", models["bf16"], "--ids", PROMPT, "--tokens", 4, "--greedy",
                           "--backend", "cpu", "--layouts", lay, "--verify", tmp_path / f"{lay}{f32}"]
                    + (["--f32-weights"] if f32 else []))
            assert r.returncode == 0, r.stderr
        for k in range(4):
            files = sorted((tmp_path / f"{lay}False" / f"step_{k}").glob("*.npy"))
            assert files
            for f in files:
                assert np.array_equal(np.load(f), np.load(tmp_path / f"{lay}True" / f"step_{k}" / f.name)), f


def test_bf16_kept_where_the_cpu_runs(models, tmp_path):
    # The weights the compiled graphs take (HLOJIT_DUMP_TO's optimised modules): bf16
    # matrices (panels where the CPU has them) with --backend cpu and with auto on a machine whose auto is the CPU; none
    # with --f32-weights.
    probe = subprocess.run([str(ROOT / "build" / "hlojit"), "run", "--backend", "cuda", "--random-inputs", "1",
                            str(ROOT / "tests" / "fixtures" / "hlo_pass" / "gpt2_block.hlo")],
                           capture_output=True, text=True, env=dict(os.environ, HLOJIT_CACHE_DIR="off"))
    auto_is_cpu = probe.returncode != 0   # no CUDA device: auto falls to the CPU
    cases = [(["--backend", "cpu"], True), (["--backend", "cpu", "--f32-weights"], False)] + \
        ([([], True)] if auto_is_cpu else [])
    for k, (args, want) in enumerate(cases):
        d = tmp_path / f"dump{k}"
        env = dict(os.environ, HLOJIT_CACHE_DIR="off", HLOJIT_DUMP_TO=str(d))
        r = subprocess.run([str(GPT2), "--model", str(models["bf16"]), "--ids", PROMPT, "--tokens", "2",
                            "--greedy", "--print-ids"] + args, capture_output=True, text=True, env=env)
        assert r.returncode == 0, r.stderr
        hlo = "".join(f.read_text() for f in d.glob("*.after_passes.hlo"))
        assert hlo, args
        assert ("bf16[" in hlo) == want, (args, want)
        # and in the CPU's panel order (qkvw's width 192 is a multiple of every nr)
        assert bool(re.search(r"bf16\[\d+,\d+,\d+,\d+\]", hlo)) == want, (args, want)


def test_threads_bitwise_equal(models, tmp_path):
    for t in (1, 2):
        r = run(GPT2, ["--model", models["llmc"], "--ids", PROMPT, "--tokens", 4, "--greedy",
                       "--backend", "cpu", "--threads", t, "--verify", tmp_path / f"t{t}"])
        assert r.returncode == 0, r.stderr
    for k in range(4):
        for f in (tmp_path / "t1" / f"step_{k}").glob("*.npy"):
            assert np.array_equal(np.load(f), np.load(tmp_path / "t2" / f"step_{k}" / f.name)), f


@pytest.mark.skipif(os.environ.get("HLOJIT_GPT2_124M") == "0",
                    reason="skipped: HLOJIT_GPT2_124M=0 (the 124M-shaped check writes a "
                           "500 MB checkpoint, 250 MB in bf16; about 10 s each)")
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_verify_124m(tmp_path, dtype):
    # bf16: every block matrix and the lm_head kept bf16 in the CPU's panel order (where
    # its nr divides the width), read in place by the bf16 micro-kernel and gemv
    cfg = dict(L=12, NH=12, C=768, V=50257, Vp=50304, maxT=1024)
    m = write_model(tmp_path, "124m", cfg, 1234, dtype=dtype)["llmc"]
    verify(m, ["--backend", "cpu"], tmp_path, ids="464,3290,318,257,3797,13", name=f"124M shape, {dtype}")


# ---- the command line ----------------------------------------------------------------------

def ids_of(r):
    assert r.returncode == 0, r.stderr
    return [int(x) for x in r.stdout.strip().split(",")]


def gen_ids(model, *args):
    return ids_of(run(GPT2, ["--model", model, "--ids", PROMPT, "--tokens", 12,
                             "--backend", "interp", "--print-ids"] + list(args)))


def test_sampling(models):
    m = models["llmc"]
    greedy = gen_ids(m, "--greedy")
    a, b = gen_ids(m, "--seed", 7), gen_ids(m, "--seed", 7)
    c = gen_ids(m, "--seed", 8)
    assert a == b, "the same seed must give the same ids"
    assert a != c, "seeds 7 and 8 gave the same 12 ids from a near-uniform distribution"
    assert gen_ids(m, "--top-k", 1, "--seed", 3) == greedy
    assert gen_ids(m, "--temperature", 0) == greedy
    assert gen_ids(m, "--top-p", 1e-9, "--seed", 5) == greedy
    for opts in (["--top-k", 40, "--temperature", 0.8], ["--top-p", 0.9], ["--top-k", 10, "--top-p", 0.5]):
        x = gen_ids(m, "--seed", 1, *opts)
        assert x == gen_ids(m, "--seed", 1, *opts) and all(0 <= i < 500 for i in x), opts


def test_stats_and_text_output(models):
    r = run(GPT2, ["--model", models["llmc"], "--ids", PROMPT, "--tokens", 3, "--greedy",
                   "--backend", "cpu", "--stats"])
    assert r.returncode == 0, r.stderr
    m = STATS.search(r.stderr)
    assert m, r.stderr
    assert int(m.group(1)) == 6, "embedding, block and head graphs, for prefill and decode"
    assert "printing ids" in r.stderr  # V = 500: no vocabulary fits
    assert r.stdout.strip().startswith(PROMPT + ",")


def safetensors_mappable(path):
    """Bytes of the tensors the session maps from |path| by default: the embedding tables
    and the vectors (no matmul streams them) that start on a 64-byte boundary of the file
    (so of its page-aligned mapping)."""
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    total = 0
    for name, e in json.loads(raw[8:8 + n]).items():
        if name == "__metadata__":
            continue
        lo, hi = e["data_offsets"]
        gathered = name.endswith(("wte.weight", "wpe.weight")) or len(e["shape"]) == 1
        total += (hi - lo) if gathered and (8 + n + lo) % 64 == 0 else 0
    return total


def test_weights_mapped(models):
    """What the session reads over the file's mapping and what it copies (session.h, WEIGHTS):
    on the CPU by default the tensors no matmul streams (wte, which the head reads through a
    copy of its own, wpe and the vectors); with the head reading wte itself, all but wte;
    with --zero-copy and the file's layouts, everything; nothing on the evaluator, nor from
    a bf16 file (widened, or kept bf16 in buffers of its own). Only a tensor that starts on
    a 64-byte boundary is mapped by default: in safetensors, which need not be, the
    expectation comes from the file's own header."""
    L, C, Vp, T = SMALL["L"], SMALL["C"], SMALL["Vp"], SMALL["maxT"]
    wte, wpe, vec, mat = 4 * Vp * C, 4 * T * C, 4 * (L * 13 * C + 2 * C), 4 * L * 12 * C * C
    wte_hf = 4 * SMALL["V"] * C   # safetensors holds V rows, llm.c pads to Vp
    want = {
        ("llmc", "--layouts", "kernel"): (wte + wpe + vec, mat + wte),   # + the head's copy
        ("llmc", "--layouts", "stored"): (wpe + vec, mat + wte),
        ("hf", "--zero-copy", "--layouts", "stored"): (wte_hf + wpe + vec + mat, 0),
        ("llmc", "--backend", "interp"): (0, wte + wpe + vec + mat + wte),
        ("bf16", "--layouts", "kernel"): (0, None),
        ("hf", "--layouts", "kernel"): (safetensors_mappable(models["hf"] / "model.safetensors"), None),
    }
    for (kind, *args), (mapped, copied) in want.items():
        backend = [] if "--backend" in args else ["--backend", "cpu"]
        r = run(GPT2, ["--model", models[kind], "--ids", PROMPT, "--tokens", 1, "--greedy",
                       "--stats"] + backend + args)
        assert r.returncode == 0, r.stderr
        m = re.search(r"weights_mapped_bytes=(\d+) weights_copied_bytes=(\d+)", r.stderr)
        assert m, r.stderr
        got = int(m.group(1)), int(m.group(2))
        assert got[0] == mapped and copied in (None, got[1]), (kind, args, got, (mapped, copied))
        report(f"weights {kind} {' '.join(args)}: {got[0]} bytes mapped, {got[1]} copied")


# Runs a command and prints its peak RSS in KiB (os.wait4's rusage of that child alone) on
# stdout, its stderr on stderr. An intermediate process because a child forked from this
# one (pytest, NumPy loaded) would start with, and report, this one's peak.
PEAK_RSS = """
import os, subprocess, sys
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
err = p.stderr.read()
_, status, ru = os.wait4(p.pid, 0)
sys.stderr.buffer.write(err)
print(ru.ru_maxrss)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def peak_rss_bytes(args, cache_dir):
    """The peak resident set of one gpt2 run, and its --stats (mapped, copied) bytes."""
    env = dict(os.environ, HLOJIT_CACHE_DIR=str(cache_dir))
    r = subprocess.run([sys.executable, "-S", "-c", PEAK_RSS, str(GPT2)] + [str(a) for a in args],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    m = re.search(r"weights_mapped_bytes=(\d+) weights_copied_bytes=(\d+)", r.stderr)
    return int(r.stdout) * 1024, (int(m.group(1)), int(m.group(2)))


def test_copied_weights_leave_the_resident_set(tmp_path):
    """Once a tensor is copied into a buffer, its pages in the file's mapping are released
    (gpt2_weights_release), as are wte's, of which the embedding reads only a few rows: a
    67 MB model raises the peak RSS over a tiny one's by about its copies (measured: 76 MB
    for 67 MB of copies), not its copies plus the whole file (131 MB without the release;
    GPT-2 124M f32: 0.57 GB peak against 1.04 GB)."""
    big = dict(L=4, NH=8, C=512, V=8000, Vp=8192, maxT=64)
    tiny = dict(L=1, NH=2, C=32, V=500, Vp=512, maxT=64)
    mb = write_model(tmp_path, "big", big, 6)["llmc"]
    mt = write_model(tmp_path, "tiny", tiny, 6)["llmc"]
    args = ["--ids", "1,2,3", "--tokens", 3, "--greedy", "--backend", "cpu", "--threads", 1,
            "--stats", "--print-ids"]
    cache = tmp_path / "cache"
    for m in (mb, mt):   # compiled once, so the measured runs load code instead of compiling
        peak_rss_bytes(["--model", m] + args, cache)
    base, _ = peak_rss_bytes(["--model", mt] + args, cache)
    peak, (mapped, copied) = peak_rss_bytes(["--model", mb] + args, cache)
    size = mb.stat().st_size
    report(f"peak RSS: {size / 1e6:.0f} MB model {peak / 1e6:.0f} MB, tiny model "
           f"{base / 1e6:.0f} MB; copied {copied / 1e6:.0f} MB, mapped {mapped / 1e6:.0f} MB")
    assert peak - base < copied + size / 2, (peak, base, copied, size)   # 76 MB; 131 before


def test_disk_cache(models, tmp_path):
    """A second process with the same cache directory compiles nothing, same ids."""
    args = ["--model", models["llmc"], "--ids", PROMPT, "--tokens", 70, "--greedy",
            "--backend", "cpu", "--stats", "--print-ids"]
    a = run(GPT2, args, cache_dir=tmp_path / "cache")
    b = run(GPT2, args, cache_dir=tmp_path / "cache")
    ma, mb = STATS.search(a.stderr), STATS.search(b.stderr)
    assert ma and mb, (a.stderr, b.stderr)
    assert ids_of(a) == ids_of(b)
    assert (int(ma.group(1)), int(ma.group(3))) == (6, 0), a.stderr
    assert (int(mb.group(1)), int(mb.group(3))) == (0, 6), b.stderr
    report(f"disk cache: first run {ma.group(0)}; second run {mb.group(0)}")


@pytest.fixture(scope="module")
def vocab_model(tmp_path_factory):
    """A tiny model over GPT-2's vocabulary (V = 50257), so the tokenizer is used."""
    cfg = dict(L=1, NH=2, C=32, V=50257, Vp=50304, maxT=64)
    return write_model(tmp_path_factory.mktemp("gpt2voc"), "voc", cfg, 5)["llmc"]


def test_prompt_text(vocab_model):
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks
    ranks = data_gym_to_mergeable_bpe_ranks(os.path.join(VOCAB_DIR, "vocab.bpe"),
                                            os.path.join(VOCAB_DIR, "encoder.json"))
    pat = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
    enc = tiktoken.Encoding(name="gpt2-local", pat_str=pat, mergeable_ranks=ranks,
                            special_tokens={"<|endoftext|>": 50256})
    text = "Hello world, it's a fine day<|endoftext|> 12345"
    ids = enc.encode(text, allowed_special="all")
    base = ["--model", vocab_model, "--tokens", 5, "--greedy", "--backend", "interp"]
    a = run(GPT2, base + ["--prompt", text, "--print-ids"])
    b = run(GPT2, base + ["--ids", ",".join(map(str, ids)), "--print-ids"])
    assert ids_of(a) == ids_of(b)
    t = run(GPT2, base + ["--prompt", text])
    assert t.returncode == 0, t.stderr
    assert t.stdout.startswith(text)
    assert t.stdout.rstrip("\n") == enc.decode(ids + ids_of(a))


def test_hugging_face_vocab_names(tmp_path):
    """A Hub snapshot holds the vocabulary as vocab.json + merges.txt beside config.json: the
    bundled Shakespeare vocabulary (V = 2000, not GPT-2's, so no fallback can stand in for
    it) under those names tokenizes a prompt as the same files under OpenAI's names do."""
    cfg = dict(L=1, NH=2, C=32, V=2000, Vp=2048, maxT=64)
    m = write_model(tmp_path, "shk", cfg, 4, ("hf",))["hf"]
    base = ["--model", m, "--prompt", "ROMEO:\nWhat light", "--tokens", 3, "--greedy",
            "--backend", "interp", "--print-ids"]
    r = run(GPT2, base)
    assert r.returncode == 1 and "--prompt needs a vocabulary" in r.stderr, r.stderr
    assert "vocab.json + merges.txt" in r.stderr, r.stderr
    want = run(GPT2, base + ["--vocab", BUNDLED])
    assert want.returncode == 0, want.stderr
    (m / "vocab.json").write_bytes((BUNDLED / "encoder.json").read_bytes())
    (m / "merges.txt").write_bytes((BUNDLED / "vocab.bpe").read_bytes())
    got = run(GPT2, base)
    assert got.returncode == 0, got.stderr
    assert ids_of(got) == ids_of(want)
    hf_dir = tmp_path / "only_hf_names"
    hf_dir.mkdir()
    for f in ("vocab.json", "merges.txt"):
        (hf_dir / f).write_bytes((m / f).read_bytes())
    assert ids_of(run(GPT2, base + ["--vocab", hf_dir])) == ids_of(want)


def test_stops_at_eot(tmp_path):
    """ln_f's weight 0 and bias along wte[V-1]: every logit row prefers V - 1 (EOT)."""
    cfg = dict(SMALL)

    def to_eot(p):
        p["wte"][cfg["V"] - 1] = 3 * np.abs(p["wte"][cfg["V"] - 1]).max() * np.sign(p["wte"][cfg["V"] - 1] + 1e-9)
        p["lnfw"][:] = 0
        p["lnfb"][:] = p["wte"][cfg["V"] - 1]

    m = write_model(tmp_path, "eot", cfg, 3, mutate=to_eot)["llmc"]
    base = ["--model", m, "--ids", PROMPT, "--tokens", 6, "--greedy", "--backend", "interp",
            "--print-ids"]
    r = run(GPT2, base)
    assert ids_of(r) == [499] and "stopped at <|endoftext|> after 1 tokens" in r.stderr
    assert ids_of(run(GPT2, base + ["--no-eot"])) == [499] * 6


BAD_FLAGS = [
    ([], "--model is required"),
    (["--model"], "needs a value"),
    (["--model", "m.bin", "--frobnicate"], "unknown option"),
    (["--model", "m.bin", "extra"], "unexpected argument"),
    (["--model", "m.bin", "--tokens", "abc"], "--tokens"),
    (["--model", "m.bin", "--tokens", "-1"], "--tokens"),
    (["--model", "m.bin", "--threads", "1x"], "--threads"),
    (["--model", "m.bin", "--top-p", "1.5"], "--top-p"),
    (["--model", "m.bin", "--top-p", "0"], "--top-p"),
    (["--model", "m.bin", "--temperature", "-1"], "--temperature"),
    (["--model", "m.bin", "--temperature", "nan"], "--temperature"),
    (["--model", "m.bin", "--top-k", "-3"], "--top-k"),
    (["--model", "m.bin", "--seed", "-3"], "--seed"),
    (["--model", "m.bin", "--backend", "tpu"], "--backend"),
    (["--model", "m.bin", "--layouts", "rows"], "--layouts"),
    (["--model", "m.bin", "--greedy", "--temperature", "0.7"], "--greedy"),
    (["--model", "m.bin", "--greedy=1"], "takes no value"),
    (["--model", "m.bin", "--ids", "1", "--prompt", "x"], "not both"),
]


@pytest.mark.parametrize("args,msg", BAD_FLAGS, ids=[" ".join(a) or "(none)" for a, _ in BAD_FLAGS])
def test_bad_flags(args, msg):
    r = run(GPT2, args)
    assert r.returncode == 2 and msg in r.stderr and r.stdout == "", (r.returncode, r.stderr)


def test_help():
    r = run(GPT2, ["--help"])
    assert r.returncode == 0 and "--model" in r.stdout and "--verify" in r.stdout


@pytest.mark.parametrize("ids,msg", [("1,2,x", "--ids"), ("1,,2", "--ids"), ("1,2,", "comma"),
                                     ("500", "[0, 500)"), ("-1", "--ids")])
def test_bad_ids(models, ids, msg):
    r = run(GPT2, ["--model", models["llmc"], "--ids", ids, "--backend", "interp"])
    assert r.returncode == 1 and msg in r.stderr, r.stderr


def test_other_run_errors(models, tmp_path):
    m = models["llmc"]
    r = run(GPT2, ["--model", m, "--prompt", "hello", "--backend", "interp"])
    assert r.returncode == 1 and "--prompt needs a vocabulary" in r.stderr, r.stderr
    long_ids = ",".join(["1"] * 129)
    r = run(GPT2, ["--model", m, "--ids", long_ids, "--backend", "interp"])
    assert r.returncode == 1 and "context of 128" in r.stderr, r.stderr
    r = run(GPT2, ["--model", m, "--ids", "1", "--verify", "/proc/none/here", "--backend", "interp"])
    assert r.returncode == 1 and "--verify" in r.stderr, r.stderr
    r = run(GPT2, ["--model", m, "--ids", "1", "--tokens", 1, "--backend", "cuda"])
    assert r.returncode in (0, 1) and sanitizer_quiet(r)
    if r.returncode:
        assert "cuda" in r.stderr.lower(), r.stderr


# ---- broken files and vocabularies, under ASan + UBSan -------------------------------------

def bad_cases(d, cfg, p):
    """(name, path, extra args, words the message must have one of) for broken models."""
    good = gen.llmc_bytes(cfg, p)
    hdr = np.frombuffer(good[:1024], "<i4").copy()
    cases = []

    def llmc(name, data, words):
        f = d / f"{name}.bin"
        f.write_bytes(data)
        cases.append((name, f, [], words))

    def field(i, v):
        h = hdr.copy()
        h[i] = v
        return h.tobytes() + good[1024:]

    llmc("empty", b"", ["short", "header", "empty", "bytes"])
    llmc("short_header", good[:100], ["header", "short", "bytes"])
    llmc("truncated", good[:len(good) // 2], ["bytes", "size", "short"])
    llmc("one_byte_short", good[:-1], ["bytes", "size", "short"])
    llmc("trailing", good + b"\0" * 4, ["bytes", "size", "long"])
    llmc("bad_magic", field(0, 12345), ["magic"])
    llmc("bad_version", field(1, 4), ["version"])
    llmc("channels_mismatch", field(6, 128), ["bytes", "size"])
    llmc("heads_indivisible", field(5, 5), ["heads", "NH", "divisible"])
    llmc("layers_zero", field(4, 0), ["L", "layers"])
    cases.append(("missing", d / "no_such_file.bin", [], ["no such", "cannot", "open"]))
    empty_dir = d / "empty_dir"
    empty_dir.mkdir()
    cases.append(("empty_dir", empty_dir, [], ["model.safetensors"]))
    # Not llm.c's magic, not .bin: read as safetensors, but the file is named before any
    # missing config.json.
    cases.append(("not_regular", pathlib.Path("/dev/null"), [], ["not a regular file"]))
    (d / "empty.safetensors").write_bytes(b"")
    cases.append(("empty_st", d / "empty.safetensors", [], ["empty file"]))

    tensors = gen.hf_tensors(cfg, p)
    entries, data = gen.st_entries(tensors)

    def st(name, ent, dat, words, config=None):
        hd = d / name
        hd.mkdir()
        (hd / "model.safetensors").write_bytes(gen.st_bytes(ent, dat))
        if config is not False:
            gen.write_config(str(hd / "config.json"), cfg, **(config or {}))
        cases.append((name, hd, [], words))

    first = next(iter(entries))
    past = json.loads(json.dumps(entries))
    past[first]["data_offsets"][1] = len(data) + 64
    st("st_offsets_past_end", past, data, ["offset", "end", "past", "range"])
    over = json.loads(json.dumps(entries))
    names = list(over)
    over[names[1]]["data_offsets"] = list(over[names[0]]["data_offsets"])
    st("st_overlap", over, data, ["overlap", "tile", "hole", "gap"])
    st("st_truncated_data", entries, data[:-100], ["offset", "end", "past", "range", "bytes"])
    miss = {k: v for k, v in entries.items() if not k.endswith("ln_f.bias")}
    st("st_missing_tensor", miss, data, ["missing", "ln_f", "tile", "hole"])
    st("st_config_mismatch", entries, data, ["shape", "config", "n_embd"], {"n_embd": 96})
    st("st_no_config", entries, data, ["config.json"], config=False)
    return cases


@pytest.mark.skipif(not GPT2_ASAN.exists(), reason=f"skipped: {GPT2_ASAN} not built (make gpt2)")
def test_bad_files_asan(tmp_path):
    cfg = dict(SMALL, maxT=32)
    p = gen.gpt2_params(cfg, 2)
    failures = []
    cases = bad_cases(tmp_path, cfg, p)
    for name, path, extra, words in cases:
        r = run(GPT2_ASAN, ["--model", path, "--ids", "1,2", "--tokens", 1, "--greedy",
                            "--backend", "interp"] + extra, timeout=120)
        low = r.stderr.lower()
        named = path.name in r.stderr and any(w.lower() in low for w in words)
        if r.returncode != 1 or not named or not sanitizer_quiet(r):
            failures.append(f"{name}: rc {r.returncode}: {r.stderr.strip()[-400:]!r}")
    report(f"bad model files through build/asan/gpt2: {len(cases) - len(failures)}/{len(cases)} "
           "refused cleanly")
    assert not failures, "\n".join(failures)


@pytest.mark.skipif(not GPT2_ASAN.exists(), reason=f"skipped: {GPT2_ASAN} not built (make gpt2)")
def test_bad_vocab_asan(vocab_model, tmp_path):
    enc = pathlib.Path(VOCAB_DIR, "encoder.json").read_text(encoding="utf-8")
    merges = pathlib.Path(VOCAB_DIR, "vocab.bpe").read_text(encoding="utf-8").split("\n")
    cases = {
        # a merge whose result is not a token ("a vocab with a missing merge")
        "missing_merge_result": (enc, "\n".join(merges[:5] + ["\u0120the \u0120the"] + merges[5:])),
        "truncated_json": (enc[:len(enc) // 2], "\n".join(merges)),
        "unknown_merge_part": (enc, "\n".join(merges[:3] + ["Qz Zq"] + merges[3:])),
    }
    failures = []
    for name, (e, m) in cases.items():
        d = tmp_path / name
        d.mkdir()
        (d / "encoder.json").write_text(e, encoding="utf-8")
        (d / "vocab.bpe").write_text(m, encoding="utf-8")
        r = run(GPT2_ASAN, ["--model", vocab_model, "--vocab", d, "--prompt", "hello there",
                            "--tokens", 1, "--backend", "interp"], timeout=120)
        if r.returncode != 1 or str(d) not in r.stderr or not sanitizer_quiet(r):
            failures.append(f"{name}: rc {r.returncode}: {r.stderr.strip()[-400:]!r}")
    assert not failures, "\n".join(failures)


@pytest.mark.skipif(not GPT2_ASAN.exists(), reason=f"skipped: {GPT2_ASAN} not built (make gpt2)")
@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_good_run_asan(models, tmp_path, backend):
    """A whole generation (prefill, decode, bucket growth, verify files) under the sanitizers."""
    r = run(GPT2_ASAN, ["--model", models["llmc"], "--ids", PROMPT, "--tokens", 70, "--seed", 1,
                        "--top-k", 20, "--backend", backend, "--verify", tmp_path / "v",
                        "--stats", "--print-ids", "--zero-copy"], timeout=900)
    assert r.returncode == 0 and sanitizer_quiet(r), r.stderr[-3000:]
    assert len(r.stdout.strip().split(",")) == 70
