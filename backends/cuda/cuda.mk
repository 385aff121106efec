# backends/cuda/cuda.mk — the CUDA backend's part of the build, included by the main Makefile.
# Defines (and only appends to):
#   CUDA_SRC     the backend's .c files. They need no CUDA toolkit: backends/cuda/cuda_api.h
#                declares the driver and cuBLAS subset, libcuda.so.1 and libcublas are opened
#                with dlopen at run time (-ldl, already in LDLIBS). They need the LLVM-C headers
#                and libLLVM, which CPU_CFLAGS / CPU_LDLIBS (backends/cpu/cpu.mk) provide.
#   CUDA_CFLAGS  -DHLOJIT_CUDA_BACKEND: the CUDA unit tests run only where it is set, and
#                report one skipped test otherwise (as test_cpu_jit does without LLVM).
#   CUDA_LDLIBS  nothing beyond LDLIBS and CPU_LDLIBS today.
# The main Makefile wires it like the CPU backend, after B and BA are set (rules below name
# files under them; they fall back to build/ and build/asan):
#   -include backends/cuda/cuda.mk
#   CFLAGS  += $(CUDA_CFLAGS)
#   LDLIBS  += $(CUDA_LDLIBS)
#   LIB_SRC += $(CUDA_SRC)          (before LIB_OBJ is computed)
# and may add test-cuda to TEST_SUITES. The CUDA sources use LLVM, so none goes into all.c.
#
# Rules and targets defined here:
#   $(B)/tests/libcuda_double.so   the CUDA test double (tests/cuda_double), a stand-in for
#                                  libcuda.so.1 and libcublas that the unit tests dlopen
#   test_cuda_api                  checked against $(CUDA_HOME)/include's cuda.h when it exists
#   test-cuda                      every CUDA unit test; no GPU needed (GPU tests say skipped)
#   test-ptx                       tools/ptx_check.py: the PTX of every kernel of every op test,
#                                  corpus module and fixture, for sm_80 and sm_90a, through
#                                  ptxas (skipped, saying so, without ptxas); in `make test`
#   test-gpu                       the tests that need a GPU: CUDA_GPU_TESTS, then the Python
#                                  suites (op tests, JAX fixtures, corpus) with
#                                  HLOJIT_BACKEND=cuda (pytest -n GPU_JOBS when pytest-xdist is
#                                  there); everything says skipped without a GPU
#   test-gpu-dry                   the GPU tests against the test double: checks the tests
#                                  themselves without a GPU (every result must be caught)
#   bench-gpu                      bench/bench_gpu.c: tiled matmul vs cuBLAS, a fusion vs a
#                                  device copy, a GPT-2 block with graphs vs plain launches
CUDA_HOME ?= /usr/local/cuda
B  ?= build
BA ?= $(B)/asan

CUDA_SRC    += $(sort $(wildcard backends/cuda/*.c))
CUDA_CFLAGS += -DHLOJIT_CUDA_BACKEND

CUDA_DOUBLE     := $(B)/tests/libcuda_double.so
CUDA_DOUBLE_SRC := $(wildcard tests/cuda_double/*.c)
CUDA_UNIT_TESTS := test_cuda_api test_cuda_driver test_cuda_codegen test_cuda_matmul \
                   test_cuda_gpu_matmul test_cuda_backend test_cuda_gpu_modules
CUDA_GPU_TESTS  := test_cuda_gpu_matmul test_cuda_gpu_modules
GPU_JOBS        ?= 8

$(CUDA_DOUBLE): $(CUDA_DOUBLE_SRC) tests/cuda_double/cuda_double.h backends/cuda/cuda_api.h
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(OPT) $(WARN) -I. -fPIC -shared -fvisibility=hidden $(CUDA_DOUBLE_SRC) -o $@

# Tests that load the double get it built first (both flavours use the plain one).
$(CUDA_UNIT_TESTS:%=$(B)/tests/%) $(CUDA_UNIT_TESTS:%=$(BA)/tests/%): | $(CUDA_DOUBLE)

# The declarations header against the toolkit's own, where there is a toolkit.
ifneq ($(wildcard $(CUDA_HOME)/include/cuda.h),)
$(B)/tests/test_cuda_api $(BA)/tests/test_cuda_api: CFLAGS += -DHLOJIT_TEST_CUDA_H -isystem $(CUDA_HOME)/include
endif

.PHONY: test-cuda test-gpu test-gpu-dry test-ptx bench-gpu

test-cuda: $(CUDA_UNIT_TESTS:%=$(B)/tests/%) $(CUDA_DOUBLE)
	@fail=0; for t in $(CUDA_UNIT_TESTS); do \
	  HLOJIT_CUDA_DOUBLE=$(CUDA_DOUBLE) $(B)/tests/$$t || fail=1; done; exit $$fail

test-ptx:
	$(PY) tools/ptx_check.py

# GPU_TEST_BIN: where the test programs are ($(B)/tests; tools/gpu_check.sh points it at a
# prebuilt bundle). The Python suites run with HLOJIT_BIN=$(GPU_HLOJIT).
GPU_TEST_BIN ?= $(B)/tests
GPU_HLOJIT   ?= $(abspath $(B)/hlojit)
GPU_PYTEST_N  = $$($(PY) -c 'import xdist' 2>/dev/null && echo "-n $(GPU_JOBS)")

test-gpu:
	@fail=0; for t in $(CUDA_GPU_TESTS); do HLOJIT_TEST_DATA=tests $(GPU_TEST_BIN)/$$t || fail=1; done; \
	HLOJIT_BACKEND=cuda HLOJIT_BIN=$(GPU_HLOJIT) $(PY) -m pytest -q -rfE $(GPU_PYTEST_N) \
	  tests/py/test_ops_numpy.py tests/py/test_ops_numpy_shape.py tests/py/test_jax_fixtures.py \
	  tests/py/test_golden.py tests/py/test_roundtrip.py || fail=1; exit $$fail

test-gpu-dry: $(CUDA_GPU_TESTS:%=$(B)/tests/%) $(CUDA_DOUBLE)
	@fail=0; for t in $(CUDA_GPU_TESTS); do \
	  HLOJIT_TEST_DATA=tests HLOJIT_GPU_TEST_ON_DOUBLE=1 HLOJIT_LIBCUDA=$(abspath $(CUDA_DOUBLE)) \
	  HLOJIT_LIBCUBLAS=$(abspath $(CUDA_DOUBLE)) HLOJIT_CUDA_GEMM=tiled $(B)/tests/$$t || fail=1; done; exit $$fail

$(B)/bench/bench_gpu: bench/bench_gpu.c bench/bench_util.h $(HDRS) $(B)/libhlojit.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< -o $@ $(B)/libhlojit.a $(LDLIBS)

bench-gpu: $(B)/bench/bench_gpu
	$(B)/bench/bench_gpu
