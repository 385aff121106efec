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
#   test-cuda-emu                  the op tests (tests/py/test_ops_numpy*.py), XLA's golden
#                                  modules and the JAX fixtures through the GPU emitters,
#                                  kernels run by the GPU emulator (cuda_emu_run): the kernels'
#                                  logic against NumPy/XLA/JAX without a GPU; in make test
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
                   test_cuda_gpu_matmul test_cuda_backend test_cuda_code_cache test_cuda_gpu_modules
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

.PHONY: test-cuda test-gpu test-gpu-c test-gpu-python test-gpu-dry test-ptx bench-gpu test-cuda-emu

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
	@fail=0; $(MAKE) --no-print-directory test-gpu-c || fail=1; \
	$(MAKE) --no-print-directory test-gpu-python || fail=1; exit $$fail

test-gpu-c:
	@fail=0; for t in $(CUDA_GPU_TESTS); do HLOJIT_TEST_DATA=tests $(GPU_TEST_BIN)/$$t || fail=1; done; exit $$fail

# HLOJIT_CUDA_GEMM=rule: each case is its own process, and a per-process measurement could
# pick another matmul path for the original and the printed module of the round-trip test
# (bitwise equality); test_cuda_gpu_modules covers the measured choice.
test-gpu-python:
	HLOJIT_BACKEND=cuda HLOJIT_CUDA_GEMM=rule HLOJIT_BIN=$(GPU_HLOJIT) $(PY) -m pytest -q -rfE -p no:cacheprovider $(GPU_PYTEST_N) \
	  $(GPU_PYTEST_ARGS) tests/py/test_ops_numpy.py tests/py/test_ops_numpy_shape.py tests/py/test_jax_fixtures.py \
	  tests/py/test_golden.py tests/py/test_roundtrip.py

test-gpu-dry: $(CUDA_GPU_TESTS:%=$(B)/tests/%) $(CUDA_DOUBLE)
	@fail=0; for t in $(CUDA_GPU_TESTS); do \
	  HLOJIT_TEST_DATA=tests HLOJIT_GPU_TEST_ON_DOUBLE=1 HLOJIT_LIBCUDA=$(abspath $(CUDA_DOUBLE)) \
	  HLOJIT_LIBCUBLAS=$(abspath $(CUDA_DOUBLE)) HLOJIT_CUDA_GEMM=tiled $(B)/tests/$$t || fail=1; done; exit $$fail

