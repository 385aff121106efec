#!/usr/bin/env python3
"""ptx_check.py — every kernel the CUDA backend makes, assembled by NVIDIA's ptxas, no GPU.

What it does: collects HLO modules — every op test's module (tests/py/test_ops_numpy*.py and
test_conv_jax.py, test_coverage_jax.py and tests/models (the suite of real programs) run
in their dry-run mode, HLOJIT_DRYRUN=1, which writes each case's module without running it),
every module of the shared corpus (../shared/hlo-corpus or $HLOJIT_CORPUS), every JAX
fixture (tests/fixtures/jax) and the hand-written fixtures (tests/fixtures/hlo*) — compiles
each for each arch with `hlojit ptx --arch A --out-dir DIR` (many modules per process, one
process per job), and assembles every PTX file with `ptxas -arch=A`. A module that does not
compile, or PTX that ptxas rejects, is a failure (printed with the message / ptxas log).

Output: per arch the modules, PTX files, kernels (.entry) assembled and failures; the total
and the wall time. Exit status 1 on any failure; 0 with "skipped" when there is no ptxas
($HLOJIT_PTXAS, $CUDA_HOME/bin/ptxas, /usr/local/cuda/bin/ptxas; never PATH, as
backends/cuda/cuda_ptxas.c).

Usage: tools/ptx_check.py [--jobs N] [--arch sm_80,sm_90a] [--no-ops] [--keep DIR] [MODULE.hlo ...]
(with MODULE arguments only those are checked)."""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def find_ptxas():
    env = os.environ.get("HLOJIT_PTXAS")
    if env:
        return env if os.path.exists(env) else None
    for home in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if home and os.path.exists(os.path.join(home, "bin", "ptxas")):
            return os.path.join(home, "bin", "ptxas")
    return None


def op_modules(tmp, py):
    """Every op test's module, written by the op tests' dry run into |tmp|."""
    out = os.path.join(tmp, "ops")
    env = dict(os.environ, HLOJIT_DRYRUN="1", HLOJIT_TEST_OUT=out)
    tests = [os.path.join(REPO, "tests", t)
             for t in ("py/test_ops_numpy.py", "py/test_ops_numpy_shape.py", "py/test_conv_jax.py",
                       "py/test_coverage_jax.py", "models/test_models.py")]
    p = subprocess.run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
                       cwd=REPO, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("ptx_check: the op tests' dry run failed:\n" + p.stdout[-4000:] + p.stderr[-2000:])
    return sorted(glob.glob(os.path.join(out, "**", "mod.hlo"), recursive=True))


def fixture_modules():
    corpus = os.environ.get("HLOJIT_CORPUS", os.path.join(REPO, "..", "shared", "hlo-corpus"))
    mods = []
    if os.path.isdir(corpus):
        mods += sorted(glob.glob(os.path.join(corpus, "*.hlo")))
    else:
        print("ptx_check: no corpus at %s (HLOJIT_CORPUS): its modules are skipped" % corpus)
    for d in ("jax", "hlo", "hlo_pass", "fuzz_regress"):
        mods += sorted(glob.glob(os.path.join(REPO, "tests", "fixtures", d, "*.hlo")))
    return mods


def compile_chunk(hlojit, arch, mods, outdir):
    """hlojit ptx over |mods| into outdir/K.ptx; returns {index: error message}."""
    os.makedirs(outdir, exist_ok=True)
    p = subprocess.run([hlojit, "ptx", "--arch", arch, "--out-dir", outdir, *mods],
                       capture_output=True, text=True)
    errors = {}
    for line in p.stderr.splitlines():
        for k, m in enumerate(mods):
            if line.startswith("hlojit: %s: " % m):
                errors[k] = line[len("hlojit: %s: " % m):]
    if p.returncode != 0 and not errors:
        errors[-1] = "hlojit ptx failed (rc %d): %s" % (p.returncode, p.stderr[-2000:])
    return errors


