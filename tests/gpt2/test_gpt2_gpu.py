"""test_gpt2_gpu.py — build/gpt2 on the CUDA backend: its host side on the CUDA test double
(no GPU needed; in `make test`), and on a GPU the same verification against NumPy as the
CPU's (test_gpt2_gen.py).

On the double (tests/cuda_double: the driver's host side is real, kernels never run), for a
device of compute capability 8.0 and one of 9.0: a prefill and decode steps of the small
random config and of the bundled model compile for the CUDA backend (--stats says
backend=cuda), decode steps compile nothing once the first has run (three steps and twelve
make the same compiles: two, the whole model's prefill and decode graphs; six per block), and every kernel's PTX (HLOJIT_DUMP_TO) is assembled by NVIDIA's
ptxas for the arch its .target names. Skipped, saying so, without the double
(build/tests/libcuda_double.so, or $HLOJIT_CUDA_DOUBLE) or without ptxas ($HLOJIT_PTXAS,
$CUDA_HOME/bin/ptxas, /usr/local/cuda/bin/ptxas).

On a GPU (--backend cuda): the bundled model (30 steps), the small config as llm.c f32 and
as safetensors (the whole model one graph, the default on CUDA) and as llm.c run per block,
and the 124M shape (HLOJIT_GPT2_124M=0 leaves it out), each step's
embeddings, every block's residual and the logits against tests/reference/gpt2.py within
the CPU's limits (1e-4 relative, 1e-3 absolute for the logits) and the greedy ids
identical. Skipped, saying so, where `hlojit run --backend cuda` finds no device. With
HLOJIT_GPU_TEST_ON_DOUBLE=1 (tools/gpu_check.sh --dry-run) they run on the double instead
and pass only if the comparison catches the wrong results (no kernel runs there).

$HLOJIT_GPT2_BIN and $HLOJIT_BIN name the gpt2 and hlojit programs (tools/gpu_check.sh
passes the GPU bundle's); by default build/gpt2 and build/hlojit."""
import os
import pathlib
import re
import subprocess
import sys
import tempfile

import pytest

import test_gpt2_gen as gen_tests
from test_gpt2_gen import BUNDLED, PROMPT, SMALL, STATS, write_model

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
from ptx_check import find_ptxas as ptxas_path  # noqa: E402  ($HLOJIT_PTXAS, $CUDA_HOME, /usr/local/cuda)
GPT2 = gen_tests.GPT2
HLOJIT = pathlib.Path(os.environ.get("HLOJIT_BIN", ROOT / "build" / "hlojit"))
DOUBLE = pathlib.Path(os.environ.get("HLOJIT_CUDA_DOUBLE", ROOT / "build" / "tests" / "libcuda_double.so"))
ON_DOUBLE = os.environ.get("HLOJIT_GPU_TEST_ON_DOUBLE") == "1"

pytestmark = pytest.mark.skipif(not GPT2.exists(), reason=f"skipped: {GPT2} not built (make gpt2)")


def double_env(cc, dump=None):
    env = dict(os.environ, HLOJIT_CACHE_DIR="off", HLOJIT_LIBCUDA=str(DOUBLE), HLOJIT_LIBCUBLAS=str(DOUBLE),
               CUDA_DOUBLE_CC_MAJOR=str(cc[0]), CUDA_DOUBLE_CC_MINOR=str(cc[1]))
    if dump:
        env["HLOJIT_DUMP_TO"] = str(dump)
    return env


def gpt2(args, env, timeout=600):
    return subprocess.run([str(GPT2)] + [str(a) for a in args], capture_output=True, text=True,
                          errors="replace", timeout=timeout, env=env)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    d = tmp_path_factory.mktemp("gpt2gpu")
    return write_model(d, "small", SMALL, 11, ("llmc", "hf"))


# ---- the host side, on the double ----------------------------------------------------------

