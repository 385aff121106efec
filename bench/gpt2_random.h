/* gpt2_random.h — a GPT-2 of any config with random f32 weights, made in memory (no file):
   for bench/bench_gpt2.c (124M) and tests/gpt2/test_gpt2_session.c (a small config).
   Header-only (static functions), like bench_util.h.

   float *gpt2_random_weights(gpt2_weights *w, gpt2_layer *layers, gpt2_config cfg,
                              double scale, uint32_t seed);
   fills |w| (its layers in |layers|, cfg.L of them) with views into one 64-byte aligned block of
   every parameter in llm.c's order and layout ((out, in) matrices), which it returns (free
   it after the weights' last use; NULL: out of memory). Values are uniform from an LCG:
   layer-norm weights 1 +- 0.1, biases +- 0.02, and the matrices at GPT-2-like scales
   (wte 0.04, wpe 0.02, qkvw and fcw 0.04, the two projections 0.01) times |scale|. The
   rows of wte past V are zero, as in llm.c's files. */
#ifndef HLOJIT_BENCH_GPT2_RANDOM_H
#define HLOJIT_BENCH_GPT2_RANDOM_H
#include "examples/gpt2/weights.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static gpt2_tensor gpt2r_view(float **cur, const char *name, int64_t d0, int64_t d1, gpt2_layout lay,
                              double base, double scale, uint32_t *r) {
  gpt2_tensor t = {.data = *cur, .dtype = GPT2_F32, .ndim = d1 ? 2 : 1, .shape = {d0, d1}, .layout = lay};
  snprintf(t.name, sizeof t.name, "%s", name);
  int64_t n = d0 * (d1 ? d1 : 1);
  for (int64_t i = 0; i < n; i++) {
    *r = *r * 1664525u + 1013904223u;
    (*cur)[i] = (float)(base + scale * ((double)(*r >> 8) / (1 << 24) * 2.0 - 1.0));
  }
  *cur += n;
  return t;
}

static float *gpt2_random_weights(gpt2_weights *w, gpt2_layer *layers, gpt2_config cfg, double scale,
                                  uint32_t seed) {
  const int64_t C = cfg.C;
  int64_t n = (int64_t)cfg.Vp * C + (int64_t)cfg.max_T * C + 2 * C + (int64_t)cfg.L * (12 * C * C + 13 * C);
  /* 64-byte aligned, as every tensor of an llm.c file with C a multiple of 16 is in its
     mapping (the session reads vectors and embedding tables in place, session.h WEIGHTS);
     4 KiB pages, as a file mapping has */
  size_t bytes = (sizeof(float) * (size_t)n + 63) & ~(size_t)63;
  float *params = aligned_alloc(64, bytes), *p = params;
  if (!params) return NULL;
  uint32_t r = seed;
  double s = scale;
  memset(w, 0, sizeof *w);
  w->cfg = cfg;
  w->wte = gpt2r_view(&p, "wte", cfg.Vp, C, GPT2_ROWS, 0, 0.04 * s, &r);
  memset((float *)w->wte.data + (size_t)cfg.V * C, 0, sizeof(float) * (size_t)(cfg.Vp - cfg.V) * C);
  w->wpe = gpt2r_view(&p, "wpe", cfg.max_T, C, GPT2_ROWS, 0, 0.02 * s, &r);
  for (int l = 0; l < cfg.L; l++) {
    gpt2_layer *y = &layers[l];
    y->ln1w = gpt2r_view(&p, "ln1w", C, 0, GPT2_VECTOR, 1, 0.1, &r);
    y->ln1b = gpt2r_view(&p, "ln1b", C, 0, GPT2_VECTOR, 0, 0.02, &r);
    y->qkvw = gpt2r_view(&p, "qkvw", 3 * C, C, GPT2_OUT_IN, 0, 0.04 * s, &r);
    y->qkvb = gpt2r_view(&p, "qkvb", 3 * C, 0, GPT2_VECTOR, 0, 0.02, &r);
    y->attprojw = gpt2r_view(&p, "attprojw", C, C, GPT2_OUT_IN, 0, 0.01 * s, &r);
    y->attprojb = gpt2r_view(&p, "attprojb", C, 0, GPT2_VECTOR, 0, 0.02, &r);
    y->ln2w = gpt2r_view(&p, "ln2w", C, 0, GPT2_VECTOR, 1, 0.1, &r);
    y->ln2b = gpt2r_view(&p, "ln2b", C, 0, GPT2_VECTOR, 0, 0.02, &r);
    y->fcw = gpt2r_view(&p, "fcw", 4 * C, C, GPT2_OUT_IN, 0, 0.04 * s, &r);
    y->fcb = gpt2r_view(&p, "fcb", 4 * C, 0, GPT2_VECTOR, 0, 0.02, &r);
    y->fcprojw = gpt2r_view(&p, "fcprojw", C, 4 * C, GPT2_OUT_IN, 0, 0.01 * s, &r);
    y->fcprojb = gpt2r_view(&p, "fcprojb", C, 0, GPT2_VECTOR, 0, 0.02, &r);
  }
  w->lnfw = gpt2r_view(&p, "lnfw", C, 0, GPT2_VECTOR, 1, 0.1, &r);
  w->lnfb = gpt2r_view(&p, "lnfb", C, 0, GPT2_VECTOR, 0, 0.02, &r);
  w->layer = layers;
  return params;
}

#endif
