/* core.c — the small things everything else stands on: error messages, the context's
   allocator, arenas, a string builder, the element-type and opcode tables, shapes, IR
   construction, half-precision conversion, typed element access, and the checked shape
   arithmetic (element counts, strides, slice / pad / window extents) that every part uses
   so that no attribute value can overflow int64 (ir.h says which helper does what).

   Arenas: a list of blocks, each at least 64 KiB; allocations are bumped, zeroed and
   16-byte aligned; everything is freed at once with the module (or graph).

   Big blocks (>= 2 MiB: weights, activations, an executable's arena) from the default
   allocator are 2 MiB aligned and advised as transparent huge pages on Linux: kernels that
   walk a matrix down its rows touch a new 4 KiB page every few cache lines, and the TLB
   misses cost the M = 1 matmul ~10% of the memory bandwidth (0.84 -> 0.93 of a plain read
   on 2 threads, measured on Zen 5 where THP is "madvise"). A custom allocator is used as is. */
#include "ir.h"
#include <math.h>
#include <stdlib.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

/* stb_ds's implementation lives here (its implementation part sits outside the header guard,
   so this works also after ir.h has included the declarations). */
#define STB_DS_IMPLEMENTATION
#include <stb/stb_ds.h>

/* ---- errors and allocation ------------------------------------------------------------ */

const char *hlo_status_name(hj_status s) {
  static const char *names[HJ_STATUS_COUNT] = {
    "HJ_OK", "HJ_ERR_INVALID_ARG", "HJ_ERR_SHAPE", "HJ_ERR_PARSE", "HJ_ERR_UNSUPPORTED",
    "HJ_ERR_OOM", "HJ_ERR_IO", "HJ_ERR_BACKEND", "HJ_ERR_INTERNAL",
  };
  return (unsigned)s < HJ_STATUS_COUNT ? names[s] : "HJ_ERR_UNKNOWN";
}

/* The thread's slot, found through a one-entry cache (the context's serial: a context
   made at a freed one's address is another key) or under the context's lock: the thread's
   own slot, else a new one; past HJ__ERR_SLOTS threads (or out of memory) the context's
   shared slot. A slot belongs to its thread until the context goes. */
static _Thread_local struct { uint64_t serial; hj__errslot *slot; } hj__err_cache;

hj__errslot *hj__errslot_of(const hj_ctx_t *cctx) {
  hj_ctx_t *ctx = (hj_ctx_t *)cctx;
  if (hj__err_cache.serial == ctx->serial) return hj__err_cache.slot;
  pthread_t self = pthread_self();
  pthread_mutex_lock(&ctx->err_mu);
  int n = 0;
  hj__errslot *s = ctx->errs;
  for (; s && !pthread_equal(s->tid, self); s = s->next) n++;
  if (!s && n < HJ__ERR_SLOTS && (s = hj__alloc(ctx, sizeof *s))) {
    memset(s, 0, sizeof *s);
    s->tid = self;
    s->next = ctx->errs, ctx->errs = s;
  }
  pthread_mutex_unlock(&ctx->err_mu);
  if (!s) return &ctx->err_shared;
  hj__err_cache.serial = ctx->serial, hj__err_cache.slot = s;
  return s;
}

hj_status hj__err(hj_ctx_t *ctx, hj_status code, const char *fmt, ...) {
  if (!ctx) return code;
  hj__errslot *e = hj__errslot_of(ctx);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->err, sizeof e->err, fmt, ap);
  va_end(ap);
  e->last = code;
  return code;
}

void hj__err_save(const hj_ctx_t *ctx, hj__err_saved *s) {
  const hj__errslot *e = hj__errslot_of(ctx);
  s->last = e->last;
  memcpy(s->err, e->err, sizeof s->err);
}

void hj__err_restore(hj_ctx_t *ctx, const hj__err_saved *s) {
  hj__errslot *e = hj__errslot_of(ctx);
  e->last = s->last;
  memcpy(e->err, s->err, sizeof s->err);
}

void *hj__alloc(hj_ctx_t *ctx, size_t size) {
  if (size == 0) size = 1;
  if (ctx && ctx->opt.allocator.alloc)
    return ctx->opt.allocator.alloc(ctx->opt.allocator.user, size, 64);
  void *p = NULL;
  size = (size + 63) & ~(size_t)63;
  size_t huge = (size_t)2 << 20;
  if (posix_memalign(&p, size >= huge ? huge : 64, size) != 0) return NULL;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (size >= huge) (void)madvise(p, size, MADV_HUGEPAGE);   /* advice only: errors are fine */
#endif
  return p;
}

