/* fuzz_hlo_driver.h — what the fuzzer driver's files share: the outcome kinds, options,
   the per-input check (fuzz_hlo_check.c), saving/loading inputs and the shrinker
   (fuzz_hlo_shrink.c). fuzz_hlo.c is the process plumbing and the report. */
#ifndef FUZZ_HLO_DRIVER_H
#define FUZZ_HLO_DRIVER_H

#include "fuzz_hlo.h"
#include "hlojit.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* X(ENUM, name, what). Everything from FZ_D_CRASH on is a defect. */
#define FZ_KINDS(X)                                                                             \
  X(FZ_OK, "ok", "every stage ran and agreed")                                                  \
  X(FZ_MUTANT_OK, "mutant-ok", "an ill-typed edit that kept the module valid; every stage ran") \
  X(FZ_REJECTED, "rejected", "an ill-typed module refused by the parser with file:line:col")    \
  X(FZ_REFUSED_INTERP, "refused-interp", "the evaluator refused it with a message")             \
  X(FZ_REFUSED_OPT, "refused-opt", "hj_module_optimize refused it with a message")              \
  X(FZ_REFUSED_CPU, "refused-cpu", "the CPU backend refused it with a message")                 \
  X(FZ_REFUSED_EMU, "refused-emu", "the CUDA backend's emitters refused it with a message")     \
  X(FZ_D_CRASH, "crash", "signal, abort or sanitizer report")                                   \
  X(FZ_D_TIMEOUT, "timeout", "no result within --timeout")                                      \
  X(FZ_D_LEAK, "leak", "LeakSanitizer found memory never freed")                                \
  X(FZ_D_NO_MESSAGE, "no-message", "a failing call left no message")                            \
  X(FZ_D_NO_POSITION, "no-position", "a parse error without :LINE:COL:")                        \
  X(FZ_D_OUT_SET, "out-not-null", "a failing create left *out set")                             \
  X(FZ_D_VALID_REJECTED, "valid-rejected", "the parser refused a module generated well typed") \
  X(FZ_D_REPRINT, "print-reparse", "printed text does not parse back or is no fixed point")    \
  X(FZ_D_REPARSE_VALUES, "reparse-values", "the re-parsed module computes other bits")          \
  X(FZ_D_INTERNAL, "internal-error", "HJ_ERR_INTERNAL from a stage (a bug by definition)")      \
  X(FZ_D_OPT, "opt-broken", "the optimised module does not verify or print back")               \
  X(FZ_D_OPT_VALUES, "opt-values", "the optimised module computes other bits")                  \
  X(FZ_D_EMIT, "emit-error", "an emitter failed (hj_exec_stats emit_errors > 0)")               \
  X(FZ_D_CPU_VALUES, "cpu-values", "the CPU backend differs from the evaluator")                \
  X(FZ_D_EMU_VALUES, "emu-values", "the emulated GPU differs from the evaluator")

typedef enum {
#define X(e, s, d) e,
  FZ_KINDS(X)
#undef X
  FZ_KIND_COUNT
} fz_kind;

extern const char *const fz_kind_name[FZ_KIND_COUNT];
static inline bool fz_is_defect(fz_kind k) { return k >= FZ_D_CRASH; }

typedef struct {
  long count;
  uint64_t seed;
  int jobs, timeout;
  bool cpu, shrink, verbose;
  const char *regress, *save;
} fz_opts;

typedef struct {
  fz_kind kind;
  char detail[1000];
} fz_result;

/* fuzz_hlo_check.c: one interpreter and one CPU context (created once per worker); in the
   fuzz_hlo_emu build (FUZZ_HLO_EMU: no ASan) also the GPU emulator, whose stage runs the
   module through the CUDA backend's emitters (tests/unit/cuda_emu.h). */
typedef struct {
  hj_ctx_t *interp, *cpu;   /* cpu NULL with --no-cpu */
  void *emu;                /* a cuda_emu (FUZZ_HLO_EMU), else NULL */
} fz_stage_ctx;
int fz_stage_init(fz_stage_ctx *sc, bool cpu);
void fz_stage_free(fz_stage_ctx *sc);
/* Runs every stage on |gm|; inputs are drawn from |seed|. */
fz_result fz_check(fz_stage_ctx *sc, const fhg_module *gm, uint64_t seed);
/* The CPU-vs-evaluator comparison catches an ulp where exact bits are due, 2^-9 where a
   tolerance applies, and any integer difference (run before every fuzzing run). */
bool fz_compare_bites(void);

/* fuzz_hlo_shrink.c: a failing input as a file (its kind, detail and levels in `//`
   comment lines, which the HLO parser skips), read back; and the shrinker, which saves the
   smallest text it finds with the same kind next to the original (|o|->save/KIND-SEED.min.hlo). */
void fz_save(const char *path, const fhg_module *gm, fz_kind k, const char *detail);
int fz_load(const char *path, fhg_module *gm);
void fz_shrink_and_save(const fz_opts *o, const fhg_module *gm, fz_kind k, uint64_t seed);

#endif
