/* api.c — the public API around the IR: contexts, status and dtype names, modules (parse,
   print, verify, flattened signature), buffers and .npy I/O, compile and run, and the
   copy of a graph's module that hj_graph_to_module and hj_compile hand out.

   Executables: HJ_BACKEND_CPU compiles through backends/cpu/cpu_backend.c (a failure is
   the caller's error); HJ_BACKEND_AUTO means the CPU backend too (no CUDA backend yet), and
   when that fails (LLVM cannot start, an op it cannot run) it falls back to the reference
   evaluator and keeps the reason (hj_exec_stats().note); HJ_BACKEND_INTERP is the evaluator
   (hlo_eval_module); CUDA fails with HJ_ERR_UNSUPPORTED. The single-header build
   (all.c, HLOJIT_IMPLEMENTATION) does not contain the CPU backend yet: AUTO gets the
   evaluator there, saying so, and CPU fails.

   Flattening: entry parameters and results that are tuples are passed as one buffer per
   leaf, depth first. A run views the caller's input buffers as literals without copying
   (the evaluator never writes its arguments) and copies the result leaves out.

   Graph module copy: the graph's own module lists computations in creation order, entry
   first. The copy walks the call graph from the entry, depth first, and emits each
   computation after everything it calls, so callees precede callers and the entry comes
   last, as XLA prints modules (unused sub-graphs are left out). Instruction ids and names
   are kept; the entry root is the single output or a new tuple of the outputs. */
#include "internal.h"
#include <errno.h>
#include <stdlib.h>
#include <time.h>

/* The single-header build (hlojit.h with HLOJIT_IMPLEMENTATION includes all.c, which
   defines HLOJIT_IMPLEMENTATION_DONE first) has no CPU backend yet. */
#ifdef HLOJIT_IMPLEMENTATION_DONE
#define API_HAVE_CPU 0
#else
#define API_HAVE_CPU 1
#endif

struct hj_exec {
  hj_ctx_t *ctx;
  hlo_module *m;
  bool owns;                          /* made by hj_compile: freed with the executable */
  hj_backend_t backend;
  const hlo_shape **ins, **outs;      /* stb_ds: flattened leaves, pointing into m */
  cpu_exec *cpu;                      /* HJ_BACKEND_CPU: the compiled program */
  double compile_ms;
  char note[512];                     /* why AUTO fell back to the evaluator */
};

/* ---- context ------------------------------------------------------------------------- */

void hj_ctx_options_init(hj_ctx_options_t *opt) {
  if (!opt) return;
  memset(opt, 0, sizeof *opt);
  opt->backend = HJ_BACKEND_AUTO;
}

hj_status hj_ctx_create(const hj_ctx_options_t *opt, hj_ctx_t **out) {
  if (!out) return HJ_ERR_INVALID_ARG;
  *out = NULL;
  hj_ctx_options_t o;
  hj_ctx_options_init(&o);
  if (opt) o = *opt;
  if ((unsigned)o.backend >= HJ_BACKEND_COUNT || o.num_threads < 0 ||
      (!o.allocator.alloc != !o.allocator.free))
    return HJ_ERR_INVALID_ARG;
  hj_ctx_t tmp = { .opt = o };
  hj_ctx_t *ctx = hj__alloc(&tmp, sizeof *ctx);
  if (!ctx) return HJ_ERR_OOM;
  memset(ctx, 0, sizeof *ctx);
  ctx->opt = o;
  if (!ctx->opt.dump_dir) ctx->opt.dump_dir = getenv("HLOJIT_DUMP_TO");
  *out = ctx;
  return HJ_OK;
}

void hj_ctx_destroy(hj_ctx_t *ctx) {
  if (!ctx) return;
#if API_HAVE_CPU
  cpu_backend_ctx_free(ctx);
#endif
  hj__free(ctx, ctx);
}

const char *hj_ctx_error(const hj_ctx_t *ctx) { return ctx ? ctx->err : ""; }

void hj_ctx_clear_error(hj_ctx_t *ctx) {
  if (!ctx) return;
  ctx->err[0] = 0;
  ctx->last = HJ_OK;
}

const char *hj_status_name(hj_status s) {
  static const char *names[HJ_STATUS_COUNT] = {
    "HJ_OK", "HJ_ERR_INVALID_ARG", "HJ_ERR_SHAPE", "HJ_ERR_PARSE", "HJ_ERR_UNSUPPORTED",
    "HJ_ERR_OOM", "HJ_ERR_IO", "HJ_ERR_BACKEND", "HJ_ERR_INTERNAL",
  };
  return (unsigned)s < HJ_STATUS_COUNT ? names[s] : "HJ_ERR_UNKNOWN";
}