void hj__free(hj_ctx_t *ctx, void *p) {
  if (!p) return;
  if (ctx && ctx->opt.allocator.free) ctx->opt.allocator.free(ctx->opt.allocator.user, p);
  else free(p);
}

/* ---- arenas ----------------------------------------------------------------------------- */

struct hlo_arena_block {
  hlo_arena_block *next;
  size_t used, cap;
  _Alignas(16) unsigned char mem[];
};

void hlo_arena_init(hlo_arena *a, hj_ctx_t *ctx) {
  a->ctx = ctx;
  a->head = NULL;
}

void *hlo_arena_alloc(hlo_arena *a, size_t size) {
  size = (size + 15) & ~(size_t)15;
  hlo_arena_block *b = a->head;
  if (!b || b->cap - b->used < size) {
    size_t cap = size > 65536 ? size : 65536;
    b = hj__alloc(a->ctx, sizeof *b + cap);
    if (!b) return NULL;
    b->used = 0;
    b->cap = cap;
    b->next = a->head;
    a->head = b;
  }
  void *p = b->mem + b->used;
  b->used += size;
  memset(p, 0, size);
  return p;
}

void hlo_arena_free(hlo_arena *a) {
  for (hlo_arena_block *b = a->head, *n; b; b = n) {
    n = b->next;
    hj__free(a->ctx, b);
  }
  a->head = NULL;
}

/* ---- string builder --------------------------------------------------------------------- */

static void sb_vprintf(char **sb, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) return;
  size_t len = arrlenu(*sb);
  if (len) len--; /* overwrite the NUL */
  arrsetlen(*sb, len + (size_t)n + 1);
  vsnprintf(*sb + len, (size_t)n + 1, fmt, ap);
}

void sb_printf(char **sb, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sb_vprintf(sb, fmt, ap);
  va_end(ap);
}

void sb_puts(char **sb, const char *s) { sb_printf(sb, "%s", s); }

/* ---- tables ----------------------------------------------------------------------------- */

static const struct { const char *name; int size; hlo_type_class cls; } type_table[] = {
#define X(e, s, b, c) { s, b, c },
  HLO_TYPES(X)
#undef X
};

static const struct { const char *name; int arity; hlo_op_kind kind; } op_table[] = {
#define X(e, s, a, k) { s, a, k },
  HLO_OPCODES(X)
#undef X
};

const char *hlo_type_name(hlo_type t) { return (unsigned)t < HLO_TYPE_COUNT ? type_table[t].name : "?"; }
int hlo_type_size(hlo_type t) { return (unsigned)t < HLO_TYPE_COUNT ? type_table[t].size : 0; }
hlo_type_class hlo_type_class_of(hlo_type t) {
  return (unsigned)t < HLO_TYPE_COUNT ? type_table[t].cls : HLO_CLASS_OTHER;
}
bool hlo_type_is_float(hlo_type t) { return hlo_type_class_of(t) == HLO_CLASS_FLOAT; }
bool hlo_type_is_int(hlo_type t) {
  hlo_type_class c = hlo_type_class_of(t);
  return c == HLO_CLASS_SINT || c == HLO_CLASS_UINT;
}

bool hlo_type_from_name(const char *s, size_t n, hlo_type *out) {
  for (int i = 0; i < HLO_TYPE_COUNT; i++)
    if (strlen(type_table[i].name) == n && memcmp(type_table[i].name, s, n) == 0) {
      *out = (hlo_type)i;
      return true;
    }
  return false;
}

const char *hlo_opcode_name(hlo_opcode op) { return (unsigned)op < HLO_OP_COUNT ? op_table[op].name : "?"; }
int hlo_opcode_arity(hlo_opcode op) { return (unsigned)op < HLO_OP_COUNT ? op_table[op].arity : -1; }
hlo_op_kind hlo_opcode_kind(hlo_opcode op) {
  return (unsigned)op < HLO_OP_COUNT ? op_table[op].kind : HLO_KIND_OTHER;
}

