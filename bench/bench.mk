# bench/bench.mk — benchmarks (included by the main Makefile). `make bench` builds and runs,
# in this order (bench/README.md says what each measures and how to read it):
#   bench_matmul.c       hlojit's CPU matmul vs OpenBLAS cblas_sgemm in the same process;
#   bench_elementwise.c  GELU (one fused loop kernel) vs a STREAM triad, GB/s;
#   bench_compile.c      JIT latency of hj_compile_module;
#   bench_block.c        a GPT-2 block fused vs no_fusion: kernels, bytes moved, time;
#   bench_decode.c       a GPT-2 decode step, donated KV caches at Tc 256 vs 1024 vs copies.
# Every benchmark runs even if an earlier one fails; the last line names the failures and
# the exit status is 1 if any failed. `make bench-NAME` (matmul, elementwise, compile, block)
# runs one.
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset for the run so OpenBLAS picks its own
# kernel for this CPU (the program prints which: openblas_get_corename()).
# backends/cpu/cpu_matmul.c is compiled in here unless CPU_SRC (cpu.mk) already has it.
.PHONY: bench bench-conv bench-coverage bench-matmul bench-elementwise bench-compile bench-block

BENCH_MM_SRC := bench/bench_matmul.c \
                $(if $(filter backends/cpu/cpu_matmul.c,$(CPU_SRC)),,backends/cpu/cpu_matmul.c)

$(B)/bench/bench_matmul: $(BENCH_MM_SRC) $(HDRS) $(B)/libhlojit.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BENCH_MM_SRC) -o $@ $(B)/libhlojit.a -lopenblas $(LDLIBS)

# The other benchmarks use the public API only (hlojit.h + the library).
BENCH_API := elementwise compile block jit
# bench_decode.c: a GPT-2 124M decode step with donated KV caches at Tc 256 and 1024 (issue 10)
BENCH_API += decode

$(BENCH_API:%=$(B)/bench/bench_%): $(B)/bench/bench_%: bench/bench_%.c bench/bench_util.h bench/bench_gpt2.h $(HDRS) $(B)/libhlojit.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< -o $@ $(B)/libhlojit.a $(LDLIBS)

# bench_hlo.c: the best time of one HLO module; bench_conv.py runs it against XLA:CPU on the
# same convolution and pooling modules (`make bench-conv`, not part of `make bench`: it needs
# the venv's jax).
$(B)/bench/bench_hlo: bench/bench_hlo.c bench/bench_util.h $(HDRS) $(B)/libhlojit.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< -o $@ $(B)/libhlojit.a $(LDLIBS)

bench-conv: $(B)/bench/bench_hlo
	$(PY) bench/bench_conv.py

# The ops that had no kernel before (sort, top_k, scatter, bf16/f16 dots, rbg bits, LAPACK)
# against XLA:CPU on the same modules (`make bench-coverage`; needs the venv's jax).
bench-coverage: $(B)/bench/bench_hlo
	$(PY) bench/bench_coverage.py

bench-matmul: $(B)/bench/bench_matmul
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $(B)/bench/bench_matmul

$(BENCH_API:%=bench-%): bench-%: $(B)/bench/bench_%
	$(B)/bench/bench_$*

bench: $(B)/bench/bench_matmul $(BENCH_API:%=$(B)/bench/bench_%)
	@fail=""; for b in matmul $(BENCH_API); do \
	  echo "== bench_$$b"; \
	  $(MAKE) --no-print-directory bench-$$b || fail="$$fail $$b"; echo; \
	done; \
	if [ -z "$$fail" ]; then echo "== make bench: all ran, every check passed"; \
	else echo "== make bench: FAILED:$$fail"; exit 1; fi
