/* fuzz_hlo.h — what the structure-aware HLO fuzzer's two files share: the generator
   (fuzz_hlo_gen.c) makes one module's text from a seed; the driver (fuzz_hlo.c) runs it
   through print -> parse, opt, the evaluator and the CPU backend and classifies the outcome.

   The generator's promise: a module it calls well typed (fhg_module.well_typed) parses and
   verifies, and for each root tuple element it says how exactly the CPU backend must match
   the evaluator (fhg_module.exact[k]):
     FHG_EXACT   bit for bit (every integer and pred, and floats computed only by ops that
                 both sides compute identically: IEEE arithmetic, libm calls, data movement);
     FHG_CLOSE   within a float tolerance (f32 exp/log/tanh/... polynomials, dots, float
                 sums that the CPU may reorder), ±0 equal;
     FHG_SKIP    not compared (a discontinuous op — compare, floor, convert to an integer,
                 an index — applied to a FHG_CLOSE value can turn one ulp into anything).
   An ill-typed module (one deliberate error: a wrong dim or type, an attribute out of range,
   a boundary value where it does not fit) must be rejected with a positioned message or, if
   the mutation happened to keep it valid, run like any module but with no value checks. */
#ifndef FUZZ_HLO_H
#define FUZZ_HLO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { FHG_EXACT = 0, FHG_CLOSE = 1, FHG_SKIP = 2 };
#define FHG_MAX_OUT 8

typedef struct fhg_module {
  char *text;                 /* malloc'd, NUL-terminated */
  bool well_typed;
  int nout;                   /* root tuple elements */
  int exact[FHG_MAX_OUT];
  const char *mutation;       /* ill-typed: what was broken (a string literal) */
  bool has_while;             /* loops are bounded by construction (at most 5 trips) */
} fhg_module;

/* The module of |seed| (deterministic on every machine). */
void fhg_generate(uint64_t seed, fhg_module *out);
void fhg_free(fhg_module *m);

#endif
