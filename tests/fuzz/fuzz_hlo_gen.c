/* fuzz_hlo_gen.c — the structure-aware generator of the HLO fuzzer (fuzz_hlo.h): one module
   of HLO text from a 64-bit seed, well typed by construction, or with one deliberate error.

   Model: a pool of array values v0, v1, ... (element type, dims of rank <= 4 from
   {0,...,5}, and an exactness level, fuzz_hlo.h). An op picks operands from the pool, and
   when it needs a value of a given type and dims that the pool lacks it makes one: a new
   parameter (at most 6), a constant (literals hold boundary values: 0, 1, -1, the type's
   min and max, 2^31, 2^53, NaN, ±inf, -0), a convert of a value of those dims, or a
   broadcast scalar. Every instruction declares its shape, computed here from XLA's rules,
   so that the parser's shape inference is checked against an independent derivation.
   Attributes take boundary values where they are valid: slice strides of INT64_MAX, 2^31
   and 2^53 (one element), interior padding INT64_MAX on dims of 0 or 1, pads of INT64_MIN
   and -INT64_MAX cancelled by the other edge, reduce-window pads cancelled the same way,
   dynamic-slice starts and gather indices far out of range (clamped).
   Ops: every unary and binary op on every type it accepts, compare (all directions and
   comparison types), select, clamp, convert and bitcast-convert between all types, iota,
   broadcast, reshape, transpose, slice, reverse, pad, concatenate, dynamic-slice,
   dynamic-update-slice, gather, scatter (every combiner), reduce (also variadic),
   reduce-window, dot, sort, rng-bit-generator, map, call, while (counter loops of <= 4 trips), conditional
   (pred and s32 selectors, out-of-range indices), tuple/get-tuple-element, opt-barrier,
   explicit fusions (elementwise, and two-output ones around a dynamic-update-slice that
   buffer assignment may do in place). The root is a tuple of 1-3 values (and of one such
   fusion's two outputs, so that it is not dead code).
   Ill-typed modules (1 in 5): the well-typed text with one edit on one instruction line of
   the entry: a declared dim or element type changed, an attribute number replaced by a
   boundary value, an operand swapped for another value (or a later or unknown one), an
   attribute deleted, or a called computation swapped.
   The PRNG is xorshift64*, so a seed gives the same module on every machine. */
#include "fuzz_hlo_gen_internal.h"

static void sb_vadd(sbuf *b, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int k = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (k < 0) return;
  if (b->n + (size_t)k + 1 > b->cap) {
    b->cap = (b->n + (size_t)k + 1) * 2 + 256;
    char *q = realloc(b->p, b->cap);
    if (!q) abort();   /* the fuzzer's own memory: no way on */
    b->p = q;
  }
  vsnprintf(b->p + b->n, (size_t)k + 1, fmt, ap);
  b->n += (size_t)k;
}

void fg_sb_add(sbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sb_vadd(b, fmt, ap);
  va_end(ap);
}

void fg_shape_str(char *buf, size_t n, int t, int rank, const int64_t *d) {
  int k = snprintf(buf, n, "%s[", tname[t]);
  for (int i = 0; i < rank; i++) k += snprintf(buf + k, n - (size_t)k, "%s%lld", i ? "," : "", (long long)d[i]);
  snprintf(buf + k, n - (size_t)k, "]");
}

void fg_ints_str(char *buf, size_t n, const int64_t *v, int k) {
  int o = snprintf(buf, n, "{");
  for (int i = 0; i < k; i++) o += snprintf(buf + o, n - (size_t)o, "%s%lld", i ? "," : "", (long long)v[i]);
  snprintf(buf + o, n - (size_t)o, "}");
}

/* Starts "  vK = SHAPE " for a new value and returns K (the caller writes the rest). */
int fg_def(fg *g, int t, int rank, const int64_t *d, int lvl) {
  int k = g->nv < 256 ? g->nv++ : 255;
  fv *v = &g->vals[k];
  v->t = t;
  v->rank = rank;
  v->lvl = lvl;
  for (int i = 0; i < rank; i++) v->d[i] = d[i];
  char s[128];
  fg_shape_str(s, sizeof s, t, rank, d);
  fg_sb_add(&g->body, "  v%d = %s ", k, s);
  return k;
}

