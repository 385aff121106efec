/* api.c — the public API around the IR: contexts, status and dtype names, modules (parse,
   print, verify, flattened signature), buffers and .npy I/O. Compile and run are in
   exec.c, the graph's module copy in graph_module.c.

   Flattening: entry parameters and results that are tuples are passed as one buffer per
   leaf, depth first (hj__leaves). Wrapped, mapped and view buffers, reference counts and
   hj_buffer_destroy are in buffer.c. */
#include "api.h"
#include "../backend.h"
#include "../text/text.h"
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

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
  static atomic_uint_fast64_t serials;
  ctx->serial = atomic_fetch_add(&serials, 1) + 1;
  pthread_mutex_init(&ctx->err_mu, NULL);
  pthread_mutex_init(&ctx->state_mu, NULL);
  ctx->opt = o;
  if (!ctx->opt.dump_dir) ctx->opt.dump_dir = getenv("HLOJIT_DUMP_TO");
  const char *prof = getenv("HLOJIT_PROFILE");
  if (prof && *prof && strcmp(prof, "0") != 0) ctx->opt.profile = true;
  *out = ctx;
  return HJ_OK;
}

void hj_ctx_destroy(hj_ctx_t *ctx) {
  if (!ctx) return;
  for (int i = 0; hlo_backends[i]; i++) {
    const hlo_backend *be = hlo_backends[i];
    if (be->ctx_destroy && ctx->backend_state[be->kind]) be->ctx_destroy(ctx, ctx->backend_state[be->kind]);
  }
  for (hj__errslot *s = ctx->errs, *n; s; s = n) {
    n = s->next;
    hj__free(ctx, s);
  }
  pthread_mutex_destroy(&ctx->err_mu);
  pthread_mutex_destroy(&ctx->state_mu);
  hj__free(ctx, ctx);
}

const char *hj_ctx_error(const hj_ctx_t *ctx) { return ctx ? hj__ctx_err(ctx) : ""; }

void hj_ctx_clear_error(hj_ctx_t *ctx) {
  if (!ctx) return;
  hj__errslot *e = hj__errslot_of(ctx);
  e->err[0] = 0;
  e->last = HJ_OK;
}

hj_status hj__backend_state(hj_ctx_t *ctx, const hlo_backend *be, void **state) {
  pthread_mutex_lock(&ctx->state_mu);
  void **st = &ctx->backend_state[be->kind];
  hj_status r = HJ_OK;
  if (!*st && be->ctx_create) r = be->ctx_create(ctx, st);
  *state = *st;
  pthread_mutex_unlock(&ctx->state_mu);
  return r;
}

const char *hj_status_name(hj_status s) { return hlo_status_name(s); }

const char *hj_dtype_name(hj_dtype_t t) {
  return (unsigned)t < HJ_DTYPE_COUNT ? hlo_type_name((hlo_type)t) : NULL;
}

size_t hj_dtype_size(hj_dtype_t t) {
  return (unsigned)t < HJ_DTYPE_COUNT ? (size_t)hlo_type_size((hlo_type)t) : 0;
}