@pytest.mark.skipif(not DOUBLE.exists(), reason=f"skipped: no CUDA test double ({DOUBLE}: make build/tests/libcuda_double.so)")
@pytest.mark.skipif(ptxas_path() is None, reason="skipped: no ptxas ($HLOJIT_PTXAS, $CUDA_HOME/bin/ptxas, /usr/local/cuda/bin/ptxas)")
@pytest.mark.parametrize("cc", [(8, 0), (9, 0)], ids=["sm_80", "sm_90"])
@pytest.mark.parametrize("which", ["small", "bundled"])
def test_cuda_host_side_on_double(small, tmp_path, cc, which):
    if which == "bundled":
        if not (BUNDLED / "model.bin").exists():
            pytest.skip(f"skipped: no bundled model in {BUNDLED}")
        model, ids = BUNDLED / "model.bin", "30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46"
    else:
        model, ids = small["llmc"], PROMPT
    compiles = {}
    # the default split on CUDA is the whole model (session.h, STAGES); per block as well
    for tokens, split in ((3, []), (12, []), (12, ["--layers-per-graph", "1"])):
        dump = tmp_path / f"dump{tokens}{len(split)}"
        r = gpt2(["--model", model, "--ids", ids, "--tokens", tokens, "--greedy", "--backend", "cuda",
                  "--print-ids", "--stats"] + split, double_env(cc, dump))
        assert r.returncode == 0, r.stderr[-3000:]
        m = STATS.search(r.stderr)
        assert m and "backend=cuda" in r.stderr, r.stderr[-2000:]
        compiles[tokens, len(split)] = int(m.group(1))
        assert len(r.stdout.strip().split(",")) == tokens, r.stdout
    assert compiles[3, 0] == compiles[12, 0] == 2, f"one prefill and one decode graph: {compiles}"
    assert compiles[12, 2] == 6, f"embedding, block and head, prefill and decode: {compiles}"
    ptxas = ptxas_path()
    ptx = sorted((tmp_path / "dump120").glob("*.ptx")) + sorted((tmp_path / "dump122").glob("*.ptx"))
    assert len(ptx) >= compiles[12, 0] + compiles[12, 2], (compiles, [p.name for p in ptx])
    want = f"sm_{cc[0]}{cc[1]}"
    entries = 0
    for p in ptx:
        text = p.read_text()
        t = re.search(r"^\.target\s+(\S+)", text, re.M)
        assert t and t.group(1).startswith(want), (p.name, t and t.group(1))
        entries += text.count(".entry")
        a = subprocess.run([ptxas, f"-arch={t.group(1)}", str(p), "-o", str(tmp_path / "k.cubin")],
                           capture_output=True, text=True, timeout=300)
        assert a.returncode == 0, f"ptxas rejected {p.name}: {a.stderr[-2000:]}"
    gen_tests.report(f"cuda on the double, {which}, {want}: {len(ptx)} PTX modules, {entries} kernels "
                     f"assembled by ptxas; {compiles[12, 0]} compiles for 3 or 12 steps (whole model), "
                     f"{compiles[12, 2]} per block")


# ---- on a GPU (or, for the dry run, on the double, where the comparison must fail) -------

def cuda_device():
    """None when `hlojit run --backend cuda` runs a one-op module here, else why not."""
    if ON_DOUBLE:
        return None
    if not HLOJIT.exists():
        return f"{HLOJIT} not built"
    lib = os.environ.get("HLOJIT_LIBCUDA", "")
    if "cuda_double" in lib:
        return f"HLOJIT_LIBCUDA={lib} is the CUDA test double (HLOJIT_GPU_TEST_ON_DOUBLE=1 to run on it)"
    with tempfile.TemporaryDirectory(prefix="hlojit_probe_") as d:
        src = pathlib.Path(d) / "probe.hlo"
        src.write_text("HloModule probe\nENTRY e {\n  x = f32[4] parameter(0)\n  ROOT y = f32[4] add(x, x)\n}\n")
        r = subprocess.run([str(HLOJIT), "run", "--backend", "cuda", "--random-inputs", "1", str(src)],
                           capture_output=True, text=True, env=dict(os.environ, HLOJIT_CACHE_DIR="off"))
    return None if r.returncode == 0 else (r.stderr.strip().splitlines() or ["no CUDA device"])[-1]


NO_GPU = cuda_device()
gpu = pytest.mark.skipif(NO_GPU is not None, reason=f"skipped: no GPU: {NO_GPU}")