bool hlo_opcode_from_name(const char *s, size_t n, hlo_opcode *out) {
  for (int i = 0; i < HLO_OP_COUNT; i++)
    if (strlen(op_table[i].name) == n && memcmp(op_table[i].name, s, n) == 0) {
      *out = (hlo_opcode)i;
      return true;
    }
  return false;
}

const char *hlo_cmp_dir_name(hlo_cmp_dir d) {
  static const char *n[] = { "EQ", "NE", "LT", "LE", "GT", "GE" };
  return (unsigned)d < HLO_CMP_COUNT ? n[d] : "?";
}

const char *hlo_cmp_type_name(hlo_cmp_type t) {
  static const char *n[] = { "", "FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED" };
  return (unsigned)t < HLO_CMPT_COUNT ? n[t] : "?";
}

const char *hlo_fusion_kind_name(hlo_fusion_kind k) {
  static const char *n[] = { "kLoop", "kInput", "kOutput", "kCustom" };
  return (unsigned)k < HLO_FUSION_KIND_COUNT ? n[k] : "?";
}

/* ---- shapes ----------------------------------------------------------------------------- */

void hlo_shape_set_default_layout(hlo_shape *s) {
  /* A fixed trip count (entries past the rank are 0): gcc 12 at -O3 misreads the
     rank-bounded loop as overflowing the array once inlined into callers. */
  for (int i = 0; i < HLO_MAX_RANK; i++)
    s->minor_to_major[i] = (int8_t)(i < s->rank ? s->rank - 1 - i : 0);
  s->has_layout = true;
}

hlo_shape hlo_shape_array(hlo_type t, int rank, const int64_t *dims) {
  hlo_shape s = { .type = t, .rank = rank };
  for (int i = 0; i < rank; i++) s.dims[i] = dims[i];
  hlo_shape_set_default_layout(&s);
  return s;
}

hlo_shape hlo_shape_scalar(hlo_type t) { return hlo_shape_array(t, 0, NULL); }

bool hlo_shape_is_array(const hlo_shape *s) { return s->type < HLO_TUPLE; }

int64_t hlo_shape_numel(const hlo_shape *s) {
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++)
    if (s->dims[i] == 0) return 0;
  for (int i = 0; i < s->rank && i < HLO_MAX_RANK; i++)
    if (!hlo_mul_ok(n, s->dims[i], &n)) return INT64_MAX;
  return n;
}

int64_t hlo_shape_bytes(const hlo_shape *s) {
  int64_t b;
  return hlo_mul_ok(hlo_shape_numel(s), hlo_type_size(s->type), &b) ? b : INT64_MAX;
}

bool hlo_shape_compatible(const hlo_shape *a, const hlo_shape *b) {
  if (a->type != b->type) return false;
  if (a->type == HLO_TUPLE) {
    if (a->ntuple != b->ntuple) return false;
    for (int i = 0; i < a->ntuple; i++)
      if (!hlo_shape_compatible(&a->tuple[i], &b->tuple[i])) return false;
    return true;
  }
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i] || a->dynamic[i] != b->dynamic[i]) return false;
  return true;
}

bool hlo_shape_equal(const hlo_shape *a, const hlo_shape *b) {
  if (!hlo_shape_compatible(a, b)) return false;
  if (a->type == HLO_TUPLE) {
    for (int i = 0; i < a->ntuple; i++)
      if (!hlo_shape_equal(&a->tuple[i], &b->tuple[i])) return false;
    return true;
  }
  if (a->has_layout && b->has_layout)
    for (int i = 0; i < a->rank; i++)
      if (a->minor_to_major[i] != b->minor_to_major[i]) return false;
  return true;
}

bool hlo_shape_layout_is_default(const hlo_shape *s) {
  if (!s->has_layout) return true;
  for (int i = 0; i < s->rank; i++)
    if (s->minor_to_major[i] != s->rank - 1 - i) return false;
  return true;
}