# The GPU emulator's command line (tests/unit/cuda_emu.h): the op tests through the GPU
# emitters on the host, against NumPy (test-cuda-emu: in `make test`).
$(B)/tests/cuda_emu_run: tests/unit/cuda_emu_run.c tests/unit/cuda_emu.h $(wildcard tests/unit/*.h) $(HDRS) $(B)/libhlojit.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/unit $< -o $@ $(B)/libhlojit.a $(LDLIBS)

test-cuda-emu: $(B)/tests/cuda_emu_run $(B)/tests/fuzz_hlo_emu $(B)/tests/api_hlo
	HLOJIT_BIN=$(abspath $(B)/tests/cuda_emu_run) HLOJIT_BACKEND=gpu-emulator $(PY) -m pytest -q -rfE -p no:cacheprovider \
	  tests/py/test_ops_numpy.py tests/py/test_ops_numpy_shape.py tests/py/test_golden.py tests/py/test_jax_fixtures.py \
	  tests/py/test_conv_jax.py tests/py/test_conv_api.py tests/py/test_coverage_jax.py \
	  tests/models/test_models.py
	$(B)/tests/fuzz_hlo_emu --count $(FUZZ_EMU_SHORT_N) --seed 1 --jobs $(FUZZ_JOBS)

$(B)/bench/bench_gpu: bench/bench_gpu.c bench/bench_util.h $(HDRS) $(B)/libhlojit.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< -o $@ $(B)/libhlojit.a $(LDLIBS)

bench-gpu: $(B)/bench/bench_gpu
	$(B)/bench/bench_gpu

# ---- gpu-bundle: what tools/gpu_check.sh runs on a GPU machine that cannot build hlojit ---
# (no LLVM 19 there): build/gpu-bundle.tar.xz holds lib/libhlojit.so with LLVM linked in
# statically (it needs only libc, libstdc++, libz and libzstd — a copy of libzstd and of
# libcmocka travel with it), bin/ with hlojit, the GPU tests, bench_gpu, gpt2,
# bench_gpt2_gpu and the CUDA test double (all with rpath $ORIGIN/../lib), and corpus/ (the
# shared HLO corpus, which does not travel with the working tree).
GPU_BUNDLE_DIR := $(B)/gpu-bundle
GPU_BUNDLE_LLVM = $(shell $(LLVM_CONFIG) --link-static --libs core nvptx x86 orcjit passes bitreader linker \
                    analysis target transformutils 2>/dev/null)
GPU_BUNDLE_ZSTD = $(firstword $(wildcard /usr/lib/x86_64-linux-gnu/libzstd.so.1 /usr/lib64/libzstd.so.1))
GPU_BUNDLE_CMOCKA = $(firstword $(wildcard /usr/lib/x86_64-linux-gnu/libcmocka.so.0 /usr/lib64/libcmocka.so.0))
GPU_BUNDLE_BINS := tools/hlojit.c tests/unit/test_cuda_gpu_matmul.c tests/unit/test_cuda_gpu_modules.c \
                   bench/bench_gpu.c
# and two programs of several files, from examples/gpt2/gpt2.mk's lists (read when the
# recipe runs): gpt2 and bench_gpt2_gpu, which need libpcre2-8 and libcjson (copies travel)
GPU_BUNDLE_PCRE = $(firstword $(wildcard /usr/lib/x86_64-linux-gnu/libpcre2-8.so.0 /usr/lib64/libpcre2-8.so.0))
GPU_BUNDLE_CJSON = $(firstword $(wildcard /usr/lib/x86_64-linux-gnu/libcjson.so.1 /usr/lib64/libcjson.so.1))
GPU_CORPUS ?= $(firstword $(HLOJIT_CORPUS) $(wildcard ../shared/hlo-corpus))

.PHONY: gpu-bundle
gpu-bundle: $(B)/gpu-bundle.tar.xz

$(B)/gpu-bundle.tar.xz: $(LIB_OBJ) $(GPU_BUNDLE_BINS) $(CUDA_DOUBLE) $(HDRS) $(wildcard tests/unit/*.h) \
                        tools/gpu_bundle_compat.c $(wildcard examples/gpt2/*.[ch]) bench/bench_gpt2_gpu.c
	rm -rf $(GPU_BUNDLE_DIR)
	mkdir -p $(GPU_BUNDLE_DIR)/lib $(GPU_BUNDLE_DIR)/bin $(GPU_BUNDLE_DIR)/corpus
	$(CC) -shared -o $(GPU_BUNDLE_DIR)/lib/libhlojit.so $(LIB_OBJ) tools/gpu_bundle_compat.c -fPIC \
	  -L$(shell $(LLVM_CONFIG) --libdir) -Wl,--wrap=hypot,--wrap=hypotf,--wrap=arc4random \
	  -Wl,--as-needed $(GPU_BUNDLE_LLVM) -lstdc++ -lrt -ldl -lm -lz $(GPU_BUNDLE_ZSTD) -lpthread
	strip --strip-debug $(GPU_BUNDLE_DIR)/lib/libhlojit.so
	cp $(GPU_BUNDLE_ZSTD) $(GPU_BUNDLE_CMOCKA) $(GPU_BUNDLE_DIR)/lib/
	for s in $(GPU_BUNDLE_BINS); do \
	  n=$$(basename $$s .c); \
	  $(CC) $(CSTD) -O2 $(WARN) -fPIC -I. -Ithird_party $(CPU_CFLAGS) $(CUDA_CFLAGS) $$s -o $(GPU_BUNDLE_DIR)/bin/$$n \
	    -L$(GPU_BUNDLE_DIR)/lib -lhlojit -l:$$(basename $(GPU_BUNDLE_CMOCKA)) -lm -lpthread -ldl \
	    -Wl,-rpath,'$$ORIGIN/../lib' || exit 1; \
	done
	cp $(GPU_BUNDLE_PCRE) $(GPU_BUNDLE_CJSON) $(GPU_BUNDLE_DIR)/lib/
	for n in gpt2 bench_gpt2_gpu; do \
	  if [ $$n = gpt2 ]; then src="$(GPT2_PROG_SRC)"; \
	  else src="bench/bench_gpt2_gpu.c $(filter-out %/main.c %/sample.c,$(GPT2_PROG_SRC))"; fi; \
	  $(CC) $(CSTD) -O2 $(WARN) -fPIC -I. -Ithird_party $(CPU_CFLAGS) $(CUDA_CFLAGS) $$src $(GPT2_SRC) \
	    -o $(GPU_BUNDLE_DIR)/bin/$$n -L$(GPU_BUNDLE_DIR)/lib -lhlojit \
	    -l:$$(basename $(GPU_BUNDLE_PCRE)) -l:$$(basename $(GPU_BUNDLE_CJSON)) -lm -lpthread -ldl \
	    -Wl,-rpath,'$$ORIGIN/../lib' || exit 1; \
	done
	cp $(CUDA_DOUBLE) $(GPU_BUNDLE_DIR)/bin/
	if [ -n "$(GPU_CORPUS)" ]; then cp -r $(GPU_CORPUS)/. $(GPU_BUNDLE_DIR)/corpus/; fi
	tar -C $(B) -cJf $@ gpu-bundle
	@ls -la $@