const char *hj_dtype_name(hj_dtype_t t) {
  return (unsigned)t < HJ_DTYPE_COUNT ? hlo_type_name((hlo_type)t) : NULL;
}

size_t hj_dtype_size(hj_dtype_t t) {
  return (unsigned)t < HJ_DTYPE_COUNT ? (size_t)hlo_type_size((hlo_type)t) : 0;
}

int64_t hj_shape_numel(hj_shape_t s) {
  if (s.rank < 0 || s.rank > HJ_MAX_RANK) return 0;
  int64_t n = 1;
  for (int i = 0; i < s.rank; i++) n *= s.dims[i] < 0 ? -s.dims[i] : s.dims[i];
  return n;
}

/* ---- modules -------------------------------------------------------------------------- */

hj_status hj_module_parse(hj_ctx_t *ctx, const char *text, size_t len, const char *filename,
                          hj_module_t **out) {
  if (!out) return hj__err(ctx, HJ_ERR_INVALID_ARG, "hj_module_parse: out is NULL");
  *out = NULL;
  if (!ctx) return HJ_ERR_INVALID_ARG;
  if (!text) return hj__err(ctx, HJ_ERR_INVALID_ARG, "hj_module_parse: text is NULL");
  hlo_module *m = NULL;
  hj_status st = hlo_parse_module(ctx, text, len, filename, &m);
  if (st == HJ_OK) st = hlo_verify_module(m);
  if (st != HJ_OK) {
    hlo_module_free(m);
    return st;
  }
  *out = m;
  return HJ_OK;
}

hj_status hj_module_parse_file(hj_ctx_t *ctx, const char *path, hj_module_t **out) {
  if (!out) return hj__err(ctx, HJ_ERR_INVALID_ARG, "hj_module_parse_file: out is NULL");
  *out = NULL;
  if (!ctx) return HJ_ERR_INVALID_ARG;
  if (!path) return hj__err(ctx, HJ_ERR_INVALID_ARG, "hj_module_parse_file: path is NULL");
  FILE *f = fopen(path, "rb");
  if (!f) return hj__err(ctx, HJ_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
  char *text = NULL;
  char chunk[65536];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) memcpy(arraddnptr(text, n), chunk, n);
  bool bad = ferror(f);
  fclose(f);
  hj_status st = bad ? hj__err(ctx, HJ_ERR_IO, "cannot read '%s'", path)
                     : hj_module_parse(ctx, text ? text : "", arrlenu(text), path, out);
  arrfree(text);
  return st;
}

hj_status hj_module_print(const hj_module_t *m, char **text) {
  if (!text) return hj__err(m ? m->ctx : NULL, HJ_ERR_INVALID_ARG, "hj_module_print: text is NULL");
  *text = NULL;
  if (!m) return HJ_ERR_INVALID_ARG;
  return hlo_print_module(m, text);
}

hj_status hj_module_verify(hj_module_t *m) { return m ? hlo_verify_module(m) : HJ_ERR_INVALID_ARG; }

void hj_module_destroy(hj_module_t *m) { hlo_module_free(m); }

/* Flattened leaves of the entry parameters (|outputs| false) or of the root. */
static const hlo_shape **api_leaves(const hlo_module *m, bool outputs) {
  const hlo_shape **v = NULL;
  const hlo_comp *e = m ? m->entry : NULL;
  if (!e) return NULL;
  if (outputs) {
    if (e->root) hlo_shape_leaves(&e->root->shape, &v);
  } else {
    for (ptrdiff_t i = 0; i < arrlen(e->params); i++) hlo_shape_leaves(&e->params[i]->shape, &v);
  }
  return v;
}

static int api_count(const hlo_module *m, bool outputs) {
  const hlo_shape **v = api_leaves(m, outputs);
  int n = (int)arrlen(v);
  arrfree(v);
  return n;
}

int hj_module_num_inputs(const hj_module_t *m) { return api_count(m, false); }
int hj_module_num_outputs(const hj_module_t *m) { return api_count(m, true); }

static hj_status api_signature(const hj_module_t *m, bool outputs, int i, hj_dtype_t *t, hj_shape_t *s) {
  const char *fn = outputs ? "hj_module_output" : "hj_module_input";
  if (!m) return HJ_ERR_INVALID_ARG;
  const hlo_shape **v = api_leaves(m, outputs);
  int n = (int)arrlen(v);
  hj_status st = HJ_OK;
  if (i < 0 || i >= n) {
    st = hj__err(m->ctx, HJ_ERR_INVALID_ARG, "%s: index %d out of range (module '%s' has %d)", fn, i,
                 m->name, n);
  } else if (!hlo_shape_is_array(v[i])) {
    st = hj__err(m->ctx, HJ_ERR_UNSUPPORTED, "%s: leaf %d is a token", fn, i);
  } else {
    if (t) *t = (hj_dtype_t)v[i]->type;
    if (s) *s = hj__shape_from_hlo(v[i]);
  }
  arrfree(v);
  return st;
}