void hlo_shape_print(char **sb, const hlo_shape *s, bool with_layout) {
  if (s->type == HLO_TUPLE) {
    sb_puts(sb, "(");
    for (int i = 0; i < s->ntuple; i++) {
      if (i) sb_puts(sb, ", ");
      hlo_shape_print(sb, &s->tuple[i], with_layout);
    }
    sb_puts(sb, ")");
    return;
  }
  if (s->type == HLO_TOKEN) {
    sb_puts(sb, "token[]");
    return;
  }
  sb_printf(sb, "%s[", hlo_type_name(s->type));
  for (int i = 0; i < s->rank; i++)
    sb_printf(sb, "%s%s%lld", i ? "," : "", s->dynamic[i] ? "<=" : "", (long long)s->dims[i]);
  sb_puts(sb, "]");
  if (with_layout && s->rank > 0) {
    hlo_shape d = *s;
    if (!s->has_layout) hlo_shape_set_default_layout(&d);
    sb_puts(sb, "{");
    for (int i = 0; i < d.rank; i++) sb_printf(sb, "%s%d", i ? "," : "", d.minor_to_major[i]);
    sb_puts(sb, "}");
  }
}

const char *hlo_shape_str(const hlo_shape *s, char *buf, size_t n) {
  char *sb = NULL;
  hlo_shape_print(&sb, s, false);
  snprintf(buf, n, "%s", sb ? sb : "");
  arrfree(sb);
  return buf;
}

void hlo_shape_strides(const hlo_shape *s, int64_t *strides) {
  bool empty = hlo_shape_numel(s) == 0;
  int64_t st = 1;
  for (int i = s->rank - 1; i >= 0; i--) {
    strides[i] = empty ? 0 : st;
    if (!empty && !hlo_mul_ok(st, s->dims[i], &st)) st = INT64_MAX;   /* invalid shapes only */
  }
}

bool hlo_shape_layout_strides(const hlo_shape *s, int64_t *strides) {
  if (!s->has_layout) {
    hlo_shape_strides(s, strides);
    return true;
  }
  bool seen[HLO_MAX_RANK] = { false }, empty = hlo_shape_numel(s) == 0;
  int64_t st = 1;
  for (int k = 0; k < s->rank; k++) {
    int d = s->minor_to_major[k];
    if (d < 0 || d >= s->rank || seen[d]) return false;
    seen[d] = true;
    strides[d] = empty ? 0 : st;
    if (!empty && !hlo_mul_ok(st, s->dims[d], &st)) st = INT64_MAX;   /* invalid shapes only */
  }
  return true;
}

void hlo_shape_leaves(const hlo_shape *s, const hlo_shape ***out) {
  if (s->type == HLO_TUPLE) {
    for (int i = 0; i < s->ntuple; i++) hlo_shape_leaves(&s->tuple[i], out);
  } else {
    arrput(*out, s);
  }
}

/* ---- modules, computations, instructions ------------------------------------------------- */

hlo_module *hlo_module_new(hj_ctx_t *ctx, const char *name) {
  hlo_module *m = hj__alloc(ctx, sizeof *m);
  if (!m) {
    hj__err(ctx, HJ_ERR_OOM, "out of memory creating module");
    return NULL;
  }
  memset(m, 0, sizeof *m);
  m->ctx = ctx;
  hlo_arena_init(&m->arena, ctx);
  m->name = hlo_strdup(m, name ? name : "module");
  if (!m->name) {   /* the arena's first block: a module without a name prints as no module */
    hlo_module_free(m);
    hj__err(ctx, HJ_ERR_OOM, "out of memory creating module");
    return NULL;
  }
  return m;
}

void hlo_module_free(hlo_module *m) {
  if (!m) return;
  for (ptrdiff_t i = 0; i < arrlen(m->comps); i++) {
    arrfree(m->comps[i]->instrs);
    arrfree(m->comps[i]->params);
  }
  arrfree(m->comps);
  hlo_arena_free(&m->arena);
  hj__free(m->ctx, m);
}

void *hlo_alloc(hlo_module *m, size_t n) { return hlo_arena_alloc(&m->arena, n); }

char *hlo_strndup(hlo_module *m, const char *s, size_t n) {
  char *p = hlo_alloc(m, n + 1);
  if (p) memcpy(p, s, n);
  return p;
}

char *hlo_strdup(hlo_module *m, const char *s) { return hlo_strndup(m, s, strlen(s)); }

hlo_ints hlo_ints_dup(hlo_module *m, const int64_t *v, int n) {
  hlo_ints r = { NULL, n };
  if (n > 0) {
    r.v = hlo_alloc(m, sizeof(int64_t) * (size_t)n);
    if (!r.v) r.n = 0;
    else memcpy(r.v, v, sizeof(int64_t) * (size_t)n);
  }
  return r;
}

