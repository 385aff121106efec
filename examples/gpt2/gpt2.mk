# examples/gpt2/gpt2.mk — the GPT-2 example's library-independent parts: the BPE tokenizer
# (bpe.c), the checkpoint loaders (weights.c, safetensors.c), their command-line tools and
# their tests. Meant to be included by the top-level Makefile (it uses CC, CFLAGS, B and PY
# from there); it also runs on its own from the repository root:
#     make -f examples/gpt2/gpt2.mk -j2 test-gpt2
#
# Targets
#   gpt2-tools      $(B)/examples/gpt2_tok     the tokenizer CLI (encode, decode, bench)
#                   $(B)/examples/gpt2_wcheck  loads a checkpoint, lists or dumps its tensors
#                   and both again with ASan+UBSan in $(B)/asan/examples/
#   test-gpt2       everything below, in order; fails if any fails
#   test-gpt2-tok   tests/gpt2/test_tokenizer.py: ids vs tiktoken built from the same local
#                   files on >= 1,000 strings, decode(encode(x)) == x, invalid UTF-8, the
#                   1 MB encode speed (prints MB/s); tests/gpt2/test_vocab_files.py: bad
#                   encoder.json / vocab.bpe files under ASan+UBSan
#   test-gpt2-weights  tests/gpt2/test_weights.py: llm.c and safetensors files made by
#                   tests/gpt2/gen_checkpoints.py (numpy, the safetensors library) read back
#                   value for value; truncated, inconsistent and malformed files each give a
#                   clear error under ASan+UBSan
#   test-gpt2-unit  tests/gpt2/test_gpt2_api.c (cmocka, ASan+UBSan): the C API in-process;
#                   tests/gpt2/test_gpt2_sample.c: the sampler's generator and distributions
#   test-gpt2-session tests/gpt2/test_gpt2_session.c (cmocka, ASan+UBSan): the session's
#                   KV cache buckets, in-process; needs the top-level Makefile
#   test-gpt2-gen   tests/gpt2/test_gpt2_gen.py: build/gpt2 layer by layer against a NumPy
#                   GPT-2 (random checkpoints in three formats, every graph split, both
#                   backends, the 124M shape unless HLOJIT_GPT2_124M=0), its command
#                   line, broken files through build/asan/gpt2; needs the top-level
#                   Makefile
#   test-gpt2-emu   tests/gpt2/test_gpt2_emu.c (cmocka): GPT-2's graphs (prefill, decode, a
#                   block or the whole model, both matrix layouts) by the CUDA backend's
#                   emitters on the GPU emulator (tests/unit/cuda_emu.h) against the
#                   evaluator; not under ASan
#   test-gpt2-gpu   tests/gpt2/test_gpt2_gpu.py: build/gpt2 --backend cuda on the CUDA test
#                   double (compiles, no compile per decode step, every PTX through ptxas
#                   for sm_80 and sm_90) and, on a GPU only, the NumPy comparisons of
#                   test-gpt2-gen for the bundled model, the small config and the 124M shape
#   gpt2            $(B)/gpt2 (the program, examples/gpt2/main.c) and $(B)/asan/gpt2
#   gpt2-demo       runs build/gpt2 on the bundled Shakespeare model (a random-weight model
#                   until it is there); `make demo` builds everything and runs this
#   bench-gpt2      bench/bench_gpt2.c: 124M prefill / decode against sgemm and bandwidth
#   bench-gpt2-gpu  bench/bench_gpt2_gpu.c (MODEL=FILE): prefill / decode on the GPU, CUDA
#                   graphs against plain launches, decode against the device copy's rate
#
# For the gpt2 program: compile GPT2_SRC into it (or link GPT2_OBJ) and add GPT2_LDLIBS.
# stb_ds comes in under its own names (gpt2_ds.h), so linking libhlojit.a as well is fine.
# Debian packages: libpcre2-dev libcjson-dev libstb-dev libcmocka-dev (tools/deps.sh);
# Python: tiktoken, safetensors, ml_dtypes, numpy, pytest (tests/requirements.txt).