hj_status hj_module_input(const hj_module_t *m, int i, hj_dtype_t *t, hj_shape_t *s) {
  return api_signature(m, false, i, t, s);
}
hj_status hj_module_output(const hj_module_t *m, int i, hj_dtype_t *t, hj_shape_t *s) {
  return api_signature(m, true, i, t, s);
}

/* ---- buffers -------------------------------------------------------------------------- */

static hj_status api_buffer_new(hj_ctx_t *ctx, const char *fn, hj_dtype_t t, hj_shape_t s,
                                hj_buffer_t **out) {
  *out = NULL;
  if ((unsigned)t >= HJ_DTYPE_COUNT || s.rank < 0 || s.rank > HJ_MAX_RANK)
    return hj__err(ctx, HJ_ERR_INVALID_ARG, "%s: invalid dtype %d or rank %d", fn, (int)t, s.rank);
  int64_t n = 1, lim = INT64_MAX / 8;
  for (int i = 0; i < s.rank; i++) {
    int64_t d = s.dims[i] < 0 ? -s.dims[i] : s.dims[i];
    if (d > 0 && n > lim / d)
      return hj__err(ctx, HJ_ERR_INVALID_ARG, "%s: shape too large", fn);
    n *= d;
  }
  hj_buffer_t *b = hj__alloc(ctx, sizeof *b);
  size_t nb = (size_t)n * hj_dtype_size(t);
  void *data = b ? hj__alloc(ctx, nb) : NULL;
  if (!data) {
    hj__free(ctx, b);
    return hj__err(ctx, HJ_ERR_OOM, "%s: out of memory for %zu bytes", fn, nb);
  }
  *b = (hj_buffer_t){ .ctx = ctx, .dtype = t, .shape = s, .nbytes = nb, .data = data };
  *out = b;
  return HJ_OK;
}

hj_status hj_buffer_create(hj_ctx_t *ctx, hj_dtype_t t, hj_shape_t s, hj_buffer_t **out) {
  if (!out) return hj__err(ctx, HJ_ERR_INVALID_ARG, "hj_buffer_create: out is NULL");
  *out = NULL;
  if (!ctx) return HJ_ERR_INVALID_ARG;
  hj_status st = api_buffer_new(ctx, "hj_buffer_create", t, s, out);
  if (st == HJ_OK) memset((*out)->data, 0, (*out)->nbytes);
  return st;
}

hj_status hj_buffer_from_host(hj_ctx_t *ctx, hj_dtype_t t, hj_shape_t s, const void *data,
                              hj_buffer_t **out) {
  if (!out) return hj__err(ctx, HJ_ERR_INVALID_ARG, "hj_buffer_from_host: out is NULL");
  *out = NULL;
  if (!ctx) return HJ_ERR_INVALID_ARG;
  if (!data) return hj__err(ctx, HJ_ERR_INVALID_ARG, "hj_buffer_from_host: data is NULL");
  hj_status st = api_buffer_new(ctx, "hj_buffer_from_host", t, s, out);
  if (st == HJ_OK) memcpy((*out)->data, data, (*out)->nbytes);
  return st;
}

void *hj_buffer_host_ptr(hj_buffer_t *b) { return b ? b->data : NULL; }

hj_status hj_buffer_copy_to_host(const hj_buffer_t *b, void *dst, size_t nbytes) {
  if (!b) return HJ_ERR_INVALID_ARG;
  if (!dst) return hj__err(b->ctx, HJ_ERR_INVALID_ARG, "hj_buffer_copy_to_host: dst is NULL");
  if (nbytes < b->nbytes)
    return hj__err(b->ctx, HJ_ERR_INVALID_ARG, "hj_buffer_copy_to_host: %zu bytes given, buffer has %zu",
                   nbytes, b->nbytes);
  memcpy(dst, b->data, b->nbytes);
  return HJ_OK;
}

hj_dtype_t hj_buffer_dtype(const hj_buffer_t *b) { return b ? b->dtype : HJ_DTYPE_COUNT; }
hj_shape_t hj_buffer_shape(const hj_buffer_t *b) { return b ? b->shape : (hj_shape_t){ 0 }; }
size_t hj_buffer_nbytes(const hj_buffer_t *b) { return b ? b->nbytes : 0; }

void hj_buffer_destroy(hj_buffer_t *b) {
  if (!b) return;
  hj__free(b->ctx, b->data);
  hj__free(b->ctx, b);
}