hlo_shape hlo_shape_dup(hlo_module *m, const hlo_shape *s) {
  hlo_shape r = *s;
  if (s->type == HLO_TUPLE && s->ntuple > 0) {
    r.tuple = hlo_alloc(m, sizeof(hlo_shape) * (size_t)s->ntuple);
    if (!r.tuple) {
      r.ntuple = 0;
      return r;
    }
    for (int i = 0; i < s->ntuple; i++) r.tuple[i] = hlo_shape_dup(m, &s->tuple[i]);
  }
  return r;
}

hlo_comp *hlo_comp_new(hlo_module *m, const char *name) {
  hlo_comp *c = hlo_alloc(m, sizeof *c);
  if (!c) {
    hj__err(m->ctx, HJ_ERR_OOM, "out of memory creating computation");
    return NULL;
  }
  c->name = hlo_strdup(m, name);
  if (!c->name) {   /* a nameless computation would print as "(null)" and break look-ups */
    hj__err(m->ctx, HJ_ERR_OOM, "out of memory creating computation");
    return NULL;
  }
  c->module = m;
  arrput(m->comps, c);
  return c;
}

/* Did hlo_shape_dup lose a tuple's elements (its arena allocation failed)? */
static bool core_dup_lost(const hlo_shape *src, const hlo_shape *dup) {
  if (src->type != HLO_TUPLE) return false;
  if (dup->ntuple != src->ntuple) return true;
  for (int i = 0; i < src->ntuple; i++)
    if (core_dup_lost(&src->tuple[i], &dup->tuple[i])) return true;
  return false;
}

hlo_comp *hlo_module_find_comp(const hlo_module *m, const char *name) {
  for (ptrdiff_t i = 0; i < arrlen(m->comps); i++)
    if (strcmp(m->comps[i]->name, name) == 0) return m->comps[i];
  return NULL;
}

hlo_instr *hlo_instr_new(hlo_comp *c, hlo_opcode op, const char *name, const hlo_shape *shape,
                         hlo_instr *const *operands, int noperands) {
  hlo_module *m = c->module;
  hlo_instr *ins = hlo_alloc(m, sizeof *ins);
  if (!ins) goto oom;
  ins->op = op;
  ins->id = m->next_id++;
  ins->parent = c;
  if (name) {
    ins->name = hlo_strdup(m, name);
  } else {
    char buf[64];
    snprintf(buf, sizeof buf, "%s.%d", hlo_opcode_name(op), ins->id);
    ins->name = hlo_strdup(m, buf);
  }
  if (!ins->name) goto oom;
  if (shape) ins->shape = hlo_shape_dup(m, shape);
  if (shape && core_dup_lost(shape, &ins->shape)) goto oom;
  if (noperands > 0) {
    ins->operands = hlo_alloc(m, sizeof(hlo_instr *) * (size_t)noperands);
    if (!ins->operands) goto oom;
    memcpy(ins->operands, operands, sizeof(hlo_instr *) * (size_t)noperands);
  }
  ins->noperands = noperands;
  arrput(c->instrs, ins);
  return ins;
oom:
  hj__err(m->ctx, HJ_ERR_OOM, "out of memory creating instruction");
  return NULL;
}

void hlo_instr_set_calls(hlo_instr *ins, hlo_comp *const *calls, int n) {
  hlo_module *m = ins->parent->module;
  ins->calls = n > 0 ? hlo_alloc(m, sizeof(hlo_comp *) * (size_t)n) : NULL;
  ins->ncalls = ins->calls || n == 0 ? n : 0;
  if (ins->calls) memcpy(ins->calls, calls, sizeof(hlo_comp *) * (size_t)n);
}

/* ---- half precision ------------------------------------------------------------------------ */

static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float hlo_bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

uint16_t hlo_f32_to_bf16(float f) {
  uint32_t u = f2u(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}

float hlo_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0x1f) return u2f(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    float v = ldexpf((float)man, -24);
    return sign ? -v : v;
  }
  return u2f(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t hlo_f32_to_f16(float f) {
  uint32_t u = f2u(f), sign = (u >> 16) & 0x8000;
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00 | ((a >> 13) & 0x3ff));
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00);  /* rounds to >= 65520: inf */
  if (a < 0x38800000u) {                                    /* subnormal or zero in f16 */
    float v = u2f(a) * 16777216.0f;                         /* exact: scale by 2^24 */
    return (uint16_t)(sign | (uint32_t)nearbyintf(v));      /* ties to even (default mode) */
  }
  uint32_t r = a + 0xfffu + ((a >> 13) & 1) - (112u << 23);
  return (uint16_t)(sign | (r >> 13));
}