/* ---- literals ---------------------------------------------------------------------------- */

void fg_lit(fg *g, int t, char *buf, size_t n) {
  int r = fg_rn(g, 12);
  if (t == T_PRED) { snprintf(buf, n, "%s", r & 1 ? "true" : "false"); return; }
  if (fg_is_f(t)) {
    static const char *const sp[] = { "0", "-0", "1", "-1", "inf", "-inf", "nan", "0.5", "2147483648",
                                      "9007199254740992", "65504", "6e-08" };
    if (r < 4) {   /* f16 holds no 2^31 or 2^53: the parser rejects them, as XLA's does */
      int k = fg_rn(g, 12);
      if (t == T_F16 && (k == 8 || k == 9)) k = 10;
      snprintf(buf, n, "%s", sp[k]);
      return;
    }
    snprintf(buf, n, "%g", (double)(fg_rn(g, 32) - 16) / 8.0);
    return;
  }
  int b = tbits[t];
  if (fg_is_s(t)) {
    int64_t mx = b == 64 ? INT64_MAX : ((int64_t)1 << (b - 1)) - 1, mn = -mx - 1;
    int64_t c[] = { 0, 1, -1, mn, mx, 2, -2, (int64_t)1 << 31, (int64_t)1 << 53 };
    int64_t v = r < 5 ? c[fg_rn(g, 9)] : fg_rn(g, 16) - 8;
    if (v > mx || v < mn) v = mx;
    snprintf(buf, n, "%lld", (long long)v);
    return;
  }
  uint64_t mx = b == 64 ? UINT64_MAX : ((uint64_t)1 << b) - 1;
  uint64_t c[] = { 0, 1, mx, 2, (uint64_t)1 << 31, (uint64_t)1 << 53 };
  uint64_t v = r < 5 ? c[fg_rn(g, 6)] : (uint64_t)fg_rn(g, 16);
  if (v > mx) v = mx;
  snprintf(buf, n, "%llu", (unsigned long long)v);
}

void fg_lit_array(fg *g, int t, int rank, const int64_t *d, int dim) {
  char b[64];
  if (dim == rank) { fg_lit(g, t, b, sizeof b); fg_sb_add(&g->body, "%s", b); return; }
  fg_sb_add(&g->body, "{");
  for (int64_t i = 0; i < d[dim]; i++) {
    if (i) fg_sb_add(&g->body, ", ");
    fg_lit_array(g, t, rank, d, dim + 1);
  }
  fg_sb_add(&g->body, "}");
}

/* ---- making values ----------------------------------------------------------------------- */

int fg_param(fg *g, int t, int rank, const int64_t *d) {
  int k = fg_def(g, t, rank, d, FHG_EXACT);
  fg_sb_add(&g->body, "parameter(%d)\n", g->nparams++);
  return k;
}

/* A constant: a literal array when small, else a broadcast scalar. */
int fg_make_const(fg *g, int t, int rank, const int64_t *d) {
  fv tmp = { .t = t, .rank = rank };
  for (int i = 0; i < rank; i++) tmp.d[i] = d[i];
  bool small = fg_numel(&tmp) > 0 && fg_numel(&tmp) <= 12;
  int k = fg_def(g, t, small ? rank : 0, d, FHG_EXACT);
  fg_sb_add(&g->body, "constant(");
  fg_lit_array(g, t, small ? rank : 0, d, 0);
  fg_sb_add(&g->body, ")\n");
  if (small || rank == 0) return k;
  int b = fg_def(g, t, rank, d, FHG_EXACT);
  fg_sb_add(&g->body, "broadcast(v%d), dimensions={}\n", k);
  return b;
}

bool fg_same_dims(const fv *v, int rank, const int64_t *d) {
  if (v->rank != rank) return false;
  for (int i = 0; i < rank; i++) if (v->d[i] != d[i]) return false;
  return true;
}

