#!/usr/bin/env bash
# tools/gpu_check.sh — the CUDA backend's GPU check in one command, one report, meant for
# under 10 minutes on one GPU (the step limits below; not yet timed on one): builds (or unpacks a prebuilt bundle), runs `make test-gpu` (the GPU
# tests: every op test, JAX fixture and corpus module on CUDA against their references, and
# the C GPU tests) and the GPU benchmark (bench_gpu: tiled matmul vs cuBLAS, a fusion vs a
# device copy, a GPT-2 block with graphs vs plain launches), then GPT-2 on the GPU
# (tests/gpt2/test_gpt2_gpu.py: the bundled model, a small random config and a 124M-shaped
# random checkpoint, made here, against the NumPy reference; bench_gpt2_gpu: prefill and
# decode tokens/s with graphs and without), and writes a summary report.
#
#   tools/gpu_check.sh [--dry-run] [--part all|core|gpt2] [--report FILE] [--bundle FILE.tar.xz] [--jobs N]
#
# --part core: the tests and bench_gpu only; gpt2: the GPT-2 steps only (for a device whose
#   commands are limited to less time than the whole takes).
# Binaries, first that applies:
#   --bundle FILE, or build/gpu-bundle.tar.xz when this machine has no LLVM 19: unpacked to
#     /tmp/hlojit-gpu-bundle (`make gpu-bundle` makes it, on the build machine: libhlojit.so
#     with LLVM linked in statically, the programs, the shared HLO corpus; ~15 MB, carried
#     to the GPU machine as an ignored path);
#   else a build here: make -j all + the GPU test programs + bench_gpu (needs llvm-19-dev).
# --dry-run: the same script end to end without a GPU, on the CUDA test double
#   (tests/cuda_double, which runs no kernels): the GPU tests in their dry-run mode (every
#   result must be caught as wrong), a few Python op tests on the double (they must fail),
#   the benchmark once at small sizes (figures meaningless); the report says DRY RUN.
# Environment it sets when unset: HLOJIT_LIBCUBLAS (libcublas.so.13/.12 from the toolkit or
#   the nvidia-cublas wheel if the loader cannot find one), HLOJIT_CORPUS (the bundle's copy
#   when ../shared/hlo-corpus is not there), PY (python3 with numpy, ml_dtypes and pytest).
# Exit status 0 when every step passed. Each step has a time limit (build 150 s, C GPU tests
# 150 s, Python suites 200 s, benchmark 150 s; GPT-2: the 124M checkpoint 60 s, its tests
# 150 s, its benchmark 120 s) and the report says which step failed or ran out of time.
set -u
DRY=0
PART=all
REPORT=""
BUNDLE=""
JOBS=$(nproc 2>/dev/null || echo 4)
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY=1 ;;
    --part) PART="$2"; shift ;;
    --part=*) PART="${1#--part=}" ;;
    --report) REPORT="$2"; shift ;;
    --report=*) REPORT="${1#--report=}" ;;
    --bundle) BUNDLE="$2"; shift ;;
    --bundle=*) BUNDLE="${1#--bundle=}" ;;
    --jobs) JOBS="$2"; shift ;;
    -h|--help) sed -n '2,33p' "$0"; exit 0 ;;
    *) echo "gpu_check.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
case "$PART" in all|core|gpt2) ;; *) echo "gpu_check.sh: --part: '$PART' is not all, core or gpt2" >&2; exit 2 ;; esac
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO" || exit 2
OUTDIR=${OUT:-$REPO/build}
mkdir -p "$OUTDIR"
REPORT=${REPORT:-$OUTDIR/gpu_report.txt}
mkdir -p "$(dirname "$REPORT")"
LOG=${REPORT%.txt}.log
: > "$REPORT"
: > "$LOG"
T0=$(date +%s)
FAILED=""

say() { echo "$*" | tee -a "$REPORT"; }
# step NAME LIMIT_S CMD...: runs CMD with its output in the log (and on stdout), records
# pass/fail/timeout and the time in the report.
step() {
  local name=$1 limit=$2; shift 2
  local t=$(date +%s)
  echo "=== $name: $*" >> "$LOG"
  timeout --kill-after=10 "$limit" "$@" > >(tee -a "$LOG") 2>&1
  local rc=$?
  local dt=$(( $(date +%s) - t ))
  if [ $rc -eq 0 ]; then say "  $name: PASSED (${dt} s)"
  elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then say "  $name: TIMED OUT after ${limit} s"; FAILED="$FAILED $name"
  else say "  $name: FAILED (exit $rc, ${dt} s; see $(basename "$LOG"))"; FAILED="$FAILED $name"; fi
  return $rc
}