static hlo_shape api_buffer_hlo_shape(const hj_buffer_t *b) {
  hlo_shape s;
  hj__shape_to_hlo(b->dtype, b->shape, &s);
  return s;
}

hj_status hj_buffer_read_npy(hj_ctx_t *ctx, const char *path, hj_buffer_t **out) {
  if (!out) return hj__err(ctx, HJ_ERR_INVALID_ARG, "hj_buffer_read_npy: out is NULL");
  *out = NULL;
  if (!ctx) return HJ_ERR_INVALID_ARG;
  if (!path) return hj__err(ctx, HJ_ERR_INVALID_ARG, "hj_buffer_read_npy: path is NULL");
  hlo_literal *l = NULL;
  hj_status st = hlo_npy_read(ctx, path, &l);
  if (st != HJ_OK) return st;
  if (!hlo_shape_is_array(&l->shape) || l->shape.rank > HJ_MAX_RANK) {
    st = hj__err(ctx, HJ_ERR_PARSE, "'%s': not an array hlojit can hold", path);
  } else if ((st = api_buffer_new(ctx, "hj_buffer_read_npy", (hj_dtype_t)l->shape.type,
                                  hj__shape_from_hlo(&l->shape), out)) == HJ_OK) {
    memcpy((*out)->data, l->data, (*out)->nbytes);
  }
  hlo_literal_free(l);
  return st;
}

hj_status hj_buffer_write_npy(const hj_buffer_t *b, const char *path) {
  if (!b) return HJ_ERR_INVALID_ARG;
  if (!path) return hj__err(b->ctx, HJ_ERR_INVALID_ARG, "hj_buffer_write_npy: path is NULL");
  hlo_shape s = api_buffer_hlo_shape(b);
  hlo_literal l = hlo_literal_view(&s, b->data);
  return hlo_npy_write(b->ctx, path, &l);
}

/* ---- the graph's module, copied in callee-first order ----------------------------------- */

typedef struct {
  hlo_module *dst;
  const hlo_comp **src_comps;         /* stb_ds, parallel to dst_comps */
  hlo_comp **dst_comps;
  hlo_instr **map;                    /* source instruction id -> copy */
  hj_status st;
} api_copy;

static hlo_comp *api_copied(api_copy *cp, const hlo_comp *c) {
  for (ptrdiff_t i = 0; i < arrlen(cp->src_comps); i++)
    if (cp->src_comps[i] == c) return cp->dst_comps[i];
  return NULL;
}

static hlo_literal *api_copy_literal(hlo_module *m, const hlo_literal *l) {
  hlo_literal *r = hlo_alloc(m, sizeof *r);
  if (!r) return NULL;
  *r = *l;
  r->owned = false;
  r->shape = hlo_shape_dup(m, &l->shape);
  if (l->data && !(r->data = hlo_alloc(m, (size_t)l->nbytes))) return NULL;
  if (l->data) memcpy(r->data, l->data, (size_t)l->nbytes);
  if (l->nelems > 0) {
    if (!(r->elems = hlo_alloc(m, sizeof(hlo_literal *) * (size_t)l->nelems))) return NULL;
    for (int i = 0; i < l->nelems; i++)
      if (!(r->elems[i] = api_copy_literal(m, l->elems[i]))) return NULL;
  }
  return r;
}

/* Attributes of |s| onto its copy |d| (arrays into the destination arena). */
static bool api_copy_attrs(api_copy *cp, const hlo_instr *s, hlo_instr *d) {
  hlo_instr keep = *d;
  *d = *s;
  d->name = keep.name;
  d->parent = keep.parent;
  d->operands = keep.operands;
  d->shape = keep.shape;
  d->is_root = false;
  hlo_module *m = cp->dst;
  if (!hlo_instr_dup_lists(m, d)) return false;
  if (s->literal && !(d->literal = api_copy_literal(m, s->literal))) return false;
  d->calls = NULL;
  d->ncalls = 0;
  hlo_comp *calls[64];
  for (int i = 0; i < s->ncalls && i < 64; i++) calls[i] = api_copied(cp, s->calls[i]);
  hlo_instr_set_calls(d, calls, s->ncalls < 64 ? s->ncalls : 64);
  return true;
}

static hlo_comp *api_copy_comp(api_copy *cp, const hlo_comp *c);