/* double -> f16 with one rounding (to nearest even), as IEEE conversion and NumPy do;
   going through f32 first can land on a tie and round the wrong way. */
static uint16_t f64_to_f16(double v) {
  uint16_t sign = signbit(v) ? 0x8000 : 0;
  double a = fabs(v);
  if (isnan(v)) return (uint16_t)(sign | 0x7e00);
  if (a >= 65520.0) return (uint16_t)(sign | 0x7c00);          /* rounds to inf */
  if (a < 0x1p-14) return (uint16_t)(sign | (uint16_t)nearbyint(a * 0x1p24)); /* subnormal */
  int e;
  double m = frexp(a, &e);                                      /* a = m * 2^e, m in [0.5, 1) */
  double q = nearbyint(m * 2048.0);                             /* 11 significant bits */
  if (q == 2048.0) { q = 1024.0; e++; }
  int biased = e - 1 + 15;
  if (biased >= 31) return (uint16_t)(sign | 0x7c00);
  return (uint16_t)(sign | (biased << 10) | ((uint16_t)q - 1024));
}

/* ---- typed element access --------------------------------------------------------------- */

double hlo_load_f64(hlo_type t, const void *base, int64_t i) {
  switch (t) {
  case HLO_PRED: return ((const uint8_t *)base)[i] != 0;
  case HLO_S8: return ((const int8_t *)base)[i];
  case HLO_S16: return ((const int16_t *)base)[i];
  case HLO_S32: return ((const int32_t *)base)[i];
  case HLO_S64: return (double)((const int64_t *)base)[i];
  case HLO_U8: return ((const uint8_t *)base)[i];
  case HLO_U16: return ((const uint16_t *)base)[i];
  case HLO_U32: return ((const uint32_t *)base)[i];
  case HLO_U64: return (double)((const uint64_t *)base)[i];
  case HLO_F16: return hlo_f16_to_f32(((const uint16_t *)base)[i]);
  case HLO_BF16: return hlo_bf16_to_f32(((const uint16_t *)base)[i]);
  case HLO_F32: return ((const float *)base)[i];
  case HLO_F64: return ((const double *)base)[i];
  default: return 0;
  }
}

/* Float to integer as XLA's convert does: NaN -> 0, out of range saturates. */
static int64_t f64_to_s64_sat(double v) {
  if (isnan(v)) return 0;
  if (v >= 9223372036854775807.0) return INT64_MAX;
  if (v <= -9223372036854775808.0) return INT64_MIN;
  return (int64_t)v;
}

static uint64_t f64_to_u64_sat(double v) {
  if (isnan(v) || v <= 0) return 0;
  if (v >= 18446744073709551615.0) return UINT64_MAX;
  return (uint64_t)v;
}

int64_t hlo_load_s64(hlo_type t, const void *base, int64_t i) {
  switch (t) {
  case HLO_S64: return ((const int64_t *)base)[i];
  case HLO_U64: return (int64_t)((const uint64_t *)base)[i];
  case HLO_F16: case HLO_BF16: case HLO_F32: case HLO_F64:
    return f64_to_s64_sat(hlo_load_f64(t, base, i));
  default: return (int64_t)hlo_load_f64(t, base, i);
  }
}

uint64_t hlo_load_u64(hlo_type t, const void *base, int64_t i) {
  switch (t) {
  case HLO_U64: return ((const uint64_t *)base)[i];
  case HLO_S64: return (uint64_t)((const int64_t *)base)[i];
  case HLO_S8: case HLO_S16: case HLO_S32: return (uint64_t)hlo_load_s64(t, base, i);
  case HLO_F16: case HLO_BF16: case HLO_F32: case HLO_F64:
    return f64_to_u64_sat(hlo_load_f64(t, base, i));
  default: return (uint64_t)hlo_load_f64(t, base, i);
  }
}

/* Saturating store of a float into an integer type of |bits| bits. */
static int64_t sat_s(double v, int bits) {
  double hi = ldexp(1.0, bits - 1) - 1, lo = -ldexp(1.0, bits - 1);
  if (isnan(v)) return 0;
  if (v >= hi) return (int64_t)hi;
  if (v <= lo) return (int64_t)lo;
  return (int64_t)v;
}