say "hlojit GPU check$([ $DRY = 1 ] && echo ' -- DRY RUN on the CUDA test double (no GPU; figures meaningless)')"
say "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); host: $(uname -srm); $(nproc 2>/dev/null) CPUs; git: $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo ' (with local changes)')"
if command -v nvidia-smi > /dev/null 2>&1; then
  say "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
else
  say "GPU: no nvidia-smi here"
fi

# ---- Python ------------------------------------------------------------------------------------
if [ -z "${PY:-}" ]; then
  for p in "$REPO/.venv/bin/python" python3; do
    if "$p" -c 'import numpy, ml_dtypes, pytest' > /dev/null 2>&1; then PY=$p; break; fi
  done
fi
if [ -z "${PY:-}" ]; then say "python: none with numpy, ml_dtypes and pytest: the Python suites will fail"; PY=python3; fi
export PY
say "python: $PY ($("$PY" --version 2>&1)); pytest-xdist: $("$PY" -c 'import xdist; print(xdist.__version__)' 2>/dev/null || echo none)"

# ---- binaries ------------------------------------------------------------------------------------
BIN=""
if [ $DRY = 0 ] && [ -z "$BUNDLE" ] && ! command -v llvm-config-19 > /dev/null 2>&1 && [ -f build/gpu-bundle.tar.xz ]; then
  BUNDLE=build/gpu-bundle.tar.xz
fi
say "steps:"
if [ -n "$BUNDLE" ]; then
  rm -rf /tmp/hlojit-gpu-bundle && mkdir -p /tmp/hlojit-gpu-bundle
  if step unpack-bundle 60 tar -C /tmp/hlojit-gpu-bundle -xJf "$BUNDLE"; then
    BIN=/tmp/hlojit-gpu-bundle/gpu-bundle/bin
    if ! "$BIN/hlojit" --version >> "$LOG" 2>&1; then
      say "  the bundle's hlojit does not run here: $("$BIN/hlojit" --version 2>&1 | head -2 | tr '\n' ' ')"
      FAILED="$FAILED bundle"
      BIN=""
    fi
    if [ -z "${HLOJIT_CORPUS:-}" ] && [ ! -d "$REPO/../shared/hlo-corpus" ] && [ -d /tmp/hlojit-gpu-bundle/gpu-bundle/corpus ]; then
      export HLOJIT_CORPUS=/tmp/hlojit-gpu-bundle/gpu-bundle/corpus
    fi
  fi
else
  if step build 150 make -j"$JOBS" all build/tests/test_cuda_gpu_matmul build/tests/test_cuda_gpu_modules \
      build/bench/bench_gpu build/tests/libcuda_double.so build/gpt2 build/bench/bench_gpt2_gpu; then
    BIN=$REPO/build/tests
    mkdir -p build/gpu-bin
    ln -sf "$REPO/build/hlojit" build/gpu-bin/hlojit
    ln -sf "$REPO/build/gpt2" build/gpu-bin/gpt2
    for f in test_cuda_gpu_matmul test_cuda_gpu_modules libcuda_double.so; do ln -sf "$REPO/build/tests/$f" build/gpu-bin/$f; done
    for f in bench_gpu bench_gpt2_gpu; do ln -sf "$REPO/build/bench/$f" build/gpu-bin/$f; done
    BIN=$REPO/build/gpu-bin
  fi
fi

# ---- cuBLAS ---------------------------------------------------------------------------------------
if [ $DRY = 1 ]; then
  export HLOJIT_LIBCUDA=$BIN/libcuda_double.so HLOJIT_LIBCUBLAS=$BIN/libcuda_double.so
  say "driver: the CUDA test double ($HLOJIT_LIBCUDA)"
elif [ -z "${HLOJIT_LIBCUBLAS:-}" ] && ! ldconfig -p 2>/dev/null | grep -qE 'libcublas\.so\.1[23]'; then
  for c in /usr/local/cuda/lib64/libcublas.so.13 /usr/local/cuda/lib64/libcublas.so.12 \
           $("$PY" -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null)/libcublas.so.1[23] \
           /opt/torch/.venv/lib/python3*/site-packages/nvidia/cublas/lib/libcublas.so.1[23] \
           /opt/torch/.venv/lib/python3*/site-packages/nvidia/cu13/lib/libcublas.so.1[23]; do
    if [ -f "$c" ]; then export HLOJIT_LIBCUBLAS=$c; break; fi
  done
fi
[ $DRY = 0 ] && say "cuBLAS: ${HLOJIT_LIBCUBLAS:-libcublas.so.13 or .12 from the loader path}"
say "corpus: ${HLOJIT_CORPUS:-$REPO/../shared/hlo-corpus}"

# ---- tests and benchmark ---------------------------------------------------------------------------
if [ -n "$BIN" ]; then
  # a dry run drives the very same targets and programs, told that they run on the double
  [ $DRY = 1 ] && export HLOJIT_GPU_TEST_ON_DOUBLE=1 HLOJIT_CUDA_GEMM=tiled HLOJIT_BENCH_DRY=1