static bool api_copy_instr(api_copy *cp, hlo_comp *dc, const hlo_instr *s) {
  for (int i = 0; i < s->ncalls; i++)
    if (!api_copy_comp(cp, s->calls[i])) return false;
  hlo_instr *ops[256], **opv = s->noperands <= 256 ? ops : malloc(sizeof(hlo_instr *) * (size_t)s->noperands);
  if (!opv) return false;
  for (int i = 0; i < s->noperands; i++) opv[i] = cp->map[s->operands[i]->id];
  hlo_instr *d = hlo_instr_new(dc, s->op, s->name, &s->shape, opv, s->noperands);
  if (opv != ops) free(opv);
  if (!d || !api_copy_attrs(cp, s, d)) return false;
  cp->map[s->id] = d;
  if (s->op == HLO_OP_PARAMETER) {
    if (arrlen(dc->params) <= s->index) arrsetlen(dc->params, s->index + 1);
    dc->params[s->index] = d;
  }
  return true;
}

/* Copies |c| after everything it calls; returns the copy (NULL on OOM or a cycle). */
static hlo_comp *api_copy_comp(api_copy *cp, const hlo_comp *c) {
  for (ptrdiff_t i = 0; i < arrlen(cp->src_comps); i++)
    if (cp->src_comps[i] == c) {
      if (!cp->dst_comps[i]) goto fail; /* a call cycle: the builder never makes one */
      return cp->dst_comps[i];
    }
  if (cp->st != HJ_OK) return NULL;
  hlo_comp *dc;
  arrput(cp->src_comps, c);
  arrput(cp->dst_comps, NULL); /* in progress */
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++)
    for (int k = 0; k < c->instrs[i]->ncalls; k++)
      if (!api_copy_comp(cp, c->instrs[i]->calls[k])) goto fail;
  if (!(dc = hlo_comp_new(cp->dst, c->name))) goto fail;
  for (ptrdiff_t i = 0; i < arrlen(cp->src_comps); i++)
    if (cp->src_comps[i] == c) cp->dst_comps[i] = dc;
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++)
    if (!api_copy_instr(cp, dc, c->instrs[i])) goto fail;
  if (c->root) {
    dc->root = cp->map[c->root->id];
    dc->root->is_root = true;
  }
  return dc;
fail:
  if (cp->st == HJ_OK)
    cp->st = hj__err(cp->dst->ctx, HJ_ERR_INTERNAL, "cannot copy computation '%s' (out of memory or a call cycle)", c->name);
  return NULL;
}

/* The entry's root in the copy: its single output, or a tuple of the outputs. */
static hj_status api_entry_root(api_copy *cp, hj_graph_t *g, hlo_comp *e) {
  int n = (int)arrlen(g->outputs);
  if (n == 1) {
    e->root = cp->map[g->outputs[0]->id];
  } else {
    hlo_instr **ops = NULL;
    hlo_shape s = { .type = HLO_TUPLE, .ntuple = n };
    s.tuple = hlo_alloc(cp->dst, sizeof(hlo_shape) * (size_t)n);
    for (int i = 0; i < n && s.tuple; i++) {
      arrput(ops, cp->map[g->outputs[i]->id]);
      s.tuple[i] = ops[i]->shape;
    }
    e->root = s.tuple ? hlo_instr_new(e, HLO_OP_TUPLE, NULL, &s, ops, n) : NULL;
    arrfree(ops);
    if (!e->root) return hj__err(g->ctx, HJ_ERR_OOM, "out of memory making the output tuple");
  }
  e->root->is_root = true;
  return HJ_OK;
}

hj_status hj__graph_module(hj_graph_t *g, hlo_module **out) {
  *out = NULL;
  if (g->status != HJ_OK) return hj__err(g->ctx, g->status, "%s", g->err);
  if (arrlen(g->outputs) == 0)
    return hj__err(g->ctx, HJ_ERR_INVALID_ARG, "graph '%s' has no outputs (call hj_graph_output)", g->m->name);
  api_copy cp = { .dst = hlo_module_new(g->ctx, g->m->name) };
  if (!cp.dst) return HJ_ERR_OOM;
  cp.dst->next_id = g->m->next_id;
  cp.map = calloc((size_t)g->m->next_id + 1, sizeof(hlo_instr *));
  hlo_comp *e = cp.map ? api_copy_comp(&cp, g->comp) : NULL;
  hj_status st = !cp.map ? hj__err(g->ctx, HJ_ERR_OOM, "out of memory copying graph '%s'", g->m->name)
                         : cp.st;
  if (st == HJ_OK && e) {
    e->is_entry = true;
    cp.dst->entry = e;
    st = api_entry_root(&cp, g, e);
  }
  free(cp.map);
  arrfree(cp.src_comps);
  arrfree(cp.dst_comps);
  if (st != HJ_OK) {
    hlo_module_free(cp.dst);
    return st;
  }
  *out = cp.dst;
  return HJ_OK;
}