def verify_cuda(model, tmp, name, monkeypatch, tokens=gen_tests.STEPS, ids=PROMPT, ref_model=None, extra=()):
    args = ["--backend", "cuda"] + list(extra)
    if not ON_DOUBLE:
        return gen_tests.verify(model, args, tmp, tokens=tokens, ids=ids, ref_model=ref_model,
                                name=f"{name}, cuda")
    # On the double no kernel runs: the program must run to the end and the comparison of
    # what it wrote must then fail (not the run itself).
    for k, v in double_env((9, 0)).items():
        monkeypatch.setenv(k, v)
    ref, got = tmp / "ref", tmp / "got"
    gen_tests.reference(ref_model or model, ids, tokens, ref)
    r = gen_tests.run(GPT2, ["--model", model, "--ids", ids, "--tokens", tokens, "--greedy",
                             "--verify", got, "--print-ids"] + args)
    assert r.returncode == 0, r.stderr
    wr, wl, same, n = gen_tests.compare(ref, got)
    assert not (wr <= 1e-4 and wl <= 1e-3 and same), "wrong results on the double went unnoticed"
    gen_tests.report(f"verify {name}, cuda on the double: {n} steps, emb/res max rel {wr:.2e}, logits "
                     f"max abs {wl:.2e}, ids {'identical' if same else 'DIFFERENT'}: caught, as it must be")


@gpu
def test_cuda_verify_bundled(tmp_path, monkeypatch):
    if not (BUNDLED / "model.bin").exists():
        pytest.skip(f"skipped: no bundled model in {BUNDLED}")
    verify_cuda(BUNDLED / "model.bin", tmp_path, "bundled", monkeypatch, tokens=30, ids="30,31,32,33,34")


@gpu
@pytest.mark.parametrize("fmt,split", [("llmc", ""), ("hf", ""), ("llmc", "1")],
                         ids=["llmc", "hf", "llmc-per-block"])
def test_cuda_verify_small(small, tmp_path, monkeypatch, fmt, split):
    # the default split on CUDA is the whole model; "1": a block graph run per layer
    extra = ["--layers-per-graph", split] if split else []
    verify_cuda(small[fmt], tmp_path, f"small {fmt}{', per block' if split else ''}", monkeypatch,
                ref_model=small["llmc"], extra=extra)


@gpu
@pytest.mark.skipif(os.environ.get("HLOJIT_GPT2_124M") == "0",
                    reason="skipped: HLOJIT_GPT2_124M=0 (the 124M-shaped check writes a 500 MB checkpoint)")
def test_cuda_verify_124m(tmp_path, monkeypatch):
    m = os.environ.get("HLOJIT_GPT2_124M_MODEL")   # tools/gpu_check.sh makes one for the benchmark too
    if not m:
        cfg = dict(L=12, NH=12, C=768, V=50257, Vp=50304, maxT=1024)
        m = write_model(tmp_path, "124m", cfg, 1234)["llmc"]
    verify_cuda(pathlib.Path(m), tmp_path, "124M shape", monkeypatch, ids="464,3290,318,257,3797,13")


@pytest.mark.skipif(NO_GPU is None or ON_DOUBLE, reason="skipped: this machine has a GPU")
def test_cuda_without_a_device():
    # --backend cuda where there is none: exit status 1, the library's reason on stderr,
    # and the prompt's echoed text ends its line before the message
    if not (BUNDLED / "model.bin").exists():
        pytest.skip(f"skipped: no bundled model in {BUNDLED}")
    env = {k: v for k, v in os.environ.items() if k not in ("HLOJIT_LIBCUDA", "HLOJIT_LIBCUBLAS")}
    env["HLOJIT_LIBCUDA"] = "/nonexistent/libcuda.so.1"
    r = gpt2(["--model", BUNDLED / "model.bin", "--prompt", "ROMEO:", "--tokens", 3, "--backend", "cuda"],
             dict(env, HLOJIT_CACHE_DIR="off"))
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "CUDA backend" in r.stderr and "gpt2: " in r.stderr, r.stderr
    assert r.stdout == "ROMEO:\n", repr(r.stdout)