/* A value of type |t| and dims |d|: from the pool, or made. */
int fg_get(fg *g, int t, int rank, const int64_t *d) {
  int m[256], nm = 0, other = -1;
  for (int i = 0; i < g->nv; i++)
    if (fg_same_dims(&g->vals[i], rank, d)) {
      if (g->vals[i].t == t) m[nm++] = i;
      else other = i;
    }
  if (nm && !fg_chance(g, 150)) return m[fg_rn(g, nm)];
  int r = fg_rn(g, 10);
  if (other >= 0 && r < 3) {
    int k = fg_def(g, t, rank, d, g->vals[other].lvl && fg_is_f(g->vals[other].t) && !fg_is_f(t) ? FHG_SKIP
                                                                               : g->vals[other].lvl);
    fg_sb_add(&g->body, "convert(v%d)\n", other);
    return k;
  }
  if (g->nparams < 6 && r < 7) return fg_param(g, t, rank, d);
  return fg_make_const(g, t, rank, d);
}

void fg_rand_dims(fg *g, int *rank, int64_t *d) {
  *rank = fg_rn(g, 5) == 0 ? 0 : 1 + fg_rn(g, 3);
  if (fg_chance(g, 60)) *rank = 4;
  for (int i = 0; i < *rank; i++) d[i] = fg_chance(g, 60) ? 0 : 1 + fg_rn(g, 4);
}

int fg_rand_type(fg *g) { return fg_rn(g, T_N); }

/* An existing value (or a new one) satisfying |ok|. */
int fg_pick(fg *g, bool (*ok)(const fv *)) {
  int m[256], nm = 0;
  for (int i = 0; i < g->nv; i++)
    if (!ok || ok(&g->vals[i])) m[nm++] = i;
  if (nm && !fg_chance(g, 100)) return m[fg_rn(g, nm)];
  for (int tries = 0; tries < 20; tries++) {
    int t = fg_rand_type(g), rank;
    int64_t d[4];
    fg_rand_dims(g, &rank, d);
    fv probe = { .t = t, .rank = rank };
    memcpy(probe.d, d, sizeof d);
    if (ok && !ok(&probe)) continue;
    return fg_get(g, t, rank, d);
  }
  return nm ? m[fg_rn(g, nm)] : fg_get(g, T_F32, 0, NULL);
}

/* ---- called computations ----------------------------------------------------------------- */

static const char *const rname[R_N] = { "add", "multiply", "maximum", "minimum", "and", "or", "" };

int fg_reducer_kind(fg *g, int t) {
  for (;;) {
    int k = fg_rn(g, R_N);
    if ((k == R_AND || k == R_OR) && fg_is_f(t)) continue;
    return k;
  }
}

/* c_N { a, b = t[] parameter(0), (1); ROOT = op(a, b) } (replace: the new value b) */
int fg_reducer(fg *g, int t, int kind) {
  int c = g->ncomp++;
  const char *ty = tname[t];
  fg_sb_add(&g->comps, "c%d {\n  c%d_a = %s[] parameter(0)\n  c%d_b = %s[] parameter(1)\n", c, c, ty, c, ty);
  if (kind == R_REPLACE) fg_sb_add(&g->comps, "  ROOT c%d_r = %s[] copy(c%d_b)\n}\n\n", c, ty, c);
  else fg_sb_add(&g->comps, "  ROOT c%d_r = %s[] %s(c%d_a, c%d_b)\n}\n\n", c, ty, rname[kind], c, c);
  return c;
}

/* The comparison type that gives a strict weak order on |t| (TOTALORDER for floats, so
   that NaNs sort somewhere fixed), or the default. */
const char *fg_cmp_type(fg *g, int t) {
  if (fg_is_f(t)) return fg_chance(g, 700) ? ", type=TOTALORDER" : fg_chance(g, 500) ? ", type=FLOAT" : "";
  if (fg_chance(g, 500)) return "";
  return fg_is_s(t) ? ", type=SIGNED" : ", type=UNSIGNED";
}