fi
if [ -n "$BIN" ] && [ $PART != gpt2 ]; then
  step test-gpu-c 150 make --no-print-directory test-gpu-c PY="$PY" GPU_TEST_BIN="$BIN"
  if [ $DRY = 1 ]; then
    # the Python suites on the double must fail (no kernel runs): they can catch a wrong result
    make --no-print-directory test-gpu-python PY="$PY" GPU_HLOJIT="$BIN/hlojit" GPU_JOBS="$JOBS" \
      GPU_PYTEST_ARGS='-x -k "binary_numpy and add and f32"' >> "$LOG" 2>&1
    if [ $? -ne 0 ] && grep -q "1 failed" "$LOG"; then say "  test-gpu-python: PASSED (an op test failed on the double, as it must)"
    else say "  test-gpu-python: FAILED (no failure on the double: a wrong result went unnoticed)"; FAILED="$FAILED test-gpu-python"; fi
  else
    step test-gpu-python 200 make --no-print-directory test-gpu-python PY="$PY" GPU_HLOJIT="$BIN/hlojit" GPU_JOBS="$JOBS"
  fi
  step bench-gpu 150 env HLOJIT_TEST_DATA=tests "$BIN/bench_gpu"
fi

# ---- GPT-2 on the GPU ------------------------------------------------------------------------------
# The tests: on the double (dry run) the verification must catch the wrong results; the
# 124M checkpoint (500 MB, random weights at GPT-2's init scales, never committed) serves
# the tests and the benchmark; a dry run uses the bundled model and leaves the 124M out.
if [ -n "$BIN" ] && [ $PART != core ]; then
  GPT2_ENV=(HLOJIT_GPT2_BIN="$BIN/gpt2" HLOJIT_BIN="$BIN/hlojit" HLOJIT_CUDA_DOUBLE="$BIN/libcuda_double.so")
  M124=$OUTDIR/gpt2-124m/model.bin
  if [ $DRY = 1 ]; then
    BENCH_MODEL=examples/gpt2/data/shakespeare/model.bin
    GPT2_ENV+=(HLOJIT_GPT2_124M=0)
  elif [ -f "$M124" ] || step gpt2-124m-checkpoint 60 "$PY" tests/gpt2/gen_checkpoints.py "$OUTDIR/gpt2-124m" \
         --L 12 --NH 12 --C 768 --V 50257 --Vp 50304 --maxT 1024 --init gpt2; then
    BENCH_MODEL=$M124
    GPT2_ENV+=(HLOJIT_GPT2_124M_MODEL="$M124")
  else
    BENCH_MODEL=examples/gpt2/data/shakespeare/model.bin
  fi
  step test-gpt2-gpu 150 env "${GPT2_ENV[@]}" HLOJIT_CACHE_DIR=off "$PY" -m pytest -q -rfEs -p no:cacheprovider \
    tests/gpt2/test_gpt2_gpu.py
  # HLOJIT_CUDA_GEMM_LOG: each matmul shape's measured ways (skinny/tiled vs cuBLAS) in the report
  step bench-gpt2-gpu 120 env HLOJIT_CACHE_DIR=off HLOJIT_CUDA_GEMM_LOG=1 "$BIN/bench_gpt2_gpu" --model "$BENCH_MODEL"
fi

# ---- summary -----------------------------------------------------------------------------------------
say "results:"
grep -hE "^hlojit cuda: gemm |^matmul |^elementwise |^GPT-2 block|^== bench_gpu|^block graphs  |^block, plain  |^whole model  |^GPT-2 \(L=|^decode: |^logits of the decode|^== bench_gpt2_gpu|^verify .*cuda|^cuda on the double" "$LOG" | \
  sed 's/^/  /' | tee -a "$REPORT" > /dev/null
grep -hE "on the GPU: [0-9]+ modules|passed|failed|skipped|SKIPPED|FAILED  \]" "$LOG" | grep -vE "^=== " | \
  grep -E "modules|[0-9]+ (passed|failed|skipped)|FAILED  \]" | sed 's/^/  /' | tail -30 | tee -a "$REPORT" > /dev/null
TOTAL=$(( $(date +%s) - T0 ))
if [ -z "$FAILED" ] && [ -n "$BIN" ]; then
  say "== gpu_check: PASSED in ${TOTAL} s$([ $TOTAL -gt 600 ] && echo ' (over the 10-minute budget)')$([ $DRY = 1 ] && echo ' (dry run)')"
  exit 0
fi
say "== gpu_check: FAILED:${FAILED:- no binaries} (${TOTAL} s); the full output is in $LOG"
exit 1
