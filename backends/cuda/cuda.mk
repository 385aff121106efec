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
#   test-gpu                       the tests that need a GPU (CUDA_GPU_TESTS)
#   test-gpu-dry                   the GPU tests against the test double: checks the tests
#                                  themselves without a GPU (every result must be caught)
CUDA_HOME ?= /usr/local/cuda
B  ?= build
BA ?= $(B)/asan

CUDA_SRC    += $(sort $(wildcard backends/cuda/*.c))
CUDA_CFLAGS += -DHLOJIT_CUDA_BACKEND

CUDA_DOUBLE     := $(B)/tests/libcuda_double.so
CUDA_DOUBLE_SRC := $(wildcard tests/cuda_double/*.c)
CUDA_UNIT_TESTS := test_cuda_api test_cuda_driver test_cuda_codegen test_cuda_matmul \
                   test_cuda_gpu_matmul
CUDA_GPU_TESTS  := test_cuda_gpu_matmul

$(CUDA_DOUBLE): $(CUDA_DOUBLE_SRC) tests/cuda_double/cuda_double.h backends/cuda/cuda_api.h
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(OPT) $(WARN) -I. -fPIC -shared -fvisibility=hidden $(CUDA_DOUBLE_SRC) -o $@

# Tests that load the double get it built first (both flavours use the plain one).
$(CUDA_UNIT_TESTS:%=$(B)/tests/%) $(CUDA_UNIT_TESTS:%=$(BA)/tests/%): | $(CUDA_DOUBLE)

# The declarations header against the toolkit's own, where there is a toolkit.
ifneq ($(wildcard $(CUDA_HOME)/include/cuda.h),)
$(B)/tests/test_cuda_api $(BA)/tests/test_cuda_api: CFLAGS += -DHLOJIT_TEST_CUDA_H -isystem $(CUDA_HOME)/include
endif

.PHONY: test-cuda test-gpu test-gpu-dry

test-cuda: $(CUDA_UNIT_TESTS:%=$(B)/tests/%) $(CUDA_DOUBLE)
	@fail=0; for t in $(CUDA_UNIT_TESTS); do \
	  HLOJIT_CUDA_DOUBLE=$(CUDA_DOUBLE) $(B)/tests/$$t || fail=1; done; exit $$fail

test-gpu: $(CUDA_GPU_TESTS:%=$(B)/tests/%)
	@fail=0; for t in $(CUDA_GPU_TESTS); do $(B)/tests/$$t || fail=1; done; exit $$fail

test-gpu-dry: $(CUDA_GPU_TESTS:%=$(B)/tests/%) $(CUDA_DOUBLE)
	@fail=0; for t in $(CUDA_GPU_TESTS); do \
	  HLOJIT_GPU_TEST_ON_DOUBLE=1 HLOJIT_LIBCUDA=$(abspath $(CUDA_DOUBLE)) \
	  HLOJIT_LIBCUBLAS=$(abspath $(CUDA_DOUBLE)) $(B)/tests/$$t || fail=1; done; exit $$fail