static uint64_t sat_u(double v, int bits) {
  double hi = ldexp(1.0, bits) - 1;
  if (isnan(v) || v <= 0) return 0;
  if (v >= hi) return bits == 64 ? UINT64_MAX : (uint64_t)hi;
  return (uint64_t)v;
}

void hlo_store_f64(hlo_type t, void *base, int64_t i, double v) {
  switch (t) {
  case HLO_PRED: ((uint8_t *)base)[i] = v != 0; break;
  case HLO_S8: ((int8_t *)base)[i] = (int8_t)sat_s(v, 8); break;
  case HLO_S16: ((int16_t *)base)[i] = (int16_t)sat_s(v, 16); break;
  case HLO_S32: ((int32_t *)base)[i] = (int32_t)sat_s(v, 32); break;
  case HLO_S64: ((int64_t *)base)[i] = f64_to_s64_sat(v); break;
  case HLO_U8: ((uint8_t *)base)[i] = (uint8_t)sat_u(v, 8); break;
  case HLO_U16: ((uint16_t *)base)[i] = (uint16_t)sat_u(v, 16); break;
  case HLO_U32: ((uint32_t *)base)[i] = (uint32_t)sat_u(v, 32); break;
  case HLO_U64: ((uint64_t *)base)[i] = f64_to_u64_sat(v); break;
  /* f16 rounds once (IEEE, NumPy, LLVM's fptrunc). bf16 goes through f32, as Eigen's and
     ml_dtypes' bfloat16 do; for values computed in f32 (all but f64 sources) both agree. */
  case HLO_F16: ((uint16_t *)base)[i] = f64_to_f16(v); break;
  case HLO_BF16: ((uint16_t *)base)[i] = hlo_f32_to_bf16((float)v); break;
  case HLO_F32: ((float *)base)[i] = (float)v; break;
  case HLO_F64: ((double *)base)[i] = v; break;
  default: break;
  }
}

void hlo_store_u64(hlo_type t, void *base, int64_t i, uint64_t v) {
  switch (t) {
  case HLO_PRED: ((uint8_t *)base)[i] = v != 0; break;
  case HLO_S8: case HLO_U8: ((uint8_t *)base)[i] = (uint8_t)v; break;
  case HLO_S16: case HLO_U16: ((uint16_t *)base)[i] = (uint16_t)v; break;
  case HLO_S32: case HLO_U32: ((uint32_t *)base)[i] = (uint32_t)v; break;
  case HLO_S64: case HLO_U64: ((uint64_t *)base)[i] = v; break;
  default: hlo_store_f64(t, base, i, (double)v); break;
  }
}

void hlo_store_s64(hlo_type t, void *base, int64_t i, int64_t v) {
  if (hlo_type_is_float(t)) hlo_store_f64(t, base, i, (double)v);
  else hlo_store_u64(t, base, i, (uint64_t)v);
}

