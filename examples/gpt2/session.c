/* session.c — GPT-2's prefill and decode through hlojit (session.h says what a session
   holds: stages, buckets, the KV cache, weights, verify output).

   // L layers, C channels, NH heads, hs head size, V vocab, Vp padded vocab, maxT context,
   // T prefill bucket, Tc cache bucket

   A step runs the stages in order. Each stage's inputs are bound from what the session
   owns (ids and pos buffers, the weights of its layers, the caches) and from the
   previous stage's main output; its outputs are buffers the stage keeps for its phase. A
   decode stage passes them back to hj_exec_run (overwritten in place), remade only when
   it runs a different executable (another cache bucket); a prefill stage's JIT returns new
   buffers at the real row count on every call, and the stage keeps them until its next
   prefill. Stages that share an executable or JIT never share output buffers, so a block
   graph run for layer l + 1 reads layer l's output while it writes its own.

   The decode caches are donated: a decode stage's cache outputs alias its cache inputs,
   and the run gets the session's cache buffers in both places (hlojit's fast path: the
   graph writes row pos in place). They sit in the stage's output array only for the run.
   After a stage: a prefill copies the real rows of its k and v outputs into the cache;
   with a verify folder the stage's emb / res outputs are written (only the real rows). */
#include "session.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "model.h"

#define GPT2_SMALL_CACHE (8 << 20) /* bytes of K and V at maxT, all layers */

typedef struct exe_entry {
  gpt2_spec spec;
  hj_exec_t *e;            /* decode (and prefill without the JIT): one bucket's executable */
  hj_jit_t *jit;           /* prefill with the JIT: every bucket */
  const gpt2_weights *wv;  /* for the JIT's build function */
  gpt2_param *decl;        /* the JIT's parameters (their names must outlive it) */
  double jit_ms;           /* trace + compile time of |jit| counted so far */
  gpt2_sig sig;
} exe_entry;

typedef struct stage {
  int l0, nb;
  bool embed, head;
  hj_buffer_t **out[2];       /* per phase: the outputs of out_for[phase] */
  const exe_entry *out_for[2];
} stage;

struct gpt2_session {
  const gpt2_weights *w;
  gpt2_config cfg;
  gpt2_session_opts o;
  hj_ctx_t *ctx;
  gpt2_weights wv;          /* the shapes and layouts of the buffers (for gpt2_build) */
  gpt2_layer *wv_layers;
  hj_buffer_t *wte, *wpe, *lnfw, *lnfb, *lm_head; /* lm_head: wte^T (C, Vp), or NULL */
  bool lm_head_bf16;        /* lm_head is kept in bf16 (WEIGHTS) */
  int64_t lm_head_panel[2]; /* lm_head in the CPU's panel order: kc, nr (else 0) */
  bool panels;              /* block matrices in the CPU's panel order where it has one */
  hj_backend_t backend;     /* where the executables run (AUTO resolved) */
  hj_buffer_t **lw; /* L x 12, in gpt2_layer's order */
  exe_entry **exe;
  int n_exe;
  stage *st;
  int n_st;
  hj_buffer_t **kc, **vc; /* L each, Tc entries */
  int Tc, len;
  hj_buffer_t *id1, *pos; /* s32[1], s32[] */
  int64_t buckets[32];    /* the prefill JIT's: 16, 32, ..., maxT */
  int n_buckets;
  int step;               /* verify step counter */
  gpt2_session_stats stats;
};

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int hj_fail(gpt2_session *s, gpt2_err *err, const char *what) {
  return gpt2_errf(err, "%s: %s", what, hj_ctx_error(s->ctx));
}

void gpt2_session_opts_init(gpt2_session_opts *o) {
  *o = (gpt2_session_opts){.backend = HJ_BACKEND_AUTO, .num_threads = 0,
                           .layers_per_graph = -1, .verify_dir = NULL,
                           .kernel_layouts = true, .panels = true, .prefill_jit = true, .zero_copy = false,
                           .keep_bf16 = true};
}

/* ---- weights ------------------------------------------------------------------------------ */

