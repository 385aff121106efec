# hlojit — build, test, demo.  `make` builds the library and the tool; `make test` is the
# README's test command (installs what is missing, builds with -Werror, runs everything);
# `make demo` is the main job.
CC      ?= cc
LLVM_CONFIG ?= llvm-config-19
WARN    := -Wall -Wextra -Werror -Wno-unused-parameter -Wno-missing-field-initializers
CSTD    := -std=gnu11
OPT     ?= -O2 -g
CFLAGS  += $(CSTD) $(OPT) $(WARN) -fPIC -I. -Ithird_party
LDLIBS  += -lm -lpthread -ldl
# The included .mk files define rules of their own: `make` alone still means `make all`.
.DEFAULT_GOAL := all

# The CPU backend (LLVM ORC through LLVM-C): CPU_SRC, CPU_CFLAGS, CPU_LDLIBS.
-include backends/cpu/cpu.mk
CFLAGS  += $(CPU_CFLAGS)
LDLIBS  += $(CPU_LDLIBS)

B       := build
BA      := $(B)/asan

# The CUDA backend (NVPTX through LLVM-C; the driver and cuBLAS by dlopen, no toolkit needed).
-include backends/cuda/cuda.mk
CFLAGS  += $(CUDA_CFLAGS)
LDLIBS  += $(CUDA_LDLIBS)
# The parts of hlojit_impl/ (one folder each, see hlojit_impl/README.md), then the backends.
# LLVM_FREE_SRC is what the evaluator-only single-header build (HLOJIT_NO_LLVM) contains.
PARTS   := ir text eval passes runtime api jit
LLVM_FREE_SRC := $(wildcard $(PARTS:%=hlojit_impl/%/*.c)) backends/backends.c \
           $(wildcard backends/interp/*.c)
LLVM_FREE_SRC := $(filter-out hlojit_impl/runtime/compile.c hlojit_impl/runtime/code_key.c,$(LLVM_FREE_SRC))
LIB_SRC := $(LLVM_FREE_SRC) hlojit_impl/runtime/compile.c hlojit_impl/runtime/code_key.c \
           $(wildcard hlojit_impl/emitters/*.c) \
           $(CPU_SRC) $(CUDA_SRC)
LIB_OBJ := $(LIB_SRC:%.c=$(B)/%.o)
HDRS    := hlojit.h $(wildcard hlojit_impl/*.h hlojit_impl/*/*.h backends/*/*.h)
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(B)/tests/%)
EX_BIN  := $(B)/examples/mlp $(B)/examples/mlp_unity $(B)/examples/mlp_unity_nollvm $(B)/examples/cnn
PY      := .venv/bin/python

# The ASan+UBSan flavour of the library and the unit tests lives in build/asan.
SAN     := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
.PHONY: all lib tools examples cnn unit unit-asan test-threads test test-py test-py-cpu test-models test-golden test-corpus test-fuzz fuzz-long fuzz-emu \
        deps demo clean

all: lib $(B)/hlojit examples

lib: $(B)/libhlojit.a $(B)/libhlojit.so

$(B)/%.o: %.c $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(B)/libhlojit.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(B)/libhlojit.so: $(LIB_OBJ)
	$(CC) -shared -o $@ $^ $(LDLIBS)

tools: $(B)/hlojit

$(B)/hlojit: tools/hlojit.c $(HDRS) $(B)/libhlojit.a
	$(CC) $(CFLAGS) $< -o $@ $(B)/libhlojit.a $(LDLIBS)

examples: $(EX_BIN)

$(B)/examples/mlp: examples/mlp.c $(B)/libhlojit.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< -o $@ $(B)/libhlojit.a $(LDLIBS)

# The CNN example (examples/cnn): `make cnn` makes the model with JAX (make_model.py, into
# build/cnn_model), runs it and checks every layer against JAX's (cnn_check.py);
# tests/py/test_cnn_example.py does the same in `make test`.
$(B)/examples/cnn: examples/cnn/cnn.c $(B)/libhlojit.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< -o $@ $(B)/libhlojit.a $(LDLIBS)

cnn: $(B)/examples/cnn
	$(PY) examples/cnn/cnn_check.py --bin $(B)/examples/cnn --dir $(B)/cnn

# The single-header build: the whole library in one translation unit (HLOJIT_IMPLEMENTATION),
# with the CPU backend (linked with LLVM) and without it (-DHLOJIT_NO_LLVM: the evaluator
# only, no LLVM at all). Compiled at -O3, where gcc's flow-sensitive warnings see the most;
# every library file must be listed in all.c.
UNITY_CHECK = @for f in $(LIB_SRC); do \
	  grep -q "\"$${f\#hlojit_impl/}\"" hlojit_impl/all.c || grep -q "\"../$$f\"" hlojit_impl/all.c || \
	  { echo "all.c does not include $$f"; exit 1; }; done
$(B)/examples/mlp_unity: examples/mlp.c $(HDRS) $(LIB_SRC) hlojit_impl/all.c
	@mkdir -p $(dir $@)
	$(UNITY_CHECK)
	$(CC) $(CFLAGS) -O3 -DHLOJIT_IMPLEMENTATION $< -o $@ $(LDLIBS)

$(B)/examples/mlp_unity_nollvm: examples/mlp.c $(HDRS) $(LIB_SRC) hlojit_impl/all.c
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) -O3 $(WARN) -I. -DHLOJIT_IMPLEMENTATION -DHLOJIT_NO_LLVM $< -o $@ -lm -lpthread

$(B)/tests/%: tests/unit/%.c $(wildcard tests/unit/*.h) $(HDRS) $(B)/libhlojit.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< -o $@ $(B)/libhlojit.a -lcmocka $(LDLIBS)

# ASan/UBSan: the same sources, compiled again (one object per source, so -j works and
# only what changed is rebuilt).
LIB_OBJ_ASAN := $(LIB_SRC:%.c=$(BA)/%.o)

$(BA)/%.o: %.c $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) -O1 -c $< -o $@

$(BA)/libhlojit.a: $(LIB_OBJ_ASAN)
	@rm -f $@
	ar rcs $@ $^

$(BA)/tests/%: tests/unit/%.c $(wildcard tests/unit/*.h) $(HDRS) $(BA)/libhlojit.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) -O1 $< -o $@ $(BA)/libhlojit.a -lcmocka $(LDLIBS)

$(BA)/hlojit: tools/hlojit.c $(HDRS) $(BA)/libhlojit.a
	$(CC) $(CFLAGS) $(SAN) -O1 $< -o $@ $(BA)/libhlojit.a $(LDLIBS)

UNIT_BIN_ASAN := $(UNIT_SRC:tests/unit/%.c=$(BA)/tests/%)

# Unit tests (cmocka). Each binary prints its own summary.
unit: $(UNIT_BIN)
	@fail=0; for t in $(UNIT_BIN); do HLOJIT_TEST_DATA=tests $$t || fail=1; done; exit $$fail

unit-asan: $(UNIT_BIN_ASAN) $(BA)/hlojit
	@fail=0; for t in $(UNIT_BIN_ASAN); do HLOJIT_TEST_DATA=tests HLOJIT_FUZZ_GRAPHS=100 ASAN_OPTIONS=detect_leaks=1 $$t || fail=1; done; exit $$fail

# ThreadSanitizer: test_threads.c (one context used by several threads at once) linked with
# the whole library compiled in one unit (tests/unit/unity_lib.c) under -fsanitize=thread;
# tests/unit/tsan.supp lets through stb_ds's own race on its hash seed. The plain binary
# runs in `unit` too.
BT := $(B)/tsan
$(BT)/test_threads: tests/unit/test_threads.c tests/unit/unity_lib.c tests/unit/testutil.h $(HDRS) $(LIB_SRC)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -O1 -fsanitize=thread tests/unit/unity_lib.c $< -o $@ -lcmocka $(LDLIBS)

test-threads: $(BT)/test_threads
	TSAN_OPTIONS="halt_on_error=1 suppressions=$(abspath tests/unit/tsan.supp)" HLOJIT_TEST_DATA=tests $(BT)/test_threads

deps:
	@bash tools/deps.sh

# Python tests: ops against NumPy, JAX fixtures, golden and round trip over the corpus
# (../shared/hlo-corpus or $$HLOJIT_CORPUS; the corpus tests skip, saying so, without it).
PYTEST  := $(PY) -m pytest -q -rfEs

test-py: all $(BA)/hlojit
	$(PYTEST) tests/py tests/models

# The tracing JIT's sweep driver (tests/py/test_jit_numpy.py runs it).
$(B)/tests/jit_sweep: tests/jit/jit_sweep.c $(HDRS) $(B)/libhlojit.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< -o $@ $(B)/libhlojit.a $(LDLIBS)
test-py test-py-cpu: $(B)/tests/jit_sweep

# The convolution API's driver (tests/py/test_conv_api.py runs it).
$(B)/tests/api_hlo: tests/unit/api_hlo.c $(HDRS) $(B)/libhlojit.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< -o $@ $(B)/libhlojit.a $(LDLIBS)
test-py test-py-cpu: $(B)/tests/api_hlo

# The suite of real JAX programs (tests/models/README.md) as a table, evaluator and CPU.
test-models: all
	$(PY) tests/models/suite.py --backends interp,cpu

test-golden: all
	$(PYTEST) tests/py/test_golden.py

test-corpus: all
	$(PYTEST) tests/py/test_roundtrip.py

# The Python suites that run modules on $$HLOJIT_BACKEND, with every module compiled by the
# CPU backend (LLVM ORC); the other files of tests/py do not read it (they choose their
# backends themselves), so test-py has run them already.
PY_BACKEND_TESTS := tests/py/test_ops_numpy.py tests/py/test_ops_numpy_shape.py tests/py/test_golden.py \
                    tests/py/test_jax_fixtures.py tests/py/test_roundtrip.py tests/py/test_conv_jax.py \
                    tests/py/test_conv_api.py tests/py/test_coverage_jax.py tests/models/test_models.py
test-py-cpu: all
	HLOJIT_BACKEND=cpu $(PYTEST) $(PY_BACKEND_TESTS)

# The bad-input fuzzer (mutated HLO texts) under ASan/UBSan.
test-fuzz: $(BA)/tests/fuzz_parse
$(BA)/tests/fuzz_parse: tests/fuzz/fuzz_parse.c $(HDRS) $(BA)/libhlojit.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) -O1 $< -o $@ $(BA)/libhlojit.a $(LDLIBS)
test-fuzz:
	ASAN_OPTIONS=detect_leaks=1 $(BA)/tests/fuzz_parse --count 10000 --seed 1 $(wildcard tests/fixtures/hlo tests/fixtures/jax ../shared/hlo-corpus)
	$(BA)/tests/fuzz_hlo --count $(FUZZ_SHORT_N) --seed 1 --jobs $(FUZZ_JOBS) --regress tests/fixtures/fuzz_regress/hlo_gen

# The structure-aware fuzzer (tests/fuzz/fuzz_hlo*.c): generated well- and ill-typed modules
# through print/parse, opt, the evaluator and the CPU backend under ASan/UBSan. test-fuzz runs
# the fixed regression files and a short fixed-seed run; fuzz-long (not in `make test`) runs
# FUZZ_LONG_N inputs on FUZZ_JOBS processes, shrinking failures into build/fuzz-hlo-failures/.
FUZZ_HLO_SRC := $(wildcard tests/fuzz/fuzz_hlo*.c)
FUZZ_SHORT_N ?= 60
FUZZ_LONG_N ?= 20000
FUZZ_LONG_SEED ?= 1000000
FUZZ_JOBS ?= 2
$(BA)/tests/fuzz_hlo: $(FUZZ_HLO_SRC) $(wildcard tests/fuzz/*.h) $(HDRS) $(BA)/libhlojit.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) -O1 $(FUZZ_HLO_SRC) -o $@ $(BA)/libhlojit.a $(LDLIBS)
test-fuzz: $(BA)/tests/fuzz_hlo
fuzz-long: $(BA)/tests/fuzz_hlo
	$(BA)/tests/fuzz_hlo --count $(FUZZ_LONG_N) --seed $(FUZZ_LONG_SEED) --jobs $(FUZZ_JOBS) --shrink \
	  --regress tests/fixtures/fuzz_regress/hlo_gen

# fuzz_hlo_emu: the same fuzzer without sanitizers and with a last stage on the GPU emulator
# (FUZZ_HLO_EMU: every module also through the CUDA backend's emitters, tests/unit/cuda_emu.h,
# against the evaluator). test-cuda-emu runs FUZZ_EMU_SHORT_N inputs; fuzz-emu (not in
# `make test`) FUZZ_LONG_N, shrinking failures like fuzz-long.
FUZZ_EMU_SHORT_N ?= 2000
$(B)/tests/fuzz_hlo_emu: $(FUZZ_HLO_SRC) $(wildcard tests/fuzz/*.h) tests/unit/cuda_emu.h $(HDRS) $(B)/libhlojit.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DFUZZ_HLO_EMU $(FUZZ_HLO_SRC) -o $@ $(B)/libhlojit.a $(LDLIBS)
fuzz-emu: $(B)/tests/fuzz_hlo_emu
	$< --count $(FUZZ_LONG_N) --seed $(FUZZ_LONG_SEED) --jobs $(FUZZ_JOBS) --shrink

# Everything, in order; a failing suite does not stop the later ones, and the last line
# says which passed. Exit status 1 if any failed.
TEST_SUITES := unit unit-asan test-threads test-fuzz test-py test-py-cpu test-gpt2 test-ptx test-cuda-emu test-gpu-dry

# What the suites run, built first on every core (-j$(TEST_JOBS)): `make test` from a fresh
# clone is mostly compiling, and one job at a time it took minutes longer. Each suite still
# builds what it needs itself when run alone.
TEST_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
TEST_BUILD = all $(UNIT_BIN) $(UNIT_BIN_ASAN) $(BA)/hlojit $(BT)/test_threads $(BA)/tests/fuzz_parse $(BA)/tests/fuzz_hlo \
             $(B)/tests/jit_sweep $(B)/tests/api_hlo $(B)/tests/cuda_emu_run $(B)/tests/fuzz_hlo_emu gpt2 gpt2-tools \
             $(B)/asan/tests/test_gpt2_api $(B)/asan/tests/test_gpt2_sample \
             $(B)/asan/tests/test_gpt2_session $(B)/tests/test_gpt2_emu $(CUDA_DOUBLE) \
             $(CUDA_GPU_TESTS:%=$(B)/tests/%)

# The suites run with the disk cache off (HLOJIT_CACHE_DIR=off): a test must compile what it
# checks; the cache tests choose their own directories.
test: deps
	@$(MAKE) --no-print-directory -j$(TEST_JOBS) $(TEST_BUILD) || { echo "== make test: FAILED (build)"; exit 1; }
	@res=""; fail=0; \
	for s in $(TEST_SUITES); do \
	  echo "== $$s"; \
	  if HLOJIT_CACHE_DIR=off $(MAKE) --no-print-directory $$s; then res="$$res $$s:ok"; \
	  else res="$$res $$s:FAILED"; fail=1; fi; \
	done; \
	if [ $$fail = 0 ]; then echo "== make test: PASSED ($$res )"; \
	else echo "== make test: FAILED ($$res )"; fi; exit $$fail

# Benchmarks (bench/): `make bench`.
include bench/bench.mk

# The GPT-2 example's tokenizer and checkpoint loaders, and their tests (test-gpt2).
include examples/gpt2/gpt2.mk

# The main job: GPT-2 in plain C through hlojit (examples/gpt2/gpt2.mk: gpt2-demo).
demo: deps
	$(MAKE) all gpt2
	@$(MAKE) --no-print-directory gpt2-demo

# `make install PREFIX=/usr/local` (and DESTDIR for staging): hlojit.h, libhlojit.a,
# libhlojit.so, the hlojit tool, and PREFIX/lib/pkgconfig/hlojit.pc, whose Libs carry
# LLVM's link flags. A program then builds with `cc prog.c $$(pkg-config --cflags --libs
# hlojit)`. The single-header mode (HLOJIT_IMPLEMENTATION) compiles the source tree and is
# not installed: vendor hlojit.h, hlojit_impl/ and backends/ for it. `make uninstall`
# removes what install put there.
PREFIX  ?= /usr/local
HJ_VERSION := $(shell awk '/define HJ_VERSION_MAJOR/{a=$$3} /define HJ_VERSION_MINOR/{b=$$3} END{print a "." b}' hlojit.h)
.PHONY: install uninstall
install: lib $(B)/hlojit
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 hlojit.h $(DESTDIR)$(PREFIX)/include/hlojit.h
	install -m 644 $(B)/libhlojit.a $(DESTDIR)$(PREFIX)/lib/libhlojit.a
	install -m 755 $(B)/libhlojit.so $(DESTDIR)$(PREFIX)/lib/libhlojit.so
	install -m 755 $(B)/hlojit $(DESTDIR)$(PREFIX)/bin/hlojit
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(HJ_VERSION)|' -e 's|@LLVM_LIBS@|$(strip $(CPU_LDLIBS))|' \
	  tools/hlojit.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/hlojit.pc

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/include/hlojit.h $(DESTDIR)$(PREFIX)/lib/libhlojit.a \
	  $(DESTDIR)$(PREFIX)/lib/libhlojit.so $(DESTDIR)$(PREFIX)/bin/hlojit \
	  $(DESTDIR)$(PREFIX)/lib/pkgconfig/hlojit.pc

clean:
	rm -rf $(B)