hj_status hj_graph_to_module(hj_graph_t *g, hj_module_t **out) {
  if (!out) return hj__err(g ? g->ctx : NULL, HJ_ERR_INVALID_ARG, "hj_graph_to_module: out is NULL");
  *out = NULL;
  if (!g) return HJ_ERR_INVALID_ARG;
  if (g->top != g)
    return hj__err(g->ctx, HJ_ERR_INVALID_ARG, "hj_graph_to_module: '%s' is a sub-graph", g->comp->name);
  return hj__graph_module(g, out);
}

/* ---- compile and run ------------------------------------------------------------------- */

/* Writes the module's text to $dump_dir/NAME.hlo; a dump that fails is not an error. */
static void api_dump(hj_ctx_t *ctx, const hlo_module *m) {
  if (!ctx->opt.dump_dir || !*ctx->opt.dump_dir) return;
  char *text = NULL, path[1024];
  hj_status last = ctx->last;
  char err[sizeof ctx->err];
  memcpy(err, ctx->err, sizeof err);
  if (hlo_print_module(m, &text) == HJ_OK) {
    snprintf(path, sizeof path, "%s/%s.hlo", ctx->opt.dump_dir, m->name);
    FILE *f = fopen(path, "wb");
    if (f) {
      fputs(text, f);
      fclose(f);
    }
  }
  free(text);
  ctx->last = last;
  memcpy(ctx->err, err, sizeof err);
}

static double api_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The CPU backend for |e| (AUTO or CPU). AUTO falls back to the evaluator on failure,
   keeping the reason in e->note and ctx->backend_note, and clearing the error. */
static hj_status api_compile_cpu(hj_ctx_t *ctx, hj_exec_t *e, bool automatic) {
#if API_HAVE_CPU
  hj_status st = cpu_backend_compile(ctx, e->m, &e->cpu);
  if (st == HJ_OK) {
    e->backend = HJ_BACKEND_CPU;
    return HJ_OK;
  }
  if (!automatic) return st;
  snprintf(e->note, sizeof e->note, "HJ_BACKEND_AUTO: the CPU backend failed (%s: %.400s); using the "
           "reference evaluator", hj_status_name(st), ctx->err);
#else
  if (!automatic)
    return hj__err(ctx, HJ_ERR_UNSUPPORTED, "the CPU backend is not part of the single-header build "
                   "yet: link build/libhlojit.a, or use HJ_BACKEND_INTERP");
  snprintf(e->note, sizeof e->note, "HJ_BACKEND_AUTO: the single-header build has no CPU backend; "
           "using the reference evaluator");
#endif
  snprintf(ctx->backend_note, sizeof ctx->backend_note, "%s", e->note);
  hj_ctx_clear_error(ctx);
  return HJ_OK;
}

static hj_status api_compile(hj_ctx_t *ctx, hlo_module *m, bool owns, hj_exec_t **out) {
  double t0 = api_now_ms();
  hj_backend_t b = ctx->opt.backend;
  if (b == HJ_BACKEND_CUDA)
    return hj__err(ctx, HJ_ERR_UNSUPPORTED, "the CUDA backend is not built yet: use HJ_BACKEND_CPU, "
                   "HJ_BACKEND_INTERP or AUTO");
  hj_status st = hlo_verify_module(m);
  if (st != HJ_OK) return st;
  if (!m->entry || !m->entry->root)
    return hj__err(ctx, HJ_ERR_INVALID_ARG, "module '%s' has no entry computation", m->name);
  hj_exec_t *e = hj__alloc(ctx, sizeof *e);
  if (!e) return hj__err(ctx, HJ_ERR_OOM, "out of memory creating an executable");
  *e = (hj_exec_t){ .ctx = ctx, .m = m, .owns = owns, .backend = HJ_BACKEND_INTERP };
  e->ins = api_leaves(m, false);
  e->outs = api_leaves(m, true);
  ctx->backend_note[0] = 0;
  if (b == HJ_BACKEND_CPU || b == HJ_BACKEND_AUTO) st = api_compile_cpu(ctx, e, b == HJ_BACKEND_AUTO);
  if (st != HJ_OK) {
    e->owns = false;
    hj_exec_destroy(e);
    return st;
  }
  api_dump(ctx, m);
  e->compile_ms = api_now_ms() - t0;
  *out = e;
  return HJ_OK;
}

hj_status hj_compile(hj_graph_t *g, hj_exec_t **out) {
  if (!out) return hj__err(g ? g->ctx : NULL, HJ_ERR_INVALID_ARG, "hj_compile: out is NULL");
  *out = NULL;
  if (!g) return HJ_ERR_INVALID_ARG;
  hlo_module *m;
  hj_status st = hj_graph_to_module(g, &m);
  if (st != HJ_OK) return st;
  if ((st = api_compile(g->ctx, m, true, out)) != HJ_OK) hlo_module_free(m);
  return st;
}