/* Element i of |t| as f32 (bf16 -> f32 is exact: the bits move up 16 places). */
static inline float elem(const gpt2_tensor *t, int64_t i) {
  if (t->dtype == GPT2_F32) return ((const float *)t->data)[i];
  uint32_t u = (uint32_t)((const uint16_t *)t->data)[i] << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* A new buffer holding |t|, transposed if |transpose| (a matrix, in 64 x 64 tiles): f32, or
   bf16 when |t| is bf16 and |keep16|; *view describes it (|t| with the shape, layout and
   element type of the buffer). With |map|, an f32 |t| kept as it is becomes a read-only
   buffer over the loader's mapping instead of a copy (WEIGHTS). */
static int tensor_buffer(gpt2_session *s, const gpt2_tensor *t, bool transpose, bool keep16,
                         bool map, gpt2_tensor *view, hj_buffer_t **out, gpt2_err *err) {
  const int64_t R = t->shape[0], C = t->ndim == 2 ? t->shape[1] : 1;
  transpose = transpose && t->ndim == 2;
  hj_shape_t sh = t->ndim == 1 ? HJ_SHAPE(R) : transpose ? HJ_SHAPE(C, R) : HJ_SHAPE(R, C);
  *view = *t;
  if (transpose) {
    view->shape[0] = C, view->shape[1] = R;
    view->layout = t->layout == GPT2_OUT_IN ? GPT2_IN_OUT : GPT2_OUT_IN;
  }
  if (t->dtype == GPT2_BF16 && keep16) {   // the bits as they are, maybe transposed
    if (hj_buffer_create(s->ctx, HJ_BF16, sh, out))
      return gpt2_errf(err, "weight %s: %s", t->name, hj_ctx_error(s->ctx));
    uint16_t *d = hj_buffer_host_ptr(*out);
    const uint16_t *h = t->data;
    s->stats.weights_copied_bytes += (int64_t)sizeof *d * R * C;
    if (!transpose) memcpy(d, h, sizeof *d * (size_t)(R * C));
    else
      for (int64_t i0 = 0; i0 < R; i0 += 64)
        for (int64_t j0 = 0; j0 < C; j0 += 64)
          for (int64_t i = i0; i < R && i < i0 + 64; i++)
            for (int64_t j = j0; j < C && j < j0 + 64; j++) d[j * R + i] = h[i * C + j];
    return 0;
  }
  view->dtype = GPT2_F32;
  if (!transpose && t->dtype == GPT2_F32 && map) { // the loader's view, read-only
    if (hj_buffer_wrap(s->ctx, HJ_F32, sh, (void *)t->data, sizeof(float) * (size_t)(R * C),
                       HJ_BUFFER_READ_ONLY, NULL, NULL, out))
      return gpt2_errf(err, "weight %s: %s", t->name, hj_ctx_error(s->ctx));
    s->stats.weights_mapped_bytes += (int64_t)sizeof(float) * R * C;
    return 0;
  }
  if (hj_buffer_create(s->ctx, HJ_F32, sh, out))
    return gpt2_errf(err, "weight %s: %s", t->name, hj_ctx_error(s->ctx));
  float *d = hj_buffer_host_ptr(*out);
  s->stats.weights_copied_bytes += (int64_t)sizeof *d * R * C;
  if (!transpose && t->dtype == GPT2_F32) {
    memcpy(d, t->data, sizeof *d * (size_t)(R * C));
  } else if (!transpose) {
    for (int64_t i = 0; i < R * C; i++) d[i] = elem(t, i);
  } else {
    for (int64_t i0 = 0; i0 < R; i0 += 64)
      for (int64_t j0 = 0; j0 < C; j0 += 64)
        for (int64_t i = i0; i < R && i < i0 + 64; i++)
          for (int64_t j = j0; j < C && j < j0 + 64; j++) d[j * R + i] = elem(t, i * C + j);
  }
  return 0;
}

/* A new buffer holding matrix |t| in the CPU backend's panel order (LAYOUTS): f32, or bf16
   when |t| is bf16 and |keep16|; *view describes it. 1 (nothing made, no error) when the
   backend has no panel order for its shape. */
static int panel_buffer(gpt2_session *s, const gpt2_tensor *t, bool keep16, gpt2_tensor *view,
                        hj_buffer_t **out, gpt2_err *err) {
  const bool oi = t->layout == GPT2_OUT_IN;
  const int64_t in = t->shape[oi], n_out = t->shape[!oi];
  const hj_linear_layout_t lay = oi ? HJ_LINEAR_OUT_IN : HJ_LINEAR_IN_OUT;
  const bool b16 = keep16 && t->dtype == GPT2_BF16;
  int64_t kc, nr;
  if (hj_linear_panels(s->ctx, HJ_BACKEND_CPU, in, n_out, &kc, &nr)) {
    hj_ctx_clear_error(s->ctx);
    return 1;
  }
  float *wide = NULL;
  const float *src = t->data;
  if (t->dtype != GPT2_F32 && !b16) {
    if (!(wide = malloc(sizeof *wide * (size_t)(in * n_out)))) return gpt2_errf(err, "out of memory");
    for (int64_t i = 0; i < in * n_out; i++) wide[i] = elem(t, i);
    src = wide;
  }
  int rc = 0;
  if (hj_buffer_create(s->ctx, b16 ? HJ_BF16 : HJ_F32, HJ_SHAPE(in / kc, n_out / nr, kc, nr), out) ||
      (b16 ? hj_linear_pack_bf16(s->ctx, t->data, lay, in, n_out, kc, nr, hj_buffer_host_ptr(*out))
           : hj_linear_pack(s->ctx, src, lay, in, n_out, kc, nr, hj_buffer_host_ptr(*out))))
    rc = gpt2_errf(err, "weight %s: %s", t->name, hj_ctx_error(s->ctx));
  else
    s->stats.weights_copied_bytes += (b16 ? 2 : 4) * in * n_out;
  free(wide);
  *view = *t;
  view->dtype = b16 ? GPT2_BF16 : GPT2_F32;
  view->layout = GPT2_PANELS;
  view->shape[0] = in, view->shape[1] = n_out;
  view->panel[0] = kc, view->panel[1] = nr;
  return rc;
}

/* The lm_head's own copy of wte (kernel_layouts): in panel order where the CPU has one,
   else transposed to (C, Vp); *lm describes it. */
static int lm_head_buffer(gpt2_session *s, bool keep16, gpt2_tensor *lm, gpt2_err *err) {
  gpt2_tensor wte = s->w->wte;   /* (Vp, C): the tied head's (out, in) */
  wte.layout = GPT2_OUT_IN;
  int rc = s->panels ? panel_buffer(s, &wte, keep16, lm, &s->lm_head, err) : 1;
  if (rc == 0) s->lm_head_panel[0] = lm->panel[0], s->lm_head_panel[1] = lm->panel[1];
  return rc < 0 ? -1 : rc > 0 ? tensor_buffer(s, &s->w->wte, true, keep16, false, lm, &s->lm_head, err) : 0;
}

/* With kernel_layouts, the layout block matrix |i| (gpt2_layer's order) is kept in. */
static gpt2_layout kept_layout(const gpt2_session *s, int i, gpt2_layout stored) {
  if (!s->o.kernel_layouts || stored == GPT2_VECTOR) return stored;
  return i == 10 ? GPT2_OUT_IN : GPT2_IN_OUT; // fcprojw (out, in); qkvw, attprojw, fcw (in, out)
}

/* The backend this context's executables run on. AUTO picks per compile (the first
   backend that compiles a graph), so a one-op graph asks it (AUTO when even that fails:
   the real compiles will say why). */
static hj_backend_t resolved_backend(gpt2_session *s) {
  if (s->o.backend != HJ_BACKEND_AUTO) return s->o.backend;
  hj_graph_t *g = NULL;
  hj_exec_t *e = NULL;
  hj_backend_t b = HJ_BACKEND_AUTO;
  if (!hj_graph_create(s->ctx, "probe", &g)) {
    hj_tensor_t x = hj_param(g, HJ_F32, HJ_SHAPE(1), "x");
    hj_graph_output(g, hj_add(x, x));
    if (!hj_compile(g, &e)) b = hj_exec_backend(e);
  }
  hj_exec_destroy(e);
  hj_graph_destroy(g);
  hj_ctx_clear_error(s->ctx);
  return b;
}

/* Is |t| used over the loader's mapping (WEIGHTS)? With zero_copy, every f32 tensor kept
   in the file's layout is. Otherwise only on the CPU backend (the CUDA backend would stage
   a host buffer through device memory on every run), only a tensor no matmul streams
   (|streamed| false: the embedding tables, of which a step reads a few rows, and the
   vectors), and only where it starts on a cache line, as a copy would: vectors 16 bytes
   past one cost GPT-2 124M's prefill of 256 tokens 6% at 2 threads (bench_gpt2, 3 runs
   each way, alternated: 255-270 ms against 239-250 copied; 64-byte aligned, 236-265 against
   244-255). An llm.c file's tensors are aligned so when C is a multiple of 16; in a
   safetensors file that depends on where its header ends. */
static bool use_mapping(const gpt2_session *s, const gpt2_tensor *t, bool streamed, bool cpu) {
  return s->o.zero_copy || (cpu && !streamed && (uintptr_t)t->data % 64 == 0);
}

/* |t| went into buffer |b|: unless |b| reads it in place, its pages leave the resident set
   (gpt2_weights_release, through the weights' |release|; WEIGHTS). |gathered|: |b| does
   read it in place, but only a few rows a step (the embedding's wte on the CPU), which
   fault back in as they are read. */
static void release_source(const gpt2_session *s, const gpt2_tensor *t, hj_buffer_t *b,
                           bool gathered) {
  if (s->w->release && (gathered || hj_buffer_host_ptr(b) != t->data)) s->w->release(s->w, t);
}

static int load_weights(gpt2_session *s, gpt2_err *err) {
  const gpt2_weights *w = s->w;
  const int L = s->cfg.L;
  s->wv = *w;
  s->wv.layer = s->wv_layers = calloc((size_t)L, sizeof *s->wv_layers);
  s->lw = calloc((size_t)L * GPT2_LAYER_PARAMS, sizeof *s->lw);
  if (!s->lw || !s->wv_layers) return gpt2_errf(err, "out of memory");
  gpt2_tensor lm;
  /* bf16 matrices stay bf16 where a matmul reads them (not wte when the embedding's gather
     reads it too), on the CPU backend only (WEIGHTS; AUTO: where it resolves to the CPU) */
  const bool any16 = w->wte.dtype == GPT2_BF16 || (L > 0 && w->layer[0].qkvw.dtype == GPT2_BF16);
  const bool cpu = s->backend == HJ_BACKEND_CPU, k16 = s->o.keep_bf16 && any16 && cpu;
  s->panels = s->o.kernel_layouts && s->o.panels && !s->o.zero_copy && cpu;
  const bool head_reads_wte = !s->o.kernel_layouts; // else the head has its own copy
  if (tensor_buffer(s, &w->wte, false, false, use_mapping(s, &w->wte, head_reads_wte, cpu),
                    &s->wv.wte, &s->wte, err) ||
      tensor_buffer(s, &w->wpe, false, false, use_mapping(s, &w->wpe, false, cpu), &s->wv.wpe,
                    &s->wpe, err) ||
      tensor_buffer(s, &w->lnfw, false, false, use_mapping(s, &w->lnfw, false, cpu),
                    &s->wv.lnfw, &s->lnfw, err) ||
      tensor_buffer(s, &w->lnfb, false, false, use_mapping(s, &w->lnfb, false, cpu),
                    &s->wv.lnfb, &s->lnfb, err) ||
      (s->o.kernel_layouts && lm_head_buffer(s, k16, &lm, err)))
    return -1;
  s->lm_head_bf16 = s->lm_head && lm.dtype == GPT2_BF16;
  release_source(s, &w->wte, s->wte, cpu && !head_reads_wte && !s->o.zero_copy);
  release_source(s, &w->wpe, s->wpe, false);
  release_source(s, &w->lnfw, s->lnfw, false);
  release_source(s, &w->lnfb, s->lnfb, false);
  for (int l = 0; l < L; l++) {
    const gpt2_layer *y = &w->layer[l];
    gpt2_layer *v = &s->wv_layers[l];
    const gpt2_tensor *t[GPT2_LAYER_PARAMS] = {
        &y->ln1w, &y->ln1b, &y->qkvw, &y->qkvb, &y->attprojw, &y->attprojb,
        &y->ln2w, &y->ln2b, &y->fcw,  &y->fcb,  &y->fcprojw,  &y->fcprojb};
    gpt2_tensor *tv[GPT2_LAYER_PARAMS] = {
        &v->ln1w, &v->ln1b, &v->qkvw, &v->qkvb, &v->attprojw, &v->attprojb,
        &v->ln2w, &v->ln2b, &v->fcw,  &v->fcb,  &v->fcprojw,  &v->fcprojb};
    for (int i = 0; i < GPT2_LAYER_PARAMS; i++) {
      bool tr = kept_layout(s, i, t[i]->layout) != t[i]->layout;
      bool mat = t[i]->layout != GPT2_VECTOR;
      hj_buffer_t **b = &s->lw[l * GPT2_LAYER_PARAMS + i];
      int rc = s->panels && mat ? panel_buffer(s, t[i], k16, tv[i], b, err) : 1;
      if (rc < 0 || (rc > 0 && tensor_buffer(s, t[i], tr, k16 && mat, use_mapping(s, t[i], mat, cpu),
                                             tv[i], b, err)))
        return -1;
      release_source(s, t[i], *b, false);
    }
  }
  return 0;
}

/* ---- stages and executables ------------------------------------------------------------- */

static int make_stages(gpt2_session *s, gpt2_err *err) {
  int L = s->cfg.L, G = s->o.layers_per_graph;
  if (G < 0) G = s->backend == HJ_BACKEND_CUDA ? 0 : 1;   /* STAGES */
  int n = G <= 0 ? 1 : 2 + (L + G - 1) / G;
  s->st = calloc((size_t)n, sizeof *s->st);
  if (!s->st) return gpt2_errf(err, "out of memory");
  if (G <= 0) {
    s->st[0] = (stage){.l0 = 0, .nb = L, .embed = true, .head = true};
  } else {
    int k = 0;
    s->st[k++] = (stage){.l0 = 0, .nb = 0, .embed = true};
    for (int l = 0; l < L; l += G) s->st[k++] = (stage){.l0 = l, .nb = L - l < G ? L - l : G};
    s->st[k++] = (stage){.l0 = L, .nb = 0, .head = true};
  }
  s->n_st = n;
  return 0;
}

static bool same_spec(const gpt2_spec *a, const gpt2_spec *b) {
  return a->phase == b->phase && a->n == b->n && a->Tc == b->Tc && a->n_blocks == b->n_blocks &&
         a->embed == b->embed && a->head == b->head && a->verify == b->verify &&
         a->lm_head_t == b->lm_head_t && a->lm_head_bf16 == b->lm_head_bf16 && a->dyn_rows == b->dyn_rows &&
         a->lm_head_panel[0] == b->lm_head_panel[0] && a->lm_head_panel[1] == b->lm_head_panel[1];
}

static const char *stage_name(const gpt2_spec *sp) {
  return sp->embed && sp->head ? "model" : sp->embed ? "embedding" : sp->head ? "head" : "block";
}

static hj_status jit_build(hj_graph_t *g, const hj_tensor_t *p, int n, void *user) {
  exe_entry *x = user;
  return gpt2_body(g, x->wv, &x->spec, p, &x->sig);
}

/* The JIT of a prefill stage: gpt2_body traced with rows HJ_DYN(maxT), in s->buckets. */
static int make_jit(gpt2_session *s, exe_entry *x, const char *what, gpt2_err *err) {
  int np = gpt2_params(&s->wv, &x->spec, NULL, &x->sig);
  x->decl = malloc(sizeof *x->decl * (size_t)np);
  hj_jit_param_t *jp = malloc(sizeof *jp * (size_t)np);
  int rc = -1;
  if (!x->decl || !jp) {
    gpt2_errf(err, "out of memory");
  } else {
    gpt2_params(&s->wv, &x->spec, x->decl, &x->sig);
    for (int i = 0; i < np; i++) jp[i] = (hj_jit_param_t){x->decl[i].name, x->decl[i].shape};
    hj_jit_options_t o;
    hj_jit_options_init(&o);
    o.name = stage_name(&x->spec);
    o.params = jp;
    o.nparams = np;
    o.buckets = s->buckets;
    o.nbuckets = s->n_buckets;
    x->wv = &s->wv;
    rc = hj_jit_create(s->ctx, jit_build, x, &o, &x->jit) ? hj_fail(s, err, what) : 0;
  }
  free(jp);
  return rc;
}

static int get_exe(gpt2_session *s, const gpt2_spec *sp, const exe_entry **out, gpt2_err *err) {
  for (int i = 0; i < s->n_exe; i++)
    if (same_spec(&s->exe[i]->spec, sp)) {
      if (!s->exe[i]->jit) s->stats.mem_hits++; // a JIT counts its own hits
      *out = s->exe[i];
      return 0;
    }
  exe_entry **grown = realloc(s->exe, sizeof *grown * (size_t)(s->n_exe + 1));
  exe_entry *x = calloc(1, sizeof *x);
  if (grown) s->exe = grown;
  if (!grown || !x) {
    free(x);
    return gpt2_errf(err, "out of memory");
  }
  x->spec = *sp;
  char what[96];
  snprintf(what, sizeof what, "%s graph (%s, %s %d)", stage_name(sp),
           sp->phase == GPT2_PREFILL ? "prefill" : "decode",
           sp->phase == GPT2_PREFILL ? "T" : "Tc", sp->phase == GPT2_PREFILL ? sp->n : sp->Tc);
  if (sp->dyn_rows) {
    if (make_jit(s, x, what, err)) {
      free(x->decl);
      free(x);
      return -1;
    }
    s->exe[s->n_exe++] = x;
    *out = x;
    return 0;
  }
  double t0 = now_s();
  hj_graph_t *g = NULL; // the executable keeps its own copy of the module
  int bad = hj_graph_create(s->ctx, "gpt2", &g) || gpt2_build(g, &s->wv, sp, &x->sig) ||
            hj_compile(g, &x->e);
  if (bad) hj_fail(s, err, what);
  hj_graph_destroy(g);
  if (bad) {
    free(x);
    return -1;
  }
  s->stats.compile_s += now_s() - t0;
  hj_exec_stats_t es;
  int src = hj_exec_stats(x->e, &es) ? HJ_CODE_COMPILED : es.code_source;
  if (src == HJ_CODE_DISK) s->stats.disk_hits++;
  else if (src == HJ_CODE_MEMORY) s->stats.mem_hits++;
  else s->stats.compiles++;
  s->stats.backend = hj_exec_backend(x->e);
  s->exe[s->n_exe++] = x;
  *out = x;
  return 0;
}

static void free_outs(stage *t, int phase, int nout) {
  if (t->out[phase])
    for (int i = 0; i < nout; i++) hj_buffer_destroy(t->out[phase][i]);
  free(t->out[phase]);
  t->out[phase] = NULL;
  t->out_for[phase] = NULL;
}

/* ---- the KV cache ------------------------------------------------------------------------- */

static int pow2_bucket(int need, int lo, int hi) {
  int b = lo;
  while (b < need) b *= 2;
  return b < hi ? b : hi;
}

/* Makes the cache hold at least |need| entries (keeping positions 0..len-1). With |fit|
   (a prefill, which replaces the whole cache), a larger cache is also made |need|'s
   bucket again: a decode step reads the whole bucket (the attention masks what lies past
   the position), so a short prompt after a long one would otherwise read the long one's
   cache on every step (|fit| needs len 0: nothing is kept). */
static int cache_reserve(gpt2_session *s, int need, bool fit, gpt2_err *err) {
  const int L = s->cfg.L, NH = s->cfg.NH, hs = s->cfg.C / NH, len = s->len;
  // A cache that is small at full length (it stays in the last-level cache) is made full
  // length at once: one decode compile instead of one per bucket.
  double full = 8.0 * L * s->cfg.C * s->cfg.max_T;
  int Tc = full <= GPT2_SMALL_CACHE ? s->cfg.max_T : pow2_bucket(need, 64, s->cfg.max_T);
  if (Tc == s->Tc || (Tc < s->Tc && !fit)) return 0; // already that bucket, or bigger
  for (int l = 0; l < L; l++) {
    hj_buffer_t *k, *v;
    if (hj_buffer_create(s->ctx, HJ_F32, HJ_SHAPE(NH, hs, Tc), &k)) return hj_fail(s, err, "KV cache");
    if (hj_buffer_create(s->ctx, HJ_F32, HJ_SHAPE(NH, Tc, hs), &v)) {
      hj_buffer_destroy(k);
      return hj_fail(s, err, "KV cache");
    }
    if (s->kc[l]) {
      const float *ok = hj_buffer_host_ptr(s->kc[l]), *ov = hj_buffer_host_ptr(s->vc[l]);
      float *nk = hj_buffer_host_ptr(k), *nv = hj_buffer_host_ptr(v);
      for (int r = 0; r < NH * hs; r++) memcpy(nk + (size_t)r * Tc, ok + (size_t)r * s->Tc, 4 * (size_t)len);
      for (int h = 0; h < NH; h++)
        memcpy(nv + (size_t)h * Tc * hs, ov + (size_t)h * s->Tc * hs, 4 * (size_t)len * hs);
      hj_buffer_destroy(s->kc[l]);
      hj_buffer_destroy(s->vc[l]);
    }
    s->kc[l] = k;
    s->vc[l] = v;
  }
  s->Tc = Tc;
  return 0;
}

/* Prefill outputs k (NH, hs, T), v (NH, T, hs) of layer l (T: the bucket, or n when the
   JIT cut them to the real rows): rows 0..n-1 into the cache. */
static void cache_put_rows(gpt2_session *s, int l, const hj_buffer_t *kb, const hj_buffer_t *vb,
                           int n) {
  const int NH = s->cfg.NH, hs = s->cfg.C / NH, Tc = s->Tc;
  const int64_t T = hj_buffer_shape(kb).dims[2];
  const float *k = hj_buffer_host_ptr((hj_buffer_t *)kb), *v = hj_buffer_host_ptr((hj_buffer_t *)vb);
  float *ck = hj_buffer_host_ptr(s->kc[l]), *cv = hj_buffer_host_ptr(s->vc[l]);
  for (int r = 0; r < NH * hs; r++) memcpy(ck + (size_t)r * Tc, k + (size_t)r * T, 4 * (size_t)n);
  for (int h = 0; h < NH; h++)
    memcpy(cv + (size_t)h * Tc * hs, v + (size_t)h * T * hs, 4 * (size_t)n * hs);
}

/* ---- verify output --------------------------------------------------------------------- */

static int mkdir_ok(const char *p) { return mkdir(p, 0777) == 0 || errno == EEXIST ? 0 : -1; }

/* DIR/step_K/NAME.npy from |rows| x |cols| floats (rows 0: a vector of |cols|). */
static int verify_write(gpt2_session *s, const char *name, const float *data, int64_t rows,
                        int64_t cols, gpt2_err *err) {
  char path[4096];
  snprintf(path, sizeof path, "%s/step_%d", s->o.verify_dir, s->step);
  if (mkdir_ok(s->o.verify_dir) || mkdir_ok(path))
    return gpt2_errf(err, "--verify: cannot make %s: %s", path, strerror(errno));
  snprintf(path, sizeof path, "%s/step_%d/%s.npy", s->o.verify_dir, s->step, name);
  hj_buffer_t *b;
  hj_shape_t sh = rows ? HJ_SHAPE(rows, cols) : HJ_SHAPE(cols);
  if (hj_buffer_from_host(s->ctx, HJ_F32, sh, data, &b)) return hj_fail(s, err, path);
  hj_status st = hj_buffer_write_npy(b, path);
  hj_buffer_destroy(b);
  return st ? hj_fail(s, err, path) : 0;
}

int gpt2_session_write_ids(gpt2_session *s, const int32_t *ids, int n, gpt2_err *err) {
  if (!s->o.verify_dir) return 0;
  char path[4096];
  snprintf(path, sizeof path, "%s/ids.npy", s->o.verify_dir);
  if (mkdir_ok(s->o.verify_dir))
    return gpt2_errf(err, "--verify: cannot make %s: %s", s->o.verify_dir, strerror(errno));
  hj_buffer_t *b;
  if (hj_buffer_from_host(s->ctx, HJ_S32, HJ_SHAPE(n), ids, &b)) return hj_fail(s, err, path);
  hj_status st = hj_buffer_write_npy(b, path);
  hj_buffer_destroy(b);
  return st ? hj_fail(s, err, path) : 0;
}

/* ---- running a step ----------------------------------------------------------------------- */

/* Runs every stage of |phase| with n rows (prefill bucket T, real rows nreal) or one row at
   position pos (decode, cache bucket s->Tc); *logits on success. */
static int run_stages(gpt2_session *s, gpt2_phase phase, int T, int nreal, hj_buffer_t *ids,
                      const float **logits, gpt2_err *err) {
  hj_buffer_t *x = NULL;
  for (int i = 0; i < s->n_st; i++) {
    stage *t = &s->st[i];
    const bool jit = phase == GPT2_PREFILL && s->o.prefill_jit;
    gpt2_spec sp = {.phase = phase, .n = phase == GPT2_DECODE ? 1 : jit ? s->cfg.max_T : T,
                    .dyn_rows = jit,
                    .Tc = phase == GPT2_DECODE && t->nb ? s->Tc : 0, .n_blocks = t->nb,
                    .embed = t->embed, .head = t->head, .verify = s->o.verify_dir != NULL,
                    .lm_head_t = t->head && s->lm_head, .lm_head_bf16 = t->head && s->lm_head_bf16,
                    .lm_head_panel = {t->head ? s->lm_head_panel[0] : 0, t->head ? s->lm_head_panel[1] : 0}};
    const exe_entry *x_e = NULL;
    if (get_exe(s, &sp, &x_e, err)) return -1;
    const gpt2_sig *g = &x_e->sig;
    if (t->out_for[phase] != x_e) {
      free_outs(t, phase, t->out_for[phase] ? t->out_for[phase]->sig.nout : 0);
      t->out[phase] = calloc((size_t)g->nout, sizeof *t->out[phase]);
      if (!t->out[phase]) return gpt2_errf(err, "out of memory");
      t->out_for[phase] = x_e;
    }
    hj_buffer_t *in[g->nin];
    in[g->x_in] = t->embed ? ids : x;
    in[g->pos] = s->pos;
    if (g->wte >= 0) in[g->wte] = s->wte;
    if (g->wpe >= 0) in[g->wpe] = s->wpe;
    if (g->lnfw >= 0) in[g->lnfw] = s->lnfw, in[g->lnfb] = s->lnfb;
    if (g->lm_head >= 0) in[g->lm_head] = s->lm_head;
    for (int b = 0; b < t->nb; b++) {
      for (int j = 0; j < GPT2_LAYER_PARAMS; j++)
        in[g->layer0 + GPT2_LAYER_PARAMS * b + j] = s->lw[(t->l0 + b) * GPT2_LAYER_PARAMS + j];
      if (phase == GPT2_DECODE) {
        in[g->cache0 + 2 * b] = s->kc[t->l0 + b];
        in[g->cache0 + 2 * b + 1] = s->vc[t->l0 + b];
      }
    }
    hj_buffer_t **o = t->out[phase];
    if (phase == GPT2_DECODE)
      for (int b = 0; b < t->nb; b++) // donated: updated in place
        o[g->kv0 + 2 * b] = s->kc[t->l0 + b], o[g->kv0 + 2 * b + 1] = s->vc[t->l0 + b];
    hj_status rs;
    if (jit) { // the JIT returns outputs at the real size: new buffers every call
      for (int j = 0; j < g->nout; j++) {
        hj_buffer_destroy(o[j]);
        o[j] = NULL;
      }
      rs = hj_jit_call(x_e->jit, in, g->nin, o, g->nout);
      hj_jit_stats_t js;
      if (!hj_jit_stats(x_e->jit, &js)) {
        double ms = js.trace_ms + js.compile_ms;
        s->stats.compile_s += (ms - x_e->jit_ms) / 1e3;
        ((exe_entry *)x_e)->jit_ms = ms;
      }
    } else {
      rs = hj_exec_run(x_e->e, in, g->nin, o, g->nout);
    }
    if (phase == GPT2_DECODE)
      for (int b = 0; b < t->nb; b++) o[g->kv0 + 2 * b] = o[g->kv0 + 2 * b + 1] = NULL;
    if (rs) {
      char what[64];
      snprintf(what, sizeof what, "running the %s graph", stage_name(&sp));
      return hj_fail(s, err, what);
    }
    if (phase == GPT2_PREFILL)
      for (int b = 0; b < t->nb; b++)
        cache_put_rows(s, t->l0 + b, o[g->kv0 + 2 * b], o[g->kv0 + 2 * b + 1], nreal);
    if (s->o.verify_dir) {
      const int C = s->cfg.C;
      if (g->emb >= 0 && verify_write(s, "emb", hj_buffer_host_ptr(o[g->emb]), nreal, C, err)) return -1;
      for (int b = 0; b < t->nb; b++) {
        char name[32];
        snprintf(name, sizeof name, "res_%d", t->l0 + b);
        if (verify_write(s, name, hj_buffer_host_ptr(o[g->res0 + b]), nreal, C, err)) return -1;
      }
    }
    x = o[g->main_out];
  }
  *logits = hj_buffer_host_ptr(x);
  if (s->o.verify_dir && verify_write(s, "logits", *logits, 0, s->cfg.V, err)) return -1;
  s->step++;
  return 0;
}

int gpt2_session_prefill(gpt2_session *s, const int32_t *ids, int n, const float **logits,
                         gpt2_err *err) {
  const gpt2_config *c = &s->cfg;
  if (n < 1 || n > c->max_T)
    return gpt2_errf(err, "prefill: %d tokens, the model's context is 1..%d", n, c->max_T);
  for (int i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= c->V)
      return gpt2_errf(err, "prefill: token id %d out of range [0, %d)", (int)ids[i], c->V);
  double t0 = now_s(), c0 = s->stats.compile_s;
  // The ids at their real length for the JIT (it pads), else padded to the bucket here.
  int T = s->o.prefill_jit ? n : pow2_bucket(n, 16, c->max_T);
  s->len = 0;
  if (cache_reserve(s, n < c->max_T ? n + 1 : n, true, err)) return -1;
  int32_t *pad = calloc((size_t)T, sizeof *pad);
  if (!pad) return gpt2_errf(err, "out of memory");
  memcpy(pad, ids, sizeof *pad * (size_t)n);
  hj_buffer_t *idb;
  hj_status st = hj_buffer_from_host(s->ctx, HJ_S32, HJ_SHAPE(T), pad, &idb);
  free(pad);
  if (st) return hj_fail(s, err, "prefill ids");
  *(int32_t *)hj_buffer_host_ptr(s->pos) = n - 1;
  int rc = run_stages(s, GPT2_PREFILL, T, n, idb, logits, err);
  hj_buffer_destroy(idb);
  if (rc) return -1;
  s->len = n;
  s->stats.prefill_s += now_s() - t0 - (s->stats.compile_s - c0);
  s->stats.prefill_tokens += n;
  return 0;
}

int gpt2_session_decode(gpt2_session *s, int32_t id, const float **logits, gpt2_err *err) {
  const gpt2_config *c = &s->cfg;
  if (s->len >= c->max_T)
    return gpt2_errf(err, "decode: the context is full (%d positions)", c->max_T);
  if (id < 0 || id >= c->V)
    return gpt2_errf(err, "decode: token id %d out of range [0, %d)", (int)id, c->V);
  double t0 = now_s(), c0 = s->stats.compile_s;
  if (cache_reserve(s, s->len + 1, false, err)) return -1;
  *(int32_t *)hj_buffer_host_ptr(s->id1) = id;
  *(int32_t *)hj_buffer_host_ptr(s->pos) = s->len;
  if (run_stages(s, GPT2_DECODE, 1, 1, s->id1, logits, err)) return -1;
  s->len++;
  s->stats.decode_s += now_s() - t0 - (s->stats.compile_s - c0);
  s->stats.decode_tokens++;
  return 0;
}

int gpt2_session_length(const gpt2_session *s) { return s->len; }

void gpt2_session_rewind(gpt2_session *s, int n) {
  if (n >= 0 && n < s->len) s->len = n;
}

void gpt2_session_get_stats(const gpt2_session *s, gpt2_session_stats *out) {
  *out = s->stats;
  out->cache_entries = s->Tc;
  for (int i = 0; i < s->n_exe; i++) { // the prefill JITs' own counts
    hj_jit_stats_t js;
    if (!s->exe[i]->jit || hj_jit_stats(s->exe[i]->jit, &js)) continue;
    out->compiles += (int)(js.compiles - js.disk_hits);
    out->disk_hits += (int)js.disk_hits;
    out->mem_hits += (int)js.memory_hits;
  }
}

/* ---- create / free ---------------------------------------------------------------------- */

int gpt2_session_create(const gpt2_weights *w, const gpt2_session_opts *o, gpt2_session **out,
                        gpt2_err *err) {
  *out = NULL;
  gpt2_session *s = calloc(1, sizeof *s);
  if (!s) return gpt2_errf(err, "out of memory");
  s->w = w;
  s->cfg = w->cfg;
  gpt2_session_opts_init(&s->o);
  if (o) s->o = *o;
  hj_ctx_options_t co;
  hj_ctx_options_init(&co);
  co.backend = s->o.backend;
  co.num_threads = s->o.num_threads;
  int rc = -1;
  if (hj_ctx_create(&co, &s->ctx)) {
    gpt2_errf(err, "cannot make an hlojit context (backend %d)", (int)s->o.backend);
    goto done;
  }
  s->kc = calloc((size_t)s->cfg.L, sizeof *s->kc);
  s->vc = calloc((size_t)s->cfg.L, sizeof *s->vc);
  if (!s->kc || !s->vc) {
    gpt2_errf(err, "out of memory");
    goto done;
  }
  if (hj_buffer_create(s->ctx, HJ_S32, HJ_SHAPE(1), &s->id1) ||
      hj_buffer_create(s->ctx, HJ_S32, HJ_SCALAR, &s->pos)) {
    hj_fail(s, err, "buffers");
    goto done;
  }
  for (int64_t b = 16; b < s->cfg.max_T && s->n_buckets < 31; b *= 2) s->buckets[s->n_buckets++] = b;
  s->buckets[s->n_buckets++] = s->cfg.max_T;
  s->backend = resolved_backend(s);
  if (load_weights(s, err) || make_stages(s, err)) goto done;
  rc = 0;
done:
  if (rc) gpt2_session_free(s);
  else *out = s;
  return rc;
}

void gpt2_session_free(gpt2_session *s) {
  if (!s) return;
  for (int i = 0; s->st && i < s->n_st; i++)
    for (int p = 0; p < 2; p++)
      free_outs(&s->st[i], p, s->st[i].out_for[p] ? s->st[i].out_for[p]->sig.nout : 0);
  free(s->st);
  for (int i = 0; i < s->n_exe; i++) {
    hj_exec_destroy(s->exe[i]->e);
    hj_jit_destroy(s->exe[i]->jit);
    free(s->exe[i]->decl);
    free(s->exe[i]);
  }
  free(s->exe);
  for (int l = 0; l < s->cfg.L; l++) {
    if (s->kc) hj_buffer_destroy(s->kc[l]);
    if (s->vc) hj_buffer_destroy(s->vc[l]);
  }
  free(s->kc);
  free(s->vc);
  if (s->lw)
    for (int i = 0; i < s->cfg.L * GPT2_LAYER_PARAMS; i++) hj_buffer_destroy(s->lw[i]);
  free(s->lw);
  free(s->wv_layers);
  hj_buffer_destroy(s->wte);
  hj_buffer_destroy(s->wpe);
  hj_buffer_destroy(s->lnfw);
  hj_buffer_destroy(s->lnfb);
  hj_buffer_destroy(s->lm_head);
  hj_buffer_destroy(s->id1);
  hj_buffer_destroy(s->pos);
  hj_ctx_destroy(s->ctx);
  free(s);
}