/* A comparator over |n| operand types (2n parameters) comparing the first pair. Floats by
   TOTALORDER only: a FLOAT comparison is no strict weak order once a NaN appears (NaN
   "equals" everything, and equality stops being transitive), and a sort by it then
   depends on the sorting algorithm (the evaluator's merge sort, the kernels' network,
   XLA's std::sort all differ), so no output of it can be checked. */
int fg_comparator(fg *g, const int *types, int n) {
  int c = g->ncomp++;
  fg_sb_add(&g->comps, "c%d {\n", c);
  for (int i = 0; i < 2 * n; i++)
    fg_sb_add(&g->comps, "  c%d_p%d = %s[] parameter(%d)\n", c, i, tname[types[i / 2]], i);
  fg_sb_add(&g->comps, "  ROOT c%d_r = pred[] compare(c%d_p0, c%d_p1), direction=%s%s\n}\n\n", c, c, c,
         fg_chance(g, 500) ? "LT" : "GT", fg_is_f(types[0]) ? ", type=TOTALORDER" : fg_cmp_type(g, types[0]));
  return c;
}

/* A computation of |n| parameters of shapes (types[i], dims) returning |rt|: an exact
   elementwise combination (negate, add, multiply, maximum, select on a compare), so the
   caller's exactness level is its operands'. Scalars when rank is 0 (map bodies). */
int fg_elementwise_comp(fg *g, const int *types, int n, int rank, const int64_t *d, int rt) {
  int c = g->ncomp++;
  char s[128], sr[128];
  fg_shape_str(sr, sizeof sr, rt, rank, d);
  fg_sb_add(&g->comps, "c%d {\n", c);
  for (int i = 0; i < n; i++) {
    fg_shape_str(s, sizeof s, types[i], rank, d);
    fg_sb_add(&g->comps, "  c%d_p%d = %s parameter(%d)\n", c, i, s, i);
  }
  /* every parameter converted to the result type, then folded with one op */
  for (int i = 0; i < n; i++)
    fg_sb_add(&g->comps, "  c%d_x%d = %s %s(c%d_p%d)\n", c, i, sr, types[i] == rt ? "copy" : "convert", c, i);
  int acc = 0;
  static const char *const ops2[] = { "add", "multiply", "maximum", "minimum", "subtract" };
  for (int i = 1; i < n; i++) {
    const char *op = ops2[fg_rn(g, rt == T_PRED ? 4 : 5)];
    fg_sb_add(&g->comps, "  c%d_y%d = %s %s(c%d_%c%d, c%d_x%d)\n", c, i, sr, op, c, acc ? 'y' : 'x', acc, c, i);
    acc = i;
  }
  const char *last = rt == T_PRED ? "not" : fg_is_u(rt) ? "copy" : fg_chance(g, 500) ? "negate" : "copy";
  fg_sb_add(&g->comps, "  ROOT c%d_r = %s %s(c%d_%c%d)\n}\n\n", c, sr, last, c, acc ? 'y' : 'x', acc);
  return c;
}

/* ---- the module -------------------------------------------------------------------------- */

typedef void (*fg_op)(fg *);
static const struct { fg_op fn; int weight; } fg_ops[] = {
  { fg_op_unary, 14 }, { fg_op_binary, 14 }, { fg_op_compare, 5 }, { fg_op_select_clamp, 5 }, { fg_op_convert, 8 },
  { fg_op_iota, 2 }, { fg_op_broadcast, 4 }, { fg_op_reshape, 4 }, { fg_op_transpose, 3 }, { fg_op_slice, 5 },
  { fg_op_reverse, 2 }, { fg_op_pad, 4 }, { fg_op_concat, 3 }, { fg_op_dynamic_slice, 4 }, { fg_op_gather, 4 },
  { fg_op_scatter, 3 }, { fg_op_reduce, 5 }, { fg_op_reduce_window, 2 }, { fg_op_convolution, 3 },
  { fg_op_select_and_scatter, 2 }, { fg_op_dot, 3 }, { fg_op_sort, 2 }, { fg_op_rng, 1 },
  { fg_op_map, 2 }, { fg_op_call, 3 }, { fg_op_fusion_update, 2 }, { fg_op_while, 2 }, { fg_op_conditional, 2 }, { fg_op_tuple_misc, 2 },
};