int64_t hj_shape_numel(hj_shape_t s) {
  if (s.rank < 0 || s.rank > HJ_MAX_RANK) return 0;
  int64_t n = 1, d[HJ_MAX_RANK];
  for (int i = 0; i < s.rank; i++) {
    if (s.dims[i] == INT64_MIN) return -1;
    if ((d[i] = s.dims[i] < 0 ? -s.dims[i] : s.dims[i]) == 0) return 0;
  }
  for (int i = 0; i < s.rank; i++)
    if (!hlo_mul_ok(n, d[i], &n)) return -1;
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
const hlo_shape **hj__leaves(const hlo_module *m, bool outputs) {
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
  const hlo_shape **v = hj__leaves(m, outputs);
  int n = (int)arrlen(v);
  arrfree(v);
  return n;
}

int hj_module_num_inputs(const hj_module_t *m) { return api_count(m, false); }
int hj_module_num_outputs(const hj_module_t *m) { return api_count(m, true); }

static hj_status api_signature(const hj_module_t *m, bool outputs, int i, hj_dtype_t *t, hj_shape_t *s) {
  const char *fn = outputs ? "hj_module_output" : "hj_module_input";
  if (!m) return HJ_ERR_INVALID_ARG;
  const hlo_shape **v = hj__leaves(m, outputs);
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

/* The backend that makes this context's buffer storage (backend.h's buffer_alloc: CUDA
   managed memory, so kernels use the buffer in place and the host reads it through the same
   pointer), or NULL for the context's allocator: the requested backend, or under AUTO the
   first of the table, that has buffer_alloc and answers (its per-context state is made
   here, once; a failure is remembered and the allocator used, the context's error left as
   it was). */
static const hlo_backend *api_buffer_backend(hj_ctx_t *ctx, void **state) {
  *state = NULL;
  for (int i = 0; hlo_backends[i]; i++) {
    const hlo_backend *be = hlo_backends[i];
    if (ctx->opt.backend != HJ_BACKEND_AUTO && ctx->opt.backend != be->kind) continue;
    if (!be->buffer_alloc || ctx->backend_failed[be->kind]) continue;
    hj__err_saved *saved = malloc(sizeof *saved);
    if (saved) hj__err_save(ctx, saved);
    void *st = NULL;
    if (hj__backend_state(ctx, be, &st) != HJ_OK) ctx->backend_failed[be->kind] = true;
    if (saved) hj__err_restore(ctx, saved);
    free(saved);
    if (st) {
      *state = st;
      return be;
    }
  }
  return NULL;
}

/* Before the host touches |b|'s bytes: the backend's buffer_host (CUDA: after the device's
   work, on the host). */
static void api_buffer_host(const hj_buffer_t *b) {
  while (b && b->kind == HJB_VIEW) b = b->base;
  if (!b || b->mem == HJ_BACKEND_COUNT) return;
  const hlo_backend *be = hlo_backend_find(b->mem);
  if (be && be->buffer_host && b->ctx->backend_state[b->mem])
    be->buffer_host(b->ctx, b->ctx->backend_state[b->mem], b->data, b->nbytes);
}

hj_status hj__buffer_new(hj_ctx_t *ctx, const char *fn, hj_dtype_t t, hj_shape_t s,
                         hj_buffer_t **out) {
  *out = NULL;
  if ((unsigned)t >= HJ_DTYPE_COUNT || s.rank < 0 || s.rank > HJ_MAX_RANK)
    return hj__err(ctx, HJ_ERR_INVALID_ARG, "%s: invalid dtype %d or rank %d", fn, (int)t, s.rank);
  int64_t n = hj_shape_numel(s);
  if (n < 0 || n > HLO_MAX_NUMEL)   /* the IR's bound: no module takes a bigger buffer */
    return hj__err(ctx, HJ_ERR_INVALID_ARG, "%s: shape too large (more than 2^53 elements, or a "
                   "dim of INT64_MIN)", fn);
  hj_buffer_t *b = hj__alloc(ctx, sizeof *b);
  size_t nb = (size_t)n * hj_dtype_size(t);
  void *bstate = NULL, *data = NULL;
  const hlo_backend *be = b ? api_buffer_backend(ctx, &bstate) : NULL;
  if (be) {
    hj_status st = be->buffer_alloc(ctx, bstate, nb, &data);
    if (st != HJ_OK) {   /* the backend said why (CUDA: the free memory it has) */
      hj__free(ctx, b);
      return st;
    }
  } else if (b) {
    data = hj__alloc(ctx, nb);
  }
  if (!data) {
    hj__free(ctx, b);
    return hj__err(ctx, HJ_ERR_OOM, "%s: out of memory for %zu bytes", fn, nb);
  }
  memset(b, 0, sizeof *b);
  b->ctx = ctx, b->dtype = t, b->shape = s, b->nbytes = nb, b->data = data, b->kind = HJB_OWNED;
  b->mem = be ? be->kind : HJ_BACKEND_COUNT;
  atomic_init(&b->refs, 1);
  *out = b;
  return HJ_OK;
}

hj_status hj_buffer_create(hj_ctx_t *ctx, hj_dtype_t t, hj_shape_t s, hj_buffer_t **out) {
  if (!out) return hj__err(ctx, HJ_ERR_INVALID_ARG, "hj_buffer_create: out is NULL");
  *out = NULL;
  if (!ctx) return HJ_ERR_INVALID_ARG;
  hj_status st = hj__buffer_new(ctx, "hj_buffer_create", t, s, out);
  if (st == HJ_OK) memset((*out)->data, 0, (*out)->nbytes);
  return st;
}

hj_status hj_buffer_from_host(hj_ctx_t *ctx, hj_dtype_t t, hj_shape_t s, const void *data,
                              hj_buffer_t **out) {
  if (!out) return hj__err(ctx, HJ_ERR_INVALID_ARG, "hj_buffer_from_host: out is NULL");
  *out = NULL;
  if (!ctx) return HJ_ERR_INVALID_ARG;
  if (!data) return hj__err(ctx, HJ_ERR_INVALID_ARG, "hj_buffer_from_host: data is NULL");
  hj_status st = hj__buffer_new(ctx, "hj_buffer_from_host", t, s, out);
  if (st == HJ_OK) memcpy((*out)->data, data, (*out)->nbytes);
  return st;
}

void *hj_buffer_host_ptr(hj_buffer_t *b) {
  api_buffer_host(b);
  return b ? b->data : NULL;
}

hj_status hj_buffer_copy_to_host(const hj_buffer_t *b, void *dst, size_t nbytes) {
  if (!b) return HJ_ERR_INVALID_ARG;
  if (!dst) return hj__err(b->ctx, HJ_ERR_INVALID_ARG, "hj_buffer_copy_to_host: dst is NULL");
  if (nbytes < b->nbytes)
    return hj__err(b->ctx, HJ_ERR_INVALID_ARG, "hj_buffer_copy_to_host: %zu bytes given, buffer has %zu",
                   nbytes, b->nbytes);
  api_buffer_host(b);
  memcpy(dst, b->data, b->nbytes);
  return HJ_OK;
}

hj_dtype_t hj_buffer_dtype(const hj_buffer_t *b) { return b ? b->dtype : HJ_DTYPE_COUNT; }
hj_shape_t hj_buffer_shape(const hj_buffer_t *b) { return b ? b->shape : (hj_shape_t){ 0 }; }
size_t hj_buffer_nbytes(const hj_buffer_t *b) { return b ? b->nbytes : 0; }

void hj__buffer_free_data(hj_buffer_t *b) {
  const hlo_backend *be = b->mem != HJ_BACKEND_COUNT ? hlo_backend_find(b->mem) : NULL;
  if (!be) hj__free(b->ctx, b->data);
  else if (be->buffer_free && b->ctx->backend_state[b->mem])
    be->buffer_free(b->ctx, b->ctx->backend_state[b->mem], b->data);
}

hlo_shape hj__buffer_hlo_shape(const hj_buffer_t *b) {
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
  } else if ((st = hj__buffer_new(ctx, "hj_buffer_read_npy", (hj_dtype_t)l->shape.type,
                                  hj__shape_from_hlo(&l->shape), out)) == HJ_OK) {
    memcpy((*out)->data, l->data, (*out)->nbytes);
  }
  hlo_literal_free(l);
  return st;
}

hj_status hj_buffer_write_npy(const hj_buffer_t *b, const char *path) {
  if (!b) return HJ_ERR_INVALID_ARG;
  if (!path) return hj__err(b->ctx, HJ_ERR_INVALID_ARG, "hj_buffer_write_npy: path is NULL");
  hlo_shape s = hj__buffer_hlo_shape(b);
  api_buffer_host(b);
  hlo_literal l = hlo_literal_view(&s, b->data);
  return hlo_npy_write(b->ctx, path, &l);
}

/* ---- shapes ----------------------------------------------------------------------------- */

const char *hj__shape_problem(hj_dtype_t t, hj_shape_t s) {
  if ((unsigned)t >= HJ_DTYPE_COUNT) return "an invalid dtype";
  if (s.rank < 0 || s.rank > HJ_MAX_RANK) return "a rank outside [0, 8]";
  for (int i = 0; i < s.rank; i++)
    if (s.dims[i] == INT64_MIN) return "a dim of INT64_MIN (no bound)";
  hlo_shape h = { .type = (hlo_type)t, .rank = s.rank };
  for (int i = 0; i < s.rank; i++) h.dims[i] = s.dims[i] < 0 ? -s.dims[i] : s.dims[i];
  /* the IR's bound (HLO_MAX_NUMEL), so that every module the builder makes prints to text
     that parses back and no element count overflows downstream */
  return hlo_shape_check(&h) ? "more than 2^53 elements" : NULL;
}

bool hj__shape_to_hlo(hj_dtype_t t, hj_shape_t s, hlo_shape *out) {
  if (hj__shape_problem(t, s)) return false;
  int64_t d[HJ_MAX_RANK] = { 0 };
  for (int i = 0; i < s.rank; i++) d[i] = s.dims[i] < 0 ? -s.dims[i] : s.dims[i];
  *out = hlo_shape_array((hlo_type)t, s.rank, d);
  for (int i = 0; i < s.rank; i++) out->dynamic[i] = s.dims[i] < 0;
  return true;
}

hj_shape_t hj__shape_from_hlo(const hlo_shape *s) {
  hj_shape_t r = { 0 };
  if (!hlo_shape_is_array(s)) return r;
  r.rank = s->rank;
  for (int i = 0; i < s->rank; i++) r.dims[i] = s->dynamic[i] ? -s->dims[i] : s->dims[i];
  return r;
}