hj_status hj_compile_module(hj_ctx_t *ctx, hj_module_t *m, hj_exec_t **out) {
  if (!out) return hj__err(ctx, HJ_ERR_INVALID_ARG, "hj_compile_module: out is NULL");
  *out = NULL;
  if (!ctx) return HJ_ERR_INVALID_ARG;
  if (!m) return hj__err(ctx, HJ_ERR_INVALID_ARG, "hj_compile_module: module is NULL");
  return api_compile(ctx, m, false, out);
}

int hj_exec_num_inputs(const hj_exec_t *e) { return e ? (int)arrlen(e->ins) : 0; }
int hj_exec_num_outputs(const hj_exec_t *e) { return e ? (int)arrlen(e->outs) : 0; }
hj_backend_t hj_exec_backend(const hj_exec_t *e) { return e ? e->backend : HJ_BACKEND_COUNT; }

hj_status hj_exec_stats(const hj_exec_t *e, hj_exec_stats_t *out) {
  if (!e || !out) return HJ_ERR_INVALID_ARG;
  memset(out, 0, sizeof *out);
#if API_HAVE_CPU
  if (e->cpu) cpu_backend_stats(e->cpu, out);
#endif
  out->backend = e->backend;
  out->compile_ms = e->compile_ms;
  out->note = e->note;
  return HJ_OK;
}

void hj_exec_destroy(hj_exec_t *e) {
  if (!e) return;
#if API_HAVE_CPU
  cpu_backend_exec_free(e->cpu);
#endif
  arrfree(e->ins);
  arrfree(e->outs);
  if (e->owns) hlo_module_free(e->m);
  hj__free(e->ctx, e);
}

/* Does buffer |b| hold an array of leaf shape |s| (dynamic dims at their bound)? */
static bool api_fits(const hj_buffer_t *b, const hlo_shape *s) {
  if ((int)b->dtype != (int)s->type || b->shape.rank != s->rank) return false;
  for (int i = 0; i < s->rank; i++)
    if ((b->shape.dims[i] < 0 ? -b->shape.dims[i] : b->shape.dims[i]) != s->dims[i]) return false;
  return true;
}

static hj_status api_check_buffers(hj_exec_t *e, hj_buffer_t *const *bufs, int n, bool outputs) {
  const hlo_shape **want = outputs ? e->outs : e->ins;
  const char *what = outputs ? "output" : "input";
  if (n != (int)arrlen(want))
    return hj__err(e->ctx, HJ_ERR_INVALID_ARG, "hj_exec_run: %d %ss given, module '%s' has %d", n, what,
                   e->m->name, (int)arrlen(want));
  if (n > 0 && !bufs) return hj__err(e->ctx, HJ_ERR_INVALID_ARG, "hj_exec_run: %s array is NULL", what);
  for (int i = 0; i < n; i++) {
    if (!bufs[i]) {
      if (outputs) continue;
      return hj__err(e->ctx, HJ_ERR_INVALID_ARG, "hj_exec_run: input %d is NULL", i);
    }
    if (api_fits(bufs[i], want[i])) continue;
    char b0[128], b1[128];
    hlo_shape bs = api_buffer_hlo_shape(bufs[i]);
    return hj__err(e->ctx, HJ_ERR_SHAPE, "hj_exec_run: %s %d is %s, module '%s' wants %s", what, i,
                   hlo_shape_str(&bs, b0, sizeof b0), e->m->name, hlo_shape_str(want[i], b1, sizeof b1));
  }
  return HJ_OK;
}

/* Leaf data for hlo_literal_view_tree: input buffer |k| of the array |in| (ud). */
static void *api_in_data(const void *in, int k) { return ((hj_buffer_t *const *)in)[k]->data; }