bool hlo_same_dims(const hlo_shape *a, const hlo_shape *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

bool hlo_ints_has(hlo_ints v, int64_t x) {
  for (int i = 0; i < v.n; i++)
    if (v.v[i] == x) return true;
  return false;
}

/* ---- checked shape arithmetic (ir.h) ---------------------------------------------------- */

bool hlo_add_ok(int64_t a, int64_t b, int64_t *r) {
  int64_t t;
  if (__builtin_add_overflow(a, b, &t)) return false;
  *r = t;
  return true;
}

bool hlo_mul_ok(int64_t a, int64_t b, int64_t *r) {
  int64_t t;
  if (__builtin_mul_overflow(a, b, &t)) return false;
  *r = t;
  return true;
}

bool hlo_dims_numel(int rank, const int64_t *dims, int64_t *n) {
  if (rank < 0 || rank > HLO_MAX_RANK) return false;
  bool zero = false;
  for (int i = 0; i < rank; i++) {
    if (dims[i] < 0) return false;
    zero |= dims[i] == 0;
  }
  int64_t p = 1;
  for (int i = 0; i < rank && !zero; i++)
    if (!hlo_mul_ok(p, dims[i], &p) || p > HLO_MAX_NUMEL) return false;
  *n = zero ? 0 : p;
  return true;
}

static const char *core_shape_check(const hlo_shape *s, int depth) {
  if (s->type == HLO_TOKEN) return NULL;
  if (s->type == HLO_TUPLE) {
    if (depth > 64) return "nests tuples more than 64 deep";
    if (s->ntuple < 0 || (s->ntuple > 0 && !s->tuple)) return "is a malformed tuple";
    for (int i = 0; i < s->ntuple; i++) {
      const char *why = core_shape_check(&s->tuple[i], depth + 1);
      if (why) return why;
    }
    return NULL;
  }
  if ((unsigned)s->type >= HLO_TUPLE) return "has a bad element type";
  if (s->rank < 0 || s->rank > HLO_MAX_RANK) return "has a rank outside [0, 8]";
  for (int i = 0; i < s->rank; i++)
    if (s->dims[i] < 0) return "has a negative dimension";
  int64_t n;
  if (!hlo_dims_numel(s->rank, s->dims, &n)) return "has more than 2^53 elements";
  return NULL;
}

const char *hlo_shape_check(const hlo_shape *s) { return core_shape_check(s, 0); }

int64_t hlo_slice_count(int64_t start, int64_t limit, int64_t stride) {
  if (limit <= start || stride < 1) return 0;
  /* limit - start - 1 fits: 0 <= start < limit. (n + stride - 1) / stride would not. */
  return (limit - start - 1) / stride + 1;
}

bool hlo_pad_dim(int64_t dim, int64_t lo, int64_t hi, int64_t interior, int64_t *out) {
  int64_t grown, d, edges;
  if (dim < 0 || interior < 0) return false;
  if (!hlo_mul_ok(dim > 0 ? dim - 1 : 0, interior, &grown) || !hlo_add_ok(dim, grown, &d))
    return false;
  /* lo + hi first: d >= 0, so when lo + hi overflows the padded size is outside
     [0, INT64_MAX] anyway, and when it does not, d + (lo + hi) overflows only if the size
     does (lo = -INT64_MAX, hi = INT64_MAX is a valid pair). */
  if (!hlo_add_ok(lo, hi, &edges) || !hlo_add_ok(d, edges, &d) || d < 0) return false;
  *out = d;
  return true;
}

int64_t hlo_pad_step(int64_t dim, int64_t interior) {
  return dim > 1 && interior >= 0 && interior < INT64_MAX ? interior + 1 : 1;
}

void hlo_pad_range(int64_t dim, int64_t lo, int64_t step, int64_t out_dim, int64_t *i0,
                   int64_t *i1, int64_t *first) {
  /* position(i) = lo + i * step, which can leave int64 on the way (lo = INT64_MIN) even
     when the positions that land in the output do not: 128-bit arithmetic. */
  __int128 L = lo, S = step > 0 ? step : 1, a = 0, b;
  if (L < 0) a = (-L + S - 1) / S;                   /* first i with lo + i*step >= 0 */
  __int128 room = (__int128)out_dim - L;             /* i*step < out_dim - lo */
  b = room <= 0 ? 0 : (room + S - 1) / S;
  if (a > dim) a = dim;
  if (b > dim) b = dim;
  if (b < a) b = a;
  *i0 = (int64_t)a;
  *i1 = (int64_t)b;
  *first = a < b ? (int64_t)(L + a * S) : 0;
}

/* (bound - 1) * dil + 1, or 0 for bound 0. */
static bool core_dilated(int64_t bound, int64_t dil, int64_t *out) {
  if (bound == 0) { *out = 0; return true; }
  int64_t t;
  return bound > 0 && dil >= 1 && hlo_mul_ok(bound - 1, dil, &t) && hlo_add_ok(t, 1, out);
}

bool hlo_window_dim(int64_t dim, int64_t size, int64_t stride, int64_t lo, int64_t hi,
                    int64_t base_dil, int64_t win_dil, int64_t *out) {
  int64_t base, win, edges;
  if (size < 1 || stride < 1 || !core_dilated(dim, base_dil, &base) ||
      !core_dilated(size, win_dil, &win) || !hlo_add_ok(lo, hi, &edges) ||
      !hlo_add_ok(base, edges, &base) || base < 0)   /* XLA: the padded bound is >= 0 */
    return false;
  *out = win > base ? 0 : (base - win) / stride + 1;   /* base - win >= 0: no overflow */
  return true;
}