CC      ?= cc
B       ?= build
PY      ?= .venv/bin/python
CFLAGS  ?= -std=gnu11 -O2 -g -Wall -Wextra -Werror -Wno-unused-parameter \
           -Wno-missing-field-initializers -fPIC -I.
GPT2_SANFLAGS ?= -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all

GPT2_DIR    := examples/gpt2
GPT2_SRC    := $(GPT2_DIR)/bpe.c $(GPT2_DIR)/weights.c $(GPT2_DIR)/safetensors.c \
               $(GPT2_DIR)/gpt2_ds.c
GPT2_HDRS   := $(wildcard $(GPT2_DIR)/*.h)
GPT2_LDLIBS := -lpcre2-8 -lcjson
GPT2_OBJ    := $(GPT2_SRC:%.c=$(B)/%.o)
GPT2_OBJ_SAN := $(GPT2_SRC:%.c=$(B)/asan/%.o)
GPT2_TOOLS  := $(B)/examples/gpt2_tok $(B)/examples/gpt2_wcheck
GPT2_TOOLS_SAN := $(B)/asan/examples/gpt2_tok $(B)/asan/examples/gpt2_wcheck
GPT2_PYTEST := $(PY) -m pytest -q -rfEs
GPT2_TEST_ENV := GPT2_TOK=$(B)/examples/gpt2_tok GPT2_TOK_ASAN=$(B)/asan/examples/gpt2_tok \
                 GPT2_WCHECK_ASAN=$(B)/asan/examples/gpt2_wcheck \
                 ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1

.PHONY: gpt2-tools test-gpt2 test-gpt2-tok test-gpt2-weights test-gpt2-unit

gpt2-tools: $(GPT2_TOOLS) $(GPT2_TOOLS_SAN)

# These pattern rules are more specific than the top-level $(B)/%.o ones, so make picks
# them for these files.
# (hlojit.h too: model.c, session.c and main.c use the library's API.)
$(B)/$(GPT2_DIR)/%.o: $(GPT2_DIR)/%.c $(GPT2_HDRS) $(wildcard hlojit.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(B)/asan/$(GPT2_DIR)/%.o: $(GPT2_DIR)/%.c $(GPT2_HDRS) $(wildcard hlojit.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(GPT2_SANFLAGS) -O1 -c $< -o $@

$(B)/examples/gpt2_tok: $(B)/$(GPT2_DIR)/gpt2_tok.o $(GPT2_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ -o $@ $(GPT2_LDLIBS)

$(B)/examples/gpt2_wcheck: $(B)/$(GPT2_DIR)/gpt2_wcheck.o $(GPT2_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ -o $@ $(GPT2_LDLIBS)

$(B)/asan/examples/gpt2_tok: $(B)/asan/$(GPT2_DIR)/gpt2_tok.o $(GPT2_OBJ_SAN)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(GPT2_SANFLAGS) $^ -o $@ $(GPT2_LDLIBS)

$(B)/asan/examples/gpt2_wcheck: $(B)/asan/$(GPT2_DIR)/gpt2_wcheck.o $(GPT2_OBJ_SAN)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(GPT2_SANFLAGS) $^ -o $@ $(GPT2_LDLIBS)

$(B)/asan/tests/test_gpt2_api: tests/gpt2/test_gpt2_api.c $(GPT2_HDRS) $(GPT2_OBJ_SAN)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(GPT2_SANFLAGS) -O1 -I$(GPT2_DIR) $< $(GPT2_OBJ_SAN) -o $@ \
	  -lcmocka $(GPT2_LDLIBS)

test-gpt2-tok: gpt2-tools
	$(GPT2_TEST_ENV) $(GPT2_PYTEST) tests/gpt2/test_tokenizer.py tests/gpt2/test_vocab_files.py

test-gpt2-weights: gpt2-tools
	$(GPT2_TEST_ENV) $(GPT2_PYTEST) tests/gpt2/test_weights.py

$(B)/asan/tests/test_gpt2_sample: tests/gpt2/test_gpt2_sample.c $(GPT2_DIR)/sample.c \
                                   $(GPT2_DIR)/sample.h $(GPT2_DIR)/gpt2_err.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(GPT2_SANFLAGS) -O1 -I$(GPT2_DIR) $< $(GPT2_DIR)/sample.c -o $@ -lcmocka -lm

test-gpt2-unit: $(B)/asan/tests/test_gpt2_api $(B)/asan/tests/test_gpt2_sample
	ASAN_OPTIONS=detect_leaks=1 GPT2_DATA=$(GPT2_DIR)/data $(B)/asan/tests/test_gpt2_api
	ASAN_OPTIONS=detect_leaks=1 $(B)/asan/tests/test_gpt2_sample

# test-gpt2-session and test-gpt2-gen need libhlojit.a, so the top-level Makefile.
GPT2_SUITES := test-gpt2-unit test-gpt2-tok test-gpt2-weights \
               $(if $(LIB_OBJ),test-gpt2-session test-gpt2-gen test-gpt2-emu test-gpt2-gpu)

test-gpt2:
	@fail=0; for t in $(GPT2_SUITES); do \
	  $(MAKE) --no-print-directory -f $(firstword $(MAKEFILE_LIST)) $$t || fail=1; done; \
	exit $$fail

# ---- the gpt2 program (needs the top-level Makefile: libhlojit.a, LDLIBS) ----------------
# $(B)/gpt2 and its ASan+UBSan twin $(B)/asan/gpt2 (linked with $(B)/asan/libhlojit.a).
GPT2_PROG_SRC := $(GPT2_DIR)/main.c $(GPT2_DIR)/session.c $(GPT2_DIR)/model.c \
                 $(GPT2_DIR)/sample.c
GPT2_PROG_OBJ := $(GPT2_PROG_SRC:%.c=$(B)/%.o)
GPT2_PROG_OBJ_SAN := $(GPT2_PROG_SRC:%.c=$(B)/asan/%.o)
GPT2_VOCAB_DEF := -DGPT2_VOCAB_DIR='"$(abspath $(GPT2_DIR)/data/gpt2-bpe)"'

.PHONY: gpt2
gpt2: $(B)/gpt2 $(B)/asan/gpt2

$(B)/$(GPT2_DIR)/main.o $(B)/asan/$(GPT2_DIR)/main.o: CFLAGS += $(GPT2_VOCAB_DEF)

$(B)/gpt2: $(GPT2_PROG_OBJ) $(GPT2_OBJ) $(B)/libhlojit.a
	$(CC) $(CFLAGS) $^ -o $@ $(GPT2_LDLIBS) $(LDLIBS)

$(B)/asan/gpt2: $(GPT2_PROG_OBJ_SAN) $(GPT2_OBJ_SAN) $(B)/asan/libhlojit.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(GPT2_SANFLAGS) $^ -o $@ $(GPT2_LDLIBS) $(LDLIBS)

# ---- bench/bench_gpt2.c: 124M prefill and decode against sgemm and read bandwidth ---------
.PHONY: bench-gpt2
$(B)/bench/bench_gpt2: bench/bench_gpt2.c bench/bench_util.h bench/gpt2_random.h $(B)/$(GPT2_DIR)/session.o \
                       $(B)/$(GPT2_DIR)/model.o $(B)/libhlojit.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(filter-out %.h,$^) -o $@ -lopenblas $(LDLIBS)

bench-gpt2: $(B)/bench/bench_gpt2
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $(B)/bench/bench_gpt2

# ---- bench/bench_gpt2_gpu.c: prefill and decode on the CUDA backend (needs a GPU) ----------
# `make bench-gpt2-gpu MODEL=FILE` (tools/gpu_check.sh makes a 124M-shaped random one).
.PHONY: bench-gpt2-gpu
$(B)/bench/bench_gpt2_gpu: bench/bench_gpt2_gpu.c bench/bench_util.h $(GPT2_HDRS) $(GPT2_OBJ) \
                           $(B)/$(GPT2_DIR)/session.o $(B)/$(GPT2_DIR)/model.o $(B)/libhlojit.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(filter %.c %.o %.a,$^) -o $@ $(GPT2_LDLIBS) $(LDLIBS)

bench-gpt2-gpu: $(B)/bench/bench_gpt2_gpu
	$(B)/bench/bench_gpt2_gpu --model $(or $(MODEL),$(GPT2_BUNDLED))

# ---- tests of the session (in-process) and of the program, and the demo --------------------
.PHONY: test-gpt2-session test-gpt2-gen test-gpt2-emu test-gpt2-gpu gpt2-demo
$(B)/asan/tests/test_gpt2_session: tests/gpt2/test_gpt2_session.c $(GPT2_HDRS) bench/gpt2_random.h \
                                   $(B)/asan/$(GPT2_DIR)/session.o $(B)/asan/$(GPT2_DIR)/model.o \
                                   $(B)/asan/libhlojit.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(GPT2_SANFLAGS) -O1 -I$(GPT2_DIR) $< $(filter %.o %.a,$^) -o $@ -lcmocka \
	  $(LDLIBS)

test-gpt2-session: $(B)/asan/tests/test_gpt2_session
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 $<

test-gpt2-gen: gpt2
	$(GPT2_TEST_ENV) $(GPT2_PYTEST) tests/gpt2/test_gpt2_gen.py

# GPT-2's graphs on the GPU emulator (tests/unit/cuda_emu.h) against the evaluator; not
# under ASan (the emulator switches stacks).
$(B)/tests/test_gpt2_emu: tests/gpt2/test_gpt2_emu.c $(GPT2_HDRS) $(wildcard tests/unit/*.h) \
                          $(B)/$(GPT2_DIR)/model.o $(GPT2_OBJ) $(B)/libhlojit.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -I$(GPT2_DIR) -Itests/unit $< $(filter %.o %.a,$^) -o $@ -lcmocka $(GPT2_LDLIBS) $(LDLIBS)

test-gpt2-emu: $(B)/tests/test_gpt2_emu
	$<

# The CUDA backend's host side on the CUDA test double (PTX through ptxas), and on a GPU the
# verification against NumPy (skipped without one).
test-gpt2-gpu: gpt2 $(CUDA_DOUBLE)
	$(GPT2_TEST_ENV) $(GPT2_PYTEST) tests/gpt2/test_gpt2_gpu.py

GPT2_BUNDLED := $(GPT2_DIR)/data/shakespeare/model.bin
GPT2_DEMO_ARGS := --tokens 200 --temperature 0.8 --top-k 40 --seed 1 --stats
gpt2-demo: $(B)/gpt2
	@if [ -f $(GPT2_BUNDLED) ]; then \
	  echo "== GPT-2 (bundled Shakespeare model) on the CPU, prompt 'ROMEO:'"; \
	  $(B)/gpt2 --model $(GPT2_BUNDLED) --prompt "ROMEO:" $(GPT2_DEMO_ARGS); \
	else \
	  echo "== $(GPT2_BUNDLED) is not there yet: a random-weight GPT-2 (L=2, C=64, GPT-2's vocabulary) instead"; \
	  $(PY) tests/gpt2/gen_checkpoints.py $(B)/gpt2-demo --L 2 --NH 4 --C 64 --V 50257 \
	    --Vp 50304 --maxT 256 --seed 1 --init gpt2 > /dev/null && \
	  $(B)/gpt2 --model $(B)/gpt2-demo/model.bin --prompt "The meaning of life is" $(GPT2_DEMO_ARGS); \
	fi