def assemble(ptxas, arch, path):
    p = subprocess.run([ptxas, "-arch=%s" % arch, "-o", "/dev/null", path], capture_output=True, text=True)
    return p.returncode, (p.stdout + p.stderr)[-3000:]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("HLOJIT_PTX_JOBS", "2")))
    ap.add_argument("--arch", default="sm_80,sm_90a")
    ap.add_argument("--no-ops", action="store_true", help="leave out the op tests' modules")
    ap.add_argument("--keep", help="keep the PTX files under this directory")
    ap.add_argument("--hlojit", default=os.environ.get("HLOJIT_BIN", os.path.join(REPO, "build", "hlojit")))
    ap.add_argument("--python", default=os.path.join(REPO, ".venv", "bin", "python"))
    ap.add_argument("modules", nargs="*")
    a = ap.parse_args()
    t0 = time.time()
    ptxas = find_ptxas()
    if not ptxas:
        print("ptx_check: skipped: no ptxas ($HLOJIT_PTXAS, $CUDA_HOME/bin/ptxas, /usr/local/cuda/bin/ptxas)")
        return 0
    if not os.path.exists(a.hlojit):
        sys.exit("ptx_check: %s does not exist (run `make`)" % a.hlojit)
    tmp = a.keep or tempfile.mkdtemp(prefix="hlojit-ptx-")
    try:
        if a.modules:
            mods = [os.path.abspath(m) for m in a.modules]
        else:
            mods = ([] if a.no_ops else op_modules(tmp, a.python if os.path.exists(a.python) else sys.executable))
            nops = len(mods)
            mods += fixture_modules()
            print("ptx_check: %d modules (%d op tests, %d corpus and fixtures)" % (len(mods), nops, len(mods) - nops))
        t1 = time.time()
        failures = []
        unparsed = set()   # modules hlojit does not parse (types it lacks): not ours to compile
        total = {"ptx": 0, "kernels": 0, "empty": 0}
        jobs = max(1, a.jobs)
        for arch in a.arch.split(","):
            chunks = [list(range(i, len(mods), jobs * 4)) for i in range(min(jobs * 4, len(mods)))]
            with ThreadPoolExecutor(jobs) as ex:
                futs = [ex.submit(compile_chunk, a.hlojit, arch, [mods[i] for i in ch],
                                  os.path.join(tmp, arch, "c%d" % c)) for c, ch in enumerate(chunks)]
                for c, (ch, f) in enumerate(zip(chunks, futs)):
                    for k, msg in f.result().items():
                        m = mods[ch[k]] if k >= 0 else "?"
                        if re.match(re.escape(m) + r":\d+:\d+: ", msg):   # the parser's file:line:col
                            unparsed.add(m)
                        else:
                            failures.append("%s %s: does not compile: %s" % (arch, m, msg))
            files = []
            for c, ch in enumerate(chunks):
                for k, i in enumerate(ch):
                    path = os.path.join(tmp, arch, "c%d" % c, "%d.ptx" % k)
                    if os.path.exists(path):
                        files.append((i, path))
            with_kernels = []
            nk = 0
            for i, path in files:
                n = len(re.findall(r"^\.(?:visible|weak)?\s*\.entry\s", open(path).read(), re.M))
                if n == 0:
                    total["empty"] += 1
                else:
                    with_kernels.append((i, path, n))
                    nk += n
            # identical PTX (the same op, type and shape with other data) is assembled once
            unique = {}
            for i, path, n in with_kernels:
                unique.setdefault(open(path, "rb").read(), (i, path, n))
            with ThreadPoolExecutor(jobs) as ex:
                done = dict(zip(unique, ex.map(lambda t: assemble(ptxas, arch, t[1]), unique.values())))
            res = [done[open(path, "rb").read()] for i, path, n in with_kernels]
            bad = 0
            for (i, path, n), (rc, log) in zip(with_kernels, res):
                if rc != 0:
                    bad += n
                    failures.append("%s %s: ptxas failed:\n%s" % (arch, mods[i], log))
            total["ptx"] += len(with_kernels)
            total["kernels"] += nk - bad
            print("ptx_check: %s: %d modules, %d PTX files with kernels (%d distinct, %d without), %d kernels "
                  "assembled, %d failures" % (arch, len(mods), len(with_kernels), len(unique),
                                              len(files) - len(with_kernels), nk - bad,
                                              sum(1 for f in failures if f.startswith(arch + " "))))
        for m in sorted(unparsed):
            print("ptx_check: skipped (hlojit does not parse it): %s" % m)
        for f in failures[:40]:
            print("FAIL " + f)
        if len(failures) > 40:
            print("... and %d more failures" % (len(failures) - 40))
        print("ptx_check: %d kernels assembled by %s, %d failures; %.1f s (%.1f s compiling and assembling, "
              "%d jobs)" % (total["kernels"], ptxas, len(failures), time.time() - t0, time.time() - t1, jobs))
        return 1 if failures else 0
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