static void fg_step(fg *g) {
  int total = 0, n = (int)(sizeof fg_ops / sizeof fg_ops[0]);
  for (int i = 0; i < n; i++) total += fg_ops[i].weight;
  int r = fg_rn(g, total);
  for (int i = 0; i < n; i++) {
    if (r < fg_ops[i].weight) { fg_ops[i].fn(g); return; }
    r -= fg_ops[i].weight;
  }
}

/* ---- ill-typed modules: one edit on one entry line ---------------------------------------- */

static const char *const boundary[] = { "0", "1", "-1", "-9223372036854775808", "9223372036854775807",
                                        "2147483648", "9007199254740992", "-9007199254740993" };

/* Replaces |line|[a, b) with |rep| in the module text |t| (the line is t + off, len n). */
static char *fg_splice(const char *t, size_t at, size_t del, const char *rep) {
  size_t n = strlen(t), r = strlen(rep);
  char *o = malloc(n - del + r + 1);
  if (!o) abort();
  memcpy(o, t, at);
  memcpy(o + at, rep, r);
  memcpy(o + at + r, t + at + del, n - at - del + 1);
  return o;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static const char *fg_mutate(fg *g, char **text) {
  const char *t = *text, *entry = strstr(t, "ENTRY main {\n");
  if (!entry) return NULL;
  size_t starts[512];
  int nl = 0;
  for (const char *p = strchr(entry, '\n') + 1; *p && *p != '}' && nl < 512; p = strchr(p, '\n') + 1)
    starts[nl++] = (size_t)(p - t);
  if (!nl) return NULL;
  size_t ls = starts[fg_rn(g, nl)], le = (size_t)(strchr(t + ls, '\n') - t);
  const char *line = t + ls;
  const char *eq = strstr(line, " = ");
  if (!eq || (size_t)(eq - t) > le) return NULL;
  size_t sh = (size_t)(eq - t) + 3;          /* the declared shape starts here */
  const char *open = strchr(t + sh, '('), *attrs = open ? strchr(open, ')') : NULL;
  for (int tries = 0; tries < 8; tries++) {
    char rep[64];
    switch (fg_rn(g, 6)) {
    case 0: {   /* a dim of the declared shape */
      const char *lb = strchr(t + sh, '[');
      if (!lb || (size_t)(lb - t) > le || !is_digit(lb[1])) break;
      size_t a = (size_t)(lb - t) + 1, b = a;
      while (is_digit(t[b])) b++;
      static const char *const dv[] = { "0", "1", "2147483648", "9007199254740993", "9223372036854775807", "7" };
      char *o = fg_splice(t, a, b - a, dv[fg_rn(g, 6)]);
      free(*text); *text = o;
      return "declared dim";
    }
    case 1: {   /* the element type */
      if (t[sh] == '(') break;
      size_t b = sh;
      while (t[b] && t[b] != '[') b++;
      char *o = fg_splice(t, sh, b - sh, tname[fg_rn(g, T_N)]);
      free(*text); *text = o;
      return "element type";
    }
    case 2: {   /* a number among the attributes */
      if (!attrs || (size_t)(attrs - t) > le) break;
      size_t cand[64];
      int nc = 0;
      for (size_t i = (size_t)(attrs - t); i < le && nc < 64; i++)
        if (is_digit(t[i]) && !is_digit(t[i - 1]) && t[i - 1] != 'c' && t[i - 1] != 'v') cand[nc++] = i;
      if (!nc) break;
      size_t a = cand[fg_rn(g, nc)], b = a;
      while (is_digit(t[b])) b++;
      if (t[a - 1] == '-') a--;
      char *o = fg_splice(t, a, b - a, boundary[fg_rn(g, 8)]);
      free(*text); *text = o;
      return "attribute value";
    }
    case 3: {   /* an operand: another value, a later one or none */
      if (!open || (size_t)(open - t) > le) break;
      const char *v = strstr(open, "(v");
      if (!v || (size_t)(v - t) > le) break;
      size_t a = (size_t)(v - t) + 2, b = a;
      while (is_digit(t[b])) b++;
      snprintf(rep, sizeof rep, "%d", fg_rn(g, g->nv + 3));
      char *o = fg_splice(t, a, b - a, rep);
      free(*text); *text = o;
      return "operand";
    }
    case 4: {   /* drop the last attribute */
      if (!attrs || (size_t)(attrs - t) > le) break;
      const char *c = NULL;
      for (const char *p = attrs; p < t + le; p++) if (*p == ',' && p[1] == ' ') c = p;
      if (!c) break;
      char *o = fg_splice(t, (size_t)(c - t), le - (size_t)(c - t), "");
      free(*text); *text = o;
      return "attribute dropped";
    }
    default: {   /* a called computation */
      if (!g->ncomp || !attrs) break;
      const char *c = strstr(attrs, "=c");
      if (!c || (size_t)(c - t) > le || !is_digit(c[2])) break;
      size_t a = (size_t)(c - t) + 2, b = a;
      while (is_digit(t[b])) b++;
      snprintf(rep, sizeof rep, "%d", fg_rn(g, g->ncomp));
      char *o = fg_splice(t, a, b - a, rep);
      free(*text); *text = o;
      return "called computation";
    }
    }
  }
  return NULL;
}

void fhg_generate(uint64_t seed, fhg_module *out) {
  memset(out, 0, sizeof *out);
  fg *g = calloc(1, sizeof *g);
  if (!g) abort();
  g->s = seed * 0x9E3779B97F4A7C15ULL + 0x2545F4914F6CDD1DULL;
  if (!g->s) g->s = 1;
  int steps = 1 + fg_rn(g, fg_chance(g, 200) ? 40 : 16);
  for (int i = 0; i < steps && g->nv < 200; i++) fg_step(g);
  if (!g->nv) fg_op_unary(g);
  int nout = 1 + fg_rn(g, 3), outs[5];
  for (int k = 0; k < nout; k++)   /* mostly recent values */
    outs[k] = fg_chance(g, 700) ? g->nv - 1 - fg_rn(g, g->nv < 4 ? g->nv : 4) : fg_rn(g, g->nv);
  for (int k = 0; k < g->nkeep; k++) outs[nout++] = g->keep[k];
  sbuf t = { 0 };
  fg_sb_add(&t, "HloModule fuzz_%llu\n\n%s", (unsigned long long)seed, g->comps.p ? g->comps.p : "");
  fg_sb_add(&t, "ENTRY main {\n%s  ROOT out = (", g->body.p ? g->body.p : "");
  for (int k = 0; k < nout; k++) {
    char s[128];
    const fv *v = &g->vals[outs[k]];
    fg_shape_str(s, sizeof s, v->t, v->rank, v->d);
    fg_sb_add(&t, "%s%s", k ? ", " : "", s);
    out->exact[k] = v->lvl;
  }
  fg_sb_add(&t, ") tuple(");
  for (int k = 0; k < nout; k++) fg_sb_add(&t, "%sv%d", k ? ", " : "", outs[k]);
  fg_sb_add(&t, ")\n}\n");
  out->text = t.p;
  out->nout = nout;
  out->well_typed = true;
  out->has_while = g->has_while;
  if (fg_chance(g, 200)) {
    const char *what = fg_mutate(g, &out->text);
    if (what) {
      out->well_typed = false;
      out->mutation = what;
      for (int k = 0; k < nout; k++) out->exact[k] = FHG_SKIP;
    }
  }
  free(g->body.p);
  free(g->comps.p);
  free(g);
}

void fhg_free(fhg_module *m) {
  free(m->text);
  m->text = NULL;
}
