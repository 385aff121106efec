"""The disk cache of compiled code across processes, through the command-line tool and the
tracing JIT: a second process with the same cache directory compiles nothing (the tool's
--stats says "hit (disk)", the JIT's statistics count every compile as a disk hit) and
writes the same bits; --cache-dir off compiles every time. (Damaged entries, racing
processes and the size limit are tests/unit/test_code_cache.c and test_disk_cache.c.)"""

import re
import subprocess

import numpy as np

from conftest import BUILD, HLOJIT, REPO

SWEEP = BUILD / "tests" / "jit_sweep"
FIXTURES = REPO / "tests" / "fixtures" / "hlo"


def run(args, env=None, timeout=600):
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout, env=env)
    assert r.returncode == 0, r.stderr
    return r


def test_tool_second_run_hits(tmp_path):
    modules = sorted(FIXTURES.glob("*.hlo"))[:6]
    cache = tmp_path / "cache"
    for m in modules:
        outs = []
        for k, want in enumerate(["miss (compiled)", "hit (disk)", "hit (disk)"]):
            out = tmp_path / f"{m.stem}.{k}"
            r = run([HLOJIT, "run", m, "--backend", "cpu", "--random-inputs", "7", "--stats", "--cache-dir", cache,
                     "--out", out])
            assert f"stats: code cache: {want}" in r.stderr, (m.name, k, r.stderr)
            outs.append(sorted(out.glob("*.npy")))
        for a, b in zip(outs[0], outs[1]):
            assert np.load(a).tobytes() == np.load(b).tobytes(), m.name
        r = run([HLOJIT, "run", m, "--backend", "cpu", "--random-inputs", "7", "--stats", "--cache-dir", "off"])
        assert "stats: code cache: miss (compiled)" in r.stderr
    assert len(list(cache.glob("*.hjc"))) >= len(modules) - 1   # fixtures may share code


def sweep(name, n, out, cache):
    import os
    env = dict(os.environ, HLOJIT_CACHE_DIR=str(cache))
    r = run([SWEEP, name, n, out], env=env)
    m = re.search(r"compiles=(\d+) .*disk_hits=(\d+)", r.stdout)
    assert m, r.stdout
    return int(m.group(1)), int(m.group(2))


def test_jit_second_process_all_disk_hits(tmp_path):
    cache = tmp_path / "cache"
    for name, n in [("softmax", 100), ("attention", 40), ("block", 30)]:
        a, b = tmp_path / f"{name}.1.bin", tmp_path / f"{name}.2.bin"
        c1, d1 = sweep(name, n, a, cache)
        c2, d2 = sweep(name, n, b, cache)
        assert d1 == 0 and c1 > 1, (name, c1, d1)
        assert c2 == c1 and d2 == c2, f"{name}: second process: {c2} compiles, {d2} from disk"
        assert a.read_bytes() == b.read_bytes(), f"{name}: the second process computed other bits"


DOUBLE = BUILD / "tests" / "libcuda_double.so"


def test_tool_cuda_ptx_second_run_hits(tmp_path):
    """The CUDA backend's PTX cache across processes, on the CUDA test double (its kernels never
    run, so only the compile is checked): the second process loads the PTX from disk, byte for
    byte what the first compiled; --cache-dir off compiles."""
    import os
    import pytest
    if not DOUBLE.exists():
        pytest.skip(f"the CUDA test double is not built ({DOUBLE}; make unit builds it)")
    env = dict(os.environ, HLOJIT_LIBCUDA=str(DOUBLE), HLOJIT_LIBCUBLAS=str(DOUBLE))
    cache = tmp_path / "cache"
    for m in sorted(FIXTURES.glob("*.hlo"))[:4]:
        ptx = []
        for k, (cdir, want) in enumerate([(cache, "miss (compiled)"), (cache, "hit (disk)"), ("off", "miss (compiled)")]):
            dump = tmp_path / f"{m.stem}.dump{k}"
            r = run([HLOJIT, "run", m, "--backend", "cuda", "--random-inputs", "7", "--stats", "--cache-dir", cdir],
                    env=dict(env, HLOJIT_DUMP_TO=str(dump)))
            assert "stats: backend=cuda" in r.stderr, (m.name, r.stderr)
            assert f"stats: code cache: {want}" in r.stderr, (m.name, k, r.stderr)
            ptx.append([p.read_bytes() for p in sorted(dump.glob("*.ptx"))])
        assert ptx[0] and ptx[0] == ptx[1] == ptx[2], m.name