/* Copies the result leaves into |out| (new buffers where NULL; undone on failure). */
static hj_status api_store(hj_exec_t *e, const hlo_literal *res, hj_buffer_t **out, int nout) {
  const hlo_literal **lv = NULL;
  hlo_literal_leaves(res, &lv);
  hj_status st = HJ_OK;
  bool *made = calloc((size_t)nout + 1, sizeof *made);
  if (!made)
    st = hj__err(e->ctx, HJ_ERR_OOM, "hj_exec_run: out of memory");
  else if ((int)arrlen(lv) != nout)
    st = hj__err(e->ctx, HJ_ERR_INTERNAL, "hj_exec_run: the result has %d leaves, expected %d",
                 (int)arrlen(lv), nout);
  for (int i = 0; st == HJ_OK && i < nout; i++) {
    if (!out[i]) {
      st = api_buffer_new(e->ctx, "hj_exec_run", (hj_dtype_t)e->outs[i]->type,
                          hj__shape_from_hlo(e->outs[i]), &out[i]);
      made[i] = st == HJ_OK;
    }
    if (st == HJ_OK && (size_t)lv[i]->nbytes != out[i]->nbytes)
      st = hj__err(e->ctx, HJ_ERR_INTERNAL, "hj_exec_run: result %d has %lld bytes, buffer %zu", i,
                   (long long)lv[i]->nbytes, out[i]->nbytes);
    if (st == HJ_OK) memcpy(out[i]->data, lv[i]->data, out[i]->nbytes);
  }
  for (int i = 0; st != HJ_OK && made && i < nout; i++)
    if (made[i]) {
      hj_buffer_destroy(out[i]);
      out[i] = NULL;
    }
  free(made);
  arrfree(lv);
  return st;
}

#if API_HAVE_CPU
/* The CPU backend writes straight into the output buffers: new ones are made where NULL
   (undone on failure); an output that is also an input is computed into a temporary. */
static hj_status api_run_cpu(hj_exec_t *e, hj_buffer_t *const *in, int nin, hj_buffer_t **out, int nout) {
  void **ip = calloc((size_t)nin + 1, sizeof *ip), **op = calloc((size_t)nout + 1, sizeof *op);
  bool *made = calloc((size_t)nout + 1, sizeof *made);
  hj_buffer_t **tmp = calloc((size_t)nout + 1, sizeof *tmp);
  hj_status st = ip && op && made && tmp ? HJ_OK : hj__err(e->ctx, HJ_ERR_OOM, "hj_exec_run: out of memory");
  for (int i = 0; st == HJ_OK && i < nin; i++) ip[i] = in[i]->data;
  for (int i = 0; st == HJ_OK && i < nout; i++) {
    if (!out[i]) {
      st = api_buffer_new(e->ctx, "hj_exec_run", (hj_dtype_t)e->outs[i]->type,
                          hj__shape_from_hlo(e->outs[i]), &out[i]);
      made[i] = st == HJ_OK;
    }
    if (st != HJ_OK) break;
    op[i] = out[i]->data;
    bool clash = false;
    for (int k = 0; k < nin && !clash; k++) clash = in[k]->data == out[i]->data;
    for (int k = 0; k < i && !clash; k++) clash = out[k]->data == out[i]->data;
    if (clash && (st = api_buffer_new(e->ctx, "hj_exec_run", out[i]->dtype, out[i]->shape, &tmp[i])) == HJ_OK)
      op[i] = tmp[i]->data;
  }
  if (st == HJ_OK) st = cpu_backend_run(e->cpu, ip, nin, op, nout);
  for (int i = 0; i < nout && tmp; i++) {
    if (tmp[i] && st == HJ_OK) memcpy(out[i]->data, tmp[i]->data, out[i]->nbytes);
    hj_buffer_destroy(tmp[i]);
  }
  for (int i = 0; st != HJ_OK && made && i < nout; i++)
    if (made[i]) {
      hj_buffer_destroy(out[i]);
      out[i] = NULL;
    }
  free(ip);
  free(op);
  free(made);
  free(tmp);
  return st;
}
#endif

hj_status hj_exec_run(hj_exec_t *e, hj_buffer_t *const *in, int nin, hj_buffer_t **out, int nout) {
  if (!e) return HJ_ERR_INVALID_ARG;
  hj_status st = api_check_buffers(e, in, nin, false);
  if (st == HJ_OK) st = api_check_buffers(e, out, nout, true);
  if (st != HJ_OK) return st;
#if API_HAVE_CPU
  if (e->cpu) return api_run_cpu(e, in, nin, out, nout);
#endif
  const hlo_comp *entry = e->m->entry;
  int np = (int)arrlen(entry->params), k = 0;
  void **scratch = NULL;
  hlo_literal **args = NULL, *res = NULL;
  for (int i = 0; i < np && st == HJ_OK; i++) {
    hlo_literal *a = hlo_literal_view_tree(&entry->params[i]->shape, api_in_data, in, &k,
                                           &scratch);
    if (!a) st = hj__err(e->ctx, HJ_ERR_OOM, "hj_exec_run: out of memory");
    arrput(args, a);
  }
  if (st == HJ_OK) st = hlo_eval_module(e->ctx, e->m, args, np, &res);
  if (st == HJ_OK) st = api_store(e, res, out, nout);
  hlo_literal_free(res);
  for (ptrdiff_t i = 0; i < arrlen(scratch); i++) free(scratch[i]);
  arrfree(scratch);
  arrfree(args);
  return st;
}
