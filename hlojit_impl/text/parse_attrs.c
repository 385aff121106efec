/* text/parse_attrs.c — the HLO parser's attributes (`, name=value` after the operands) and
   constant literals. The rest of the parser is parse.c.

   Attributes: one table row per (name, the ops it applies to, how its value is read,
   where it goes). The same name may have several rows for different ops (gather's and
   scatter's index_vector_dim land in different fields). A name with no row is an error, a
   known name on an op it does not belong to is an error, a repeated one is an error, and
   each op's required attributes are checked once the list ends. Attributes that carry no
   meaning for execution (metadata, backend_config, frontend_attributes, precision...) are
   skipped as balanced text; sharding is accepted only when it is trivial (replicated or
   maximal on device 0). References to computations are collected first and turned into
   ins->calls at the end, in the op's order: to_apply / calls / {condition, body} / {select, scatter} /
   {true, false} / branch_computations; a computation not defined yet becomes a fixup.

   Literals: dense and row-major in logical order, in the module's arena (owned = false),
   nested one brace level per dimension, the count checked against the shape at every
   level: f32[2,3] reads `{ {1, 2, 3}, {4, 5, 6} }`. Floats are read correctly rounded
   (strtof for f32, strtod for f64; f16/bf16 round the double through f32, as XLA does);
   `inf`, `-inf`, `nan`, `-nan`, `nan(0x1)` (a payload) are accepted; a finite value that
   rounds to infinity is an error, as is an integer that does not fit its type. XLA elides
   big literals as `{...}`: such a constant is accepted and filled with zeros (the values
   are gone; the module still parses, prints and compiles, and an evaluation of it is
   meaningful only for shapes). */
#include "text_internal.h"
#include <math.h>
#include <stddef.h>

#define PRA_TRY(x)                                                                        \
  do {                                                                                    \
    hj_status pra_st_ = (x);                                                              \
    if (pra_st_ != HJ_OK) return pra_st_;                                                 \
  } while (0)
#define PRA_NM(s, n) (int)((n) > 64 ? 64 : (n)), (s)

typedef struct pra_ref { const char *s; size_t n, pos; } pra_ref;
typedef struct pra_state {
  hlo_instr *ins;
  pra_ref to_apply, calls, cond, body, tcomp, fcomp, select, scatter;
  pra_ref *branches;                  /* arena */
  int nbranches;
} pra_state;

/* ---- value readers ------------------------------------------------------------------------ */

static hj_status pra_int(hlo_parser *P, int64_t *v) {
  hlo_tok t = hlo_lex_next(&P->lx);
  bool neg;
  uint64_t mag;
  if (t.kind != HLO_TK_INT) return hlo_prs_unexpected(P, &t, "an integer");
  if (!hlo_lex_tok_int(&t, &neg, &mag) || mag > (uint64_t)INT64_MAX + neg)
    return hlo_prs_err(P, t.pos, HJ_ERR_PARSE, "integer '%.*s' is out of range", PRA_NM(t.s, t.n));
  *v = neg ? (int64_t)(0 - mag) : (int64_t)mag;
  return HJ_OK;
}

/* Appends to an arena vector that doubles (the old block stays in the arena). */
static hj_status pra_push(hlo_parser *P, void **v, int n, int *cap, const void *x, size_t sz) {
  if (n == *cap) {
    *cap = *cap ? 2 * *cap : 8;
    void *g = hlo_alloc(P->m, sz * (size_t)*cap);
    if (!g) return hj__err(P->ctx, HJ_ERR_OOM, "out of memory parsing attributes");
    if (n) memcpy(g, *v, sz * (size_t)n);
    *v = g;
  }
  memcpy((char *)*v + sz * (size_t)n, x, sz);
  return HJ_OK;
}

/* `{1, 2, 3}` or `{}`. */
static hj_status pra_ints(hlo_parser *P, hlo_ints *out) {
  int cap = 0;
  out->v = NULL;
  out->n = 0;
  PRA_TRY(hlo_prs_expect(P, '{'));
  if (hlo_prs_accept(P, '}')) return HJ_OK;
  for (;;) {
    int64_t x;
    PRA_TRY(pra_int(P, &x));
    PRA_TRY(pra_push(P, (void **)&out->v, out->n, &cap, &x, sizeof x));
    out->n++;
    if (hlo_prs_accept(P, '}')) return HJ_OK;
    PRA_TRY(hlo_prs_expect(P, ','));
  }
}

/* One of |words| (NULL-terminated); its index in *which. */
static hj_status pra_word(hlo_parser *P, const char *const *words, const char *what, int *which) {
  hlo_tok t = hlo_lex_next(&P->lx);
  if (t.kind == HLO_TK_IDENT)
    for (int i = 0; words[i]; i++)
      if (strlen(words[i]) == t.n && memcmp(words[i], t.s, t.n) == 0) return *which = i, HJ_OK;
  return hlo_prs_unexpected(P, &t, what);
}

static hj_status pra_bool(hlo_parser *P, bool *b) {
  static const char *const w[] = { "false", "true", NULL };
  int i = 0;
  PRA_TRY(pra_word(P, w, "true or false", &i));
  *b = i == 1;
  return HJ_OK;
}

static hj_status pra_ref_read(hlo_parser *P, pra_ref *r) {
  hlo_tok t = hlo_lex_next(&P->lx);
  if (t.kind != HLO_TK_IDENT) return hlo_prs_unexpected(P, &t, "a computation name");
  *r = (pra_ref){ t.s, t.n, t.pos };
  return HJ_OK;
}

/* `N` or `NxMx...` glued together (window sizes); at most HLO_MAX_RANK numbers. With
   |pairs|, each number is `lo_hi` (window pads) — |v| then holds lo and |v2| hi. */
static hj_status pra_xlist(hlo_parser *P, bool pairs, int64_t *v, int64_t *v2, int *n) {
  *n = 0;
  hlo_lex_peekc(&P->lx);
  for (;;) {
    if (*n == HLO_MAX_RANK)
      return hlo_prs_err(P, P->lx.pos, HJ_ERR_PARSE, "window has more than %d dimensions", HLO_MAX_RANK);
    int r = hlo_lex_raw_int(&P->lx, &v[*n]);
    if (r == 0 && pairs) {
      if (hlo_lex_rawc(&P->lx, P->lx.pos) != '_') r = 1;
      else P->lx.pos++, r = hlo_lex_raw_int(&P->lx, &v2[*n]);
    }
    if (r != 0)
      return hlo_prs_err(P, P->lx.pos, HJ_ERR_PARSE, r == 2 ? "number out of range" :
                         pairs ? "expected low_high padding like 0_0x9_0" : "expected sizes like 1x10");
    (*n)++;
    if (hlo_lex_rawc(&P->lx, P->lx.pos) != 'x') return HJ_OK;
    P->lx.pos++;
  }
}

/* ---- attributes with their own syntax ------------------------------------------------------ */

/* slice={[0:6], [16:32:2]} */
static hj_status pra_slice(hlo_parser *P, pra_state *S, size_t pos) {
  int64_t v[3][HLO_MAX_RANK];
  int n = 0;
  PRA_TRY(hlo_prs_expect(P, '{'));
  while (!hlo_prs_accept(P, '}')) {
    if (n > 0) PRA_TRY(hlo_prs_expect(P, ','));
    if (n == HLO_MAX_RANK) return hlo_prs_err(P, P->lx.pos, HJ_ERR_PARSE, "slice has more than %d dimensions", HLO_MAX_RANK);
    PRA_TRY(hlo_prs_expect(P, '['));
    PRA_TRY(pra_int(P, &v[0][n]));
    PRA_TRY(hlo_prs_expect(P, ':'));
    PRA_TRY(pra_int(P, &v[1][n]));
    v[2][n] = 1;
    if (hlo_prs_accept(P, ':')) PRA_TRY(pra_int(P, &v[2][n]));
    PRA_TRY(hlo_prs_expect(P, ']'));
    n++;
  }
  hlo_instr *ins = S->ins;
  ins->slice_start = hlo_ints_dup(P->m, v[0], n);
  ins->slice_limit = hlo_ints_dup(P->m, v[1], n);
  ins->slice_stride = hlo_ints_dup(P->m, v[2], n);
  return HJ_OK;
}

/* padding=1_2x0_3 or 1_2_1x0_3_0 (low_high[_interior] per dimension); empty for rank 0. */
static hj_status pra_padding(hlo_parser *P, pra_state *S, size_t pos) {
  int64_t v[3][HLO_MAX_RANK] = { { 0 } };
  int n = 0;
  int c = hlo_lex_peekc(&P->lx);
  while ((c >= '0' && c <= '9') || c == '-') {
    if (n == HLO_MAX_RANK) return hlo_prs_err(P, P->lx.pos, HJ_ERR_PARSE, "padding has more than %d dimensions", HLO_MAX_RANK);
    int r = hlo_lex_raw_int(&P->lx, &v[0][n]);
    for (int k = 1; k < 3 && r == 0; k++) {
      if (hlo_lex_rawc(&P->lx, P->lx.pos) != '_') {
        if (k == 1) r = 1;
        break;
      }
      P->lx.pos++;
      r = hlo_lex_raw_int(&P->lx, &v[k][n]);
    }
    if (r != 0)
      return hlo_prs_err(P, P->lx.pos, HJ_ERR_PARSE, r == 2 ? "number out of range" : "expected padding like 1_2x0_3 or 1_2_1");
    n++;
    if (hlo_lex_rawc(&P->lx, P->lx.pos) != 'x') break;
    P->lx.pos++;
    c = hlo_lex_rawc(&P->lx, P->lx.pos);
  }
  S->ins->pad_lo = hlo_ints_dup(P->m, v[0], n);
  S->ins->pad_hi = hlo_ints_dup(P->m, v[1], n);
  S->ins->pad_interior = hlo_ints_dup(P->m, v[2], n);
  return HJ_OK;
}

/* window={size=1x10 stride=1x1 pad=0_0x9_0 lhs_dilate=1x1 rhs_dilate=1x1}; absent parts
   default to 1 (0 for pads); every part has as many numbers as size. */
static hj_status pra_window(hlo_parser *P, pra_state *S, size_t pos) {
  static const char *const parts[] = { "size", "stride", "lhs_dilate", "rhs_dilate", "pad",
                                       "rhs_reversal", NULL };
  int64_t v[7][HLO_MAX_RANK];
  int n[7] = { -1, -1, -1, -1, -1, -1, -1 };
  PRA_TRY(hlo_prs_expect(P, '{'));
  while (!hlo_prs_accept(P, '}')) {
    size_t ppos = P->lx.pos;
    int k = 0;
    PRA_TRY(pra_word(P, parts, "a window part (size, stride, pad, lhs_dilate, rhs_dilate)", &k));
    if (n[k] >= 0) return hlo_prs_err(P, ppos, HJ_ERR_PARSE, "window part '%s' given twice", parts[k]);
    PRA_TRY(hlo_prs_expect(P, '='));
    PRA_TRY(pra_xlist(P, k == 4, v[k], v[6], &n[k]));
  }
  int rank = n[0] < 0 ? 0 : n[0];
  for (int k = 1; k < 6; k++)
    if (n[k] >= 0 && n[k] != rank)
      return hlo_prs_err(P, pos, HJ_ERR_PARSE, "window part '%s' has %d numbers but size has %d", parts[k], n[k], rank);
  for (int k = 1; k < 6; k++)
    if (n[k] < 0)
      for (int i = 0; i < rank; i++) v[k][i] = k >= 4 ? 0 : 1;
  if (n[4] < 0)
    for (int i = 0; i < rank; i++) v[6][i] = 0;
  hlo_window *w = &S->ins->window;
  w->size = hlo_ints_dup(P->m, v[0], rank);
  w->stride = hlo_ints_dup(P->m, v[1], rank);
  w->base_dilation = hlo_ints_dup(P->m, v[2], rank);
  w->window_dilation = hlo_ints_dup(P->m, v[3], rank);
  w->pad_lo = hlo_ints_dup(P->m, v[4], rank);
  w->pad_hi = hlo_ints_dup(P->m, v[6], rank);
  w->reversal = hlo_ints_dup(P->m, v[5], rank);
  return HJ_OK;
}

/* dim_labels=b01f_01io->b01f: one character per dim of the input (b batch, f feature), the
   kernel (i input feature, o output feature) and the output (b, f), the digits numbering
   the spatial dims in window order; all three have the same rank. */
static hj_status pra_dim_labels(hlo_parser *P, pra_state *S, size_t pos) {
  static const char roles[3][3] = { "bf", "io", "bf" };
  int64_t fixed[3][2], sp[3][HLO_MAX_RANK];
  int len[3] = { 0, 0, 0 };
  hlo_lex_peekc(&P->lx);
  size_t start = P->lx.pos;
  for (int part = 0; part < 3; part++) {
    bool seen[HLO_MAX_RANK + 2] = { false };
    fixed[part][0] = fixed[part][1] = -1;
    for (int c; (c = hlo_lex_rawc(&P->lx, P->lx.pos)) >= 0; P->lx.pos++) {
      int d = len[part];
      if (c == roles[part][0] || c == roles[part][1]) {
        int r = c == roles[part][1];
        if (fixed[part][r] >= 0) return hlo_prs_err(P, P->lx.pos, HJ_ERR_PARSE, "dim_labels: '%c' given twice", c);
        fixed[part][r] = d;
      } else if (c >= '0' && c <= '9' && c - '0' < HLO_MAX_RANK) {
        if (seen[c - '0']) return hlo_prs_err(P, P->lx.pos, HJ_ERR_PARSE, "dim_labels: '%c' given twice", c);
        seen[c - '0'] = true;
        sp[part][c - '0'] = d;
      } else {
        break;
      }
      if (++len[part] > HLO_MAX_RANK) return hlo_prs_err(P, start, HJ_ERR_PARSE, "dim_labels: rank above %d", HLO_MAX_RANK);
    }
    int ns = len[part] - 2;
    bool ok = ns >= 0 && fixed[part][0] >= 0 && fixed[part][1] >= 0;
    for (int i = 0; ok && i < ns; i++) ok = seen[i];
    if (!ok || len[part] != len[0])
      return hlo_prs_err(P, start, HJ_ERR_PARSE, "dim_labels must read like b01f_01io->b01f (one '%c', one '%c' and "
                         "the digits 0..n-1 in each part, all parts of one rank)", roles[part][0], roles[part][1]);
    const char *sep = part == 0 ? "_" : part == 1 ? "->" : "";
    size_t sl = strlen(sep);
    if (sl && (P->lx.pos + sl > P->lx.len || memcmp(P->lx.text + P->lx.pos, sep, sl) != 0))
      return hlo_prs_err(P, P->lx.pos, HJ_ERR_PARSE, "dim_labels: expected '%s'", sep);
    P->lx.pos += sl;
  }
  hlo_conv_dims *cd = &S->ins->conv;
  int ns = len[0] - 2;
  cd->in_batch = fixed[0][0], cd->in_feature = fixed[0][1];
  cd->k_in = fixed[1][0], cd->k_out = fixed[1][1];
  cd->out_batch = fixed[2][0], cd->out_feature = fixed[2][1];
  cd->in_spatial = hlo_ints_dup(P->m, sp[0], ns);
  cd->k_spatial = hlo_ints_dup(P->m, sp[1], ns);
  cd->out_spatial = hlo_ints_dup(P->m, sp[2], ns);
  if (ns > 0 && (!cd->in_spatial.v || !cd->k_spatial.v || !cd->out_spatial.v))
    return hj__err(P->ctx, HJ_ERR_OOM, "out of memory parsing attributes");
  return HJ_OK;
}

static hj_status pra_direction(hlo_parser *P, pra_state *S, size_t pos) {
  static const char *const w[] = { "EQ", "NE", "LT", "LE", "GT", "GE", NULL };
  int i = 0;
  PRA_TRY(pra_word(P, w, "a direction (EQ, NE, LT, LE, GT, GE)", &i));
  S->ins->cmp_dir = (hlo_cmp_dir)i;
  return HJ_OK;
}

static hj_status pra_cmp_type(hlo_parser *P, pra_state *S, size_t pos) {
  static const char *const w[] = { "FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED", NULL };
  int i = 0;
  PRA_TRY(pra_word(P, w, "a comparison type (FLOAT, TOTALORDER, SIGNED, UNSIGNED)", &i));
  S->ins->cmp_type = (hlo_cmp_type)(HLO_CMPT_FLOAT + i);
  return HJ_OK;
}

static hj_status pra_kind(hlo_parser *P, pra_state *S, size_t pos) {
  static const char *const w[] = { "kLoop", "kInput", "kOutput", "kCustom", NULL };
  int i = 0;
  PRA_TRY(pra_word(P, w, "a fusion kind (kLoop, kInput, kOutput, kCustom)", &i));
  S->ins->fusion_kind = (hlo_fusion_kind)i;
  return HJ_OK;
}

static hj_status pra_branches(hlo_parser *P, pra_state *S, size_t pos) {
  int cap = 0;
  PRA_TRY(hlo_prs_expect(P, '{'));
  do {
    pra_ref r;
    PRA_TRY(pra_ref_read(P, &r));
    PRA_TRY(pra_push(P, (void **)&S->branches, S->nbranches, &cap, &r, sizeof r));
    S->nbranches++;
  } while (hlo_prs_accept(P, ','));
  return hlo_prs_expect(P, '}');
}

/* Only shardings that mean "the whole value on one device" are honoured. */
static hj_status pra_sharding(hlo_parser *P, pra_state *S, size_t pos) {
  size_t epos;
  const char *err;
  int c = hlo_lex_peekc(&P->lx);
  size_t start = P->lx.pos;
  if (!hlo_lex_skip_value(&P->lx, &epos, &err)) return hlo_prs_err(P, epos, HJ_ERR_PARSE, "%s", err);
  bool ok = c == '{';
  const char *t = P->lx.text;
  for (size_t i = start; ok && i < P->lx.pos;) {
    size_t j = i;
    while (j < P->lx.pos && ((t[j] >= 'a' && t[j] <= 'z') || (t[j] >= '0' && t[j] <= '9') || t[j] == '=' ||
                             t[j] == '_' || (t[j] >= 'A' && t[j] <= 'Z')))
      j++;
    if (j == i) {
      ok = t[i] == '{' || t[i] == '}' || t[i] == ',' || t[i] == ' ' || t[i] == '\n' || t[i] == '\t';
      i++;
      continue;
    }
    ok = (j - i == 10 && memcmp(t + i, "replicated", 10) == 0) || (j - i == 7 && memcmp(t + i, "maximal", 7) == 0) ||
         (j - i == 8 && memcmp(t + i, "device=0", 8) == 0);
    i = j;
  }
  if (!ok)
    return hlo_prs_err(P, start, HJ_ERR_UNSUPPORTED, "sharding '%.*s' is not supported (only replicated, "
                       "or maximal on device 0)", PRA_NM(t + start, P->lx.pos - start));
  return HJ_OK;
}

/* ---- the attribute table ------------------------------------------------------------------- */

static hj_status pra_rng_algorithm(hlo_parser *P, pra_state *S, size_t pos) {
  static const char *const w[] = { "rng_default", "rng_three_fry", "rng_philox", NULL };
  int i = 0;
  PRA_TRY(pra_word(P, w, "an rng algorithm (rng_default, rng_three_fry, rng_philox)", &i));
  S->ins->rng_algorithm = i;
  return HJ_OK;
}

/* custom_call_target="lapack_spotrf_ffi": one of the targets hlojit runs (ir.h's
   HLO_CUSTOM_TARGETS), else an error naming it. */
static hj_status pra_custom_target(hlo_parser *P, pra_state *S, size_t pos) {
  hlo_tok t = hlo_lex_next(&P->lx);
  if (t.kind != HLO_TK_STRING) return hlo_prs_unexpected(P, &t, "a quoted custom-call target");
  S->ins->custom.target = hlo_custom_target_from_name(t.s, t.n);
  if (S->ins->custom.target == HLO_CUSTOM_NONE)
    return hlo_prs_err(P, t.pos, HJ_ERR_UNSUPPORTED, "custom-call target \"%.*s\" is not supported (hlojit runs "
                       "jaxlib's CPU LAPACK targets: potrf, getrf, trsm, geqrf, orgqr, syevd, gesdd)", PRA_NM(t.s, t.n));
  return HJ_OK;
}

/* A custom-call's backend_config: the FFI's attribute dictionary `{uplo = 76 : ui8, ...}`
   (the keys LAPACK's kernels take; others are errors), or a string (the legacy API's
   opaque bytes: the LAPACK targets have none, so it must be empty). */
static hj_status pra_custom_config(hlo_parser *P, pra_state *S, size_t pos) {
  hlo_tok t = hlo_lex_peek(&P->lx);
  if (t.kind == HLO_TK_STRING) {
    hlo_lex_next(&P->lx);
    if (t.n) return hlo_prs_err(P, t.pos, HJ_ERR_UNSUPPORTED, "custom-call: an opaque backend_config is not supported");
    return HJ_OK;
  }
  PRA_TRY(hlo_prs_expect(P, '{'));
  if (hlo_prs_accept(P, '}')) return HJ_OK;
  static const char *const keys[] = { "uplo", "side", "trans_x", "diag", "mode", NULL };
  for (;;) {
    int k = 0;
    PRA_TRY(pra_word(P, keys, "a LAPACK attribute (uplo, side, trans_x, diag, mode)", &k));
    PRA_TRY(hlo_prs_expect(P, '='));
    int64_t v;
    size_t vpos = hlo_lex_peek(&P->lx).pos;
    PRA_TRY(pra_int(P, &v));
    if (v < 0 || v > 127)
      return hlo_prs_err(P, vpos, HJ_ERR_PARSE, "custom-call: attribute value %lld is not a character", (long long)v);
    if (hlo_prs_accept(P, ':')) {   /* the MLIR type: ui8 */
      hlo_tok ty = hlo_lex_next(&P->lx);
      if (ty.kind != HLO_TK_IDENT) return hlo_prs_unexpected(P, &ty, "an integer type (ui8)");
    }
    int64_t *f[] = { &S->ins->custom.uplo, &S->ins->custom.side, &S->ins->custom.trans_x, &S->ins->custom.diag,
                     &S->ins->custom.mode };
    *f[k] = v;
    if (hlo_prs_accept(P, '}')) return HJ_OK;
    PRA_TRY(hlo_prs_expect(P, ','));
  }
}

typedef enum { PRA_INTS, PRA_INT, PRA_BOOL, PRA_REF, PRA_FN, PRA_SKIP } pra_kind_t;
typedef struct pra_attr {
  const char *name;
  pra_kind_t kind;
  size_t off;                         /* INTS/INT/BOOL: into hlo_instr; REF: into pra_state */
  hj_status (*fn)(hlo_parser *P, pra_state *S, size_t pos);
  int nops;                           /* -1: every op */
  hlo_opcode ops[8];
} pra_attr;

#define PRA_I(f) offsetof(hlo_instr, f)
#define PRA_S(f) offsetof(pra_state, f)
#define PRA_OPS(...) (int)(sizeof((hlo_opcode[]){ __VA_ARGS__ }) / sizeof(hlo_opcode)), { __VA_ARGS__ }
#define PRA_ANY -1, { HLO_OP_PARAMETER }

static const pra_attr pra_table[] = {
  { "dimensions", PRA_INTS, PRA_I(dims), NULL,
    PRA_OPS(HLO_OP_BROADCAST, HLO_OP_REDUCE, HLO_OP_TRANSPOSE, HLO_OP_REVERSE, HLO_OP_CONCATENATE,
            HLO_OP_SORT, HLO_OP_MAP, HLO_OP_GET_DIMENSION_SIZE) },
  { "index", PRA_INT, PRA_I(index), NULL, PRA_OPS(HLO_OP_GET_TUPLE_ELEMENT) },
  { "iota_dimension", PRA_INT, PRA_I(index), NULL, PRA_OPS(HLO_OP_IOTA) },
  { "slice", PRA_FN, 0, pra_slice, PRA_OPS(HLO_OP_SLICE) },
  { "dynamic_slice_sizes", PRA_INTS, PRA_I(ds_sizes), NULL, PRA_OPS(HLO_OP_DYNAMIC_SLICE) },
  { "padding", PRA_FN, 0, pra_padding, PRA_OPS(HLO_OP_PAD) },
  { "direction", PRA_FN, 0, pra_direction, PRA_OPS(HLO_OP_COMPARE) },
  { "type", PRA_FN, 0, pra_cmp_type, PRA_OPS(HLO_OP_COMPARE) },
  { "lhs_batch_dims", PRA_INTS, PRA_I(dot.lhs_batch), NULL, PRA_OPS(HLO_OP_DOT) },
  { "rhs_batch_dims", PRA_INTS, PRA_I(dot.rhs_batch), NULL, PRA_OPS(HLO_OP_DOT) },
  { "lhs_contracting_dims", PRA_INTS, PRA_I(dot.lhs_contract), NULL, PRA_OPS(HLO_OP_DOT) },
  { "rhs_contracting_dims", PRA_INTS, PRA_I(dot.rhs_contract), NULL, PRA_OPS(HLO_OP_DOT) },
  { "offset_dims", PRA_INTS, PRA_I(gather.offset_dims), NULL, PRA_OPS(HLO_OP_GATHER) },
  { "collapsed_slice_dims", PRA_INTS, PRA_I(gather.collapsed_slice_dims), NULL, PRA_OPS(HLO_OP_GATHER) },
  { "start_index_map", PRA_INTS, PRA_I(gather.start_index_map), NULL, PRA_OPS(HLO_OP_GATHER) },
  { "index_vector_dim", PRA_INT, PRA_I(gather.index_vector_dim), NULL, PRA_OPS(HLO_OP_GATHER) },
  { "slice_sizes", PRA_INTS, PRA_I(gather.slice_sizes), NULL, PRA_OPS(HLO_OP_GATHER) },
  { "operand_batching_dims", PRA_INTS, PRA_I(gather.operand_batching_dims), NULL, PRA_OPS(HLO_OP_GATHER) },
  { "start_indices_batching_dims", PRA_INTS, PRA_I(gather.start_indices_batching_dims), NULL,
    PRA_OPS(HLO_OP_GATHER) },
  { "indices_are_sorted", PRA_BOOL, PRA_I(gather.indices_are_sorted), NULL, PRA_OPS(HLO_OP_GATHER) },
  { "update_window_dims", PRA_INTS, PRA_I(scatter.update_window_dims), NULL, PRA_OPS(HLO_OP_SCATTER) },
  { "inserted_window_dims", PRA_INTS, PRA_I(scatter.inserted_window_dims), NULL, PRA_OPS(HLO_OP_SCATTER) },
  { "scatter_dims_to_operand_dims", PRA_INTS, PRA_I(scatter.scatter_dims_to_operand_dims), NULL,
    PRA_OPS(HLO_OP_SCATTER) },
  { "index_vector_dim", PRA_INT, PRA_I(scatter.index_vector_dim), NULL, PRA_OPS(HLO_OP_SCATTER) },
  { "input_batching_dims", PRA_INTS, PRA_I(scatter.input_batching_dims), NULL, PRA_OPS(HLO_OP_SCATTER) },
  { "scatter_indices_batching_dims", PRA_INTS, PRA_I(scatter.scatter_indices_batching_dims), NULL,
    PRA_OPS(HLO_OP_SCATTER) },
  { "indices_are_sorted", PRA_BOOL, PRA_I(scatter.indices_are_sorted), NULL, PRA_OPS(HLO_OP_SCATTER) },
  { "unique_indices", PRA_BOOL, PRA_I(scatter.unique_indices), NULL, PRA_OPS(HLO_OP_SCATTER) },
  { "to_apply", PRA_REF, PRA_S(to_apply), NULL,
    PRA_OPS(HLO_OP_REDUCE, HLO_OP_REDUCE_WINDOW, HLO_OP_MAP, HLO_OP_CALL, HLO_OP_SORT, HLO_OP_SCATTER) },
  { "calls", PRA_REF, PRA_S(calls), NULL, PRA_OPS(HLO_OP_FUSION) },
  { "kind", PRA_FN, 0, pra_kind, PRA_OPS(HLO_OP_FUSION) },
  { "condition", PRA_REF, PRA_S(cond), NULL, PRA_OPS(HLO_OP_WHILE) },
  { "body", PRA_REF, PRA_S(body), NULL, PRA_OPS(HLO_OP_WHILE) },
  { "true_computation", PRA_REF, PRA_S(tcomp), NULL, PRA_OPS(HLO_OP_CONDITIONAL) },
  { "false_computation", PRA_REF, PRA_S(fcomp), NULL, PRA_OPS(HLO_OP_CONDITIONAL) },
  { "branch_computations", PRA_FN, 0, pra_branches, PRA_OPS(HLO_OP_CONDITIONAL) },
  { "is_stable", PRA_BOOL, PRA_I(is_stable), NULL, PRA_OPS(HLO_OP_SORT) },
  { "exponent_bits", PRA_INT, PRA_I(exponent_bits), NULL, PRA_OPS(HLO_OP_REDUCE_PRECISION) },
  { "mantissa_bits", PRA_INT, PRA_I(mantissa_bits), NULL, PRA_OPS(HLO_OP_REDUCE_PRECISION) },
  { "k", PRA_INT, PRA_I(k), NULL, PRA_OPS(HLO_OP_TOPK) },
  { "largest", PRA_BOOL, PRA_I(largest), NULL, PRA_OPS(HLO_OP_TOPK) },
  { "window", PRA_FN, 0, pra_window,
    PRA_OPS(HLO_OP_REDUCE_WINDOW, HLO_OP_CONVOLUTION, HLO_OP_SELECT_AND_SCATTER) },
  { "dim_labels", PRA_FN, 0, pra_dim_labels, PRA_OPS(HLO_OP_CONVOLUTION) },
  { "feature_group_count", PRA_INT, PRA_I(conv.feature_groups), NULL, PRA_OPS(HLO_OP_CONVOLUTION) },
  { "batch_group_count", PRA_INT, PRA_I(conv.batch_groups), NULL, PRA_OPS(HLO_OP_CONVOLUTION) },
  { "select", PRA_REF, PRA_S(select), NULL, PRA_OPS(HLO_OP_SELECT_AND_SCATTER) },
  { "scatter", PRA_REF, PRA_S(scatter), NULL, PRA_OPS(HLO_OP_SELECT_AND_SCATTER) },
  { "sharding", PRA_FN, 0, pra_sharding, PRA_ANY },
  { "algorithm", PRA_FN, 0, pra_rng_algorithm, PRA_OPS(HLO_OP_RNG_BIT_GENERATOR) },
  { "custom_call_target", PRA_FN, 0, pra_custom_target, PRA_OPS(HLO_OP_CUSTOM_CALL) },
  /* before the generic skip of backend_config below: the first row that applies wins */
  { "backend_config", PRA_FN, 0, pra_custom_config, PRA_OPS(HLO_OP_CUSTOM_CALL) },
  { "api_version", PRA_SKIP, 0, NULL, PRA_OPS(HLO_OP_CUSTOM_CALL) },
  { "operand_layout_constraints", PRA_SKIP, 0, NULL, PRA_OPS(HLO_OP_CUSTOM_CALL) },
  { "custom_call_has_side_effect", PRA_SKIP, 0, NULL, PRA_OPS(HLO_OP_CUSTOM_CALL) },
  /* No effect on values: skipped. (algorithm= may lower a dot's internal precision on some
     backends; computing at full precision is a valid implementation of it.) */
  { "metadata", PRA_SKIP, 0, NULL, PRA_ANY },
  { "backend_config", PRA_SKIP, 0, NULL, PRA_ANY },
  { "frontend_attributes", PRA_SKIP, 0, NULL, PRA_ANY },
  /* a composite call (jax.lax.composite): to_apply is its decomposition, which runs */
  { "is_composite", PRA_SKIP, 0, NULL, PRA_OPS(HLO_OP_CALL) },
  { "operand_precision", PRA_SKIP, 0, NULL, PRA_ANY },
  { "precision_config", PRA_SKIP, 0, NULL, PRA_ANY },
  { "result_accuracy", PRA_SKIP, 0, NULL, PRA_ANY },
  { "statistics", PRA_SKIP, 0, NULL, PRA_ANY },
  { "origin", PRA_SKIP, 0, NULL, PRA_ANY },
  { "original_value", PRA_SKIP, 0, NULL, PRA_ANY },
  { "control-predecessors", PRA_SKIP, 0, NULL, PRA_ANY },
  { "schedule", PRA_SKIP, 0, NULL, PRA_ANY },
  { "parameter_replication", PRA_SKIP, 0, NULL, PRA_ANY },
  { "output_to_operand_aliasing", PRA_SKIP, 0, NULL, PRA_ANY },
  { "algorithm", PRA_SKIP, 0, NULL, PRA_ANY },
  { "inferred_dimension", PRA_SKIP, 0, NULL, PRA_ANY },
};
#define PRA_NATTR ((int)(sizeof pra_table / sizeof *pra_table))
_Static_assert(sizeof pra_table / sizeof *pra_table <= 128, "seen-mask is 128 bits");

typedef struct pra_mask { uint64_t w[2]; } pra_mask;   /* the rows seen, by index */
static bool pra_mask_has(const pra_mask *m, int i) { return m->w[i >> 6] >> (i & 63) & 1; }

static bool pra_applies(const pra_attr *a, hlo_opcode op) {
  if (a->nops < 0) return true;
  for (int i = 0; i < a->nops; i++)
    if (a->ops[i] == op) return true;
  return false;
}

/* The row of |name| for |op|; -1 unknown name, -2 a name that belongs to other ops. */
static int pra_find(const char *name, size_t n, hlo_opcode op) {
  int r = -1;
  for (int i = 0; i < PRA_NATTR; i++)
    if (strlen(pra_table[i].name) == n && memcmp(pra_table[i].name, name, n) == 0) {
      if (pra_applies(&pra_table[i], op)) return i;
      r = -2;
    }
  return r;
}

static hj_status pra_one(hlo_parser *P, pra_state *S, pra_mask *seen) {
  hlo_tok t = hlo_lex_next(&P->lx);
  if (t.kind != HLO_TK_IDENT) return hlo_prs_unexpected(P, &t, "an attribute name");
  hlo_opcode op = S->ins->op;
  int i = pra_find(t.s, t.n, op);
  if (i == -1) return hlo_prs_err(P, t.pos, HJ_ERR_PARSE, "unknown attribute '%.*s'", PRA_NM(t.s, t.n));
  if (i == -2)
    return hlo_prs_err(P, t.pos, HJ_ERR_PARSE, "attribute '%.*s' does not apply to op '%s'", PRA_NM(t.s, t.n),
                       hlo_opcode_name(op));
  if (pra_mask_has(seen, i)) return hlo_prs_err(P, t.pos, HJ_ERR_PARSE, "attribute '%s' given twice", pra_table[i].name);
  seen->w[i >> 6] |= (uint64_t)1 << (i & 63);
  PRA_TRY(hlo_prs_expect(P, '='));
  const pra_attr *a = &pra_table[i];
  char *field = (char *)S->ins + a->off;
  size_t epos;
  const char *err;
  switch (a->kind) {
  case PRA_INTS: return pra_ints(P, (hlo_ints *)field);
  case PRA_INT: return pra_int(P, (int64_t *)field);
  case PRA_BOOL: return pra_bool(P, (bool *)field);
  case PRA_REF: return pra_ref_read(P, (pra_ref *)((char *)S + a->off));
  case PRA_FN: return a->fn(P, S, t.pos);
  case PRA_SKIP:
    if (!hlo_lex_skip_value(&P->lx, &epos, &err)) return hlo_prs_err(P, epos, HJ_ERR_PARSE, "%s", err);
    return HJ_OK;
  }
  return HJ_OK;
}

static bool pra_seen(const pra_mask *seen, const char *name, hlo_opcode op) {
  int i = pra_find(name, strlen(name), op);
  return i >= 0 && pra_mask_has(seen, i);
}

/* The attributes an op cannot do without (XLA's parser requires the same). */
static hj_status pra_required(hlo_parser *P, hlo_instr *ins, const pra_mask *seen, size_t oppos) {
  static const char *const none[] = { NULL };
  static const char *const gte[] = { "index", NULL }, *const cmp[] = { "direction", NULL },
      *const iota[] = { "iota_dimension", NULL }, *const slice[] = { "slice", NULL },
      *const ds[] = { "dynamic_slice_sizes", NULL }, *const pad[] = { "padding", NULL },
      *const dims[] = { "dimensions", NULL }, *const red[] = { "dimensions", "to_apply", NULL },
      *const app[] = { "to_apply", NULL }, *const fus[] = { "kind", "calls", NULL },
      *const wh[] = { "condition", "body", NULL }, *const rw[] = { "window", "to_apply", NULL },
      *const rp[] = { "exponent_bits", "mantissa_bits", NULL }, *const tk[] = { "k", NULL },
      *const cc[] = { "custom_call_target", NULL },
      *const cv[] = { "dim_labels", NULL }, *const sas[] = { "window", "select", "scatter", NULL },
      *const ga[] = { "offset_dims", "collapsed_slice_dims", "start_index_map", "index_vector_dim",
                      "slice_sizes", NULL },
      *const sc[] = { "update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims",
                      "index_vector_dim", "to_apply", NULL };
  const char *const *need = none;
  switch (ins->op) {
  case HLO_OP_GET_TUPLE_ELEMENT: need = gte; break;
  case HLO_OP_COMPARE: need = cmp; break;
  case HLO_OP_IOTA: need = iota; break;
  case HLO_OP_SLICE: need = slice; break;
  case HLO_OP_DYNAMIC_SLICE: need = ds; break;
  case HLO_OP_PAD: need = pad; break;
  case HLO_OP_BROADCAST: case HLO_OP_TRANSPOSE: case HLO_OP_REVERSE: case HLO_OP_CONCATENATE:
  case HLO_OP_GET_DIMENSION_SIZE: need = dims; break;
  case HLO_OP_REDUCE: case HLO_OP_SORT: need = red; break;
  case HLO_OP_MAP: case HLO_OP_CALL: need = app; break;
  case HLO_OP_REDUCE_PRECISION: need = rp; break;
  case HLO_OP_TOPK:
    need = tk;
    if (!pra_seen(seen, "largest", ins->op)) ins->largest = true;   /* XLA's default */
    break;
  case HLO_OP_FUSION: need = fus; break;
  case HLO_OP_CUSTOM_CALL: need = cc; break;
  case HLO_OP_WHILE: need = wh; break;
  case HLO_OP_REDUCE_WINDOW: need = rw; break;
  case HLO_OP_SELECT_AND_SCATTER: need = sas; break;
  case HLO_OP_CONVOLUTION:   /* window may be absent: a convolution with no spatial dims */
    need = cv;
    if (!pra_seen(seen, "feature_group_count", ins->op)) ins->conv.feature_groups = 1;
    if (!pra_seen(seen, "batch_group_count", ins->op)) ins->conv.batch_groups = 1;
    break;
  case HLO_OP_GATHER: need = ga; break;
  case HLO_OP_SCATTER: need = sc; break;
  case HLO_OP_CONDITIONAL: {
    bool br = pra_seen(seen, "branch_computations", ins->op);
    bool t = pra_seen(seen, "true_computation", ins->op), f = pra_seen(seen, "false_computation", ins->op);
    if (br ? (t || f) : !(t && f))
      return hlo_prs_err(P, oppos, HJ_ERR_PARSE, "op 'conditional' needs either branch_computations or both "
                         "true_computation and false_computation");
    break;
  }
  default: break;
  }
  for (int i = 0; need[i]; i++)
    if (!pra_seen(seen, need[i], ins->op))
      return hlo_prs_err(P, oppos, HJ_ERR_PARSE, "op '%s' needs the attribute '%s'", hlo_opcode_name(ins->op),
                         need[i]);
  return HJ_OK;
}

/* ins->calls from the collected references, in the op's order. */
static hj_status pra_calls(hlo_parser *P, pra_state *S) {
  hlo_instr *ins = S->ins;
  pra_ref two[2], *refs = two;
  int n = 0;
  switch (ins->op) {
  case HLO_OP_REDUCE: case HLO_OP_REDUCE_WINDOW: case HLO_OP_MAP: case HLO_OP_CALL: case HLO_OP_SORT:
  case HLO_OP_SCATTER: two[0] = S->to_apply; n = 1; break;
  case HLO_OP_FUSION: two[0] = S->calls; n = 1; break;
  case HLO_OP_WHILE: two[0] = S->cond; two[1] = S->body; n = 2; break;
  case HLO_OP_SELECT_AND_SCATTER: two[0] = S->select; two[1] = S->scatter; n = 2; break;
  case HLO_OP_CONDITIONAL:
    if (S->nbranches) refs = S->branches, n = S->nbranches;
    else two[0] = S->tcomp, two[1] = S->fcomp, n = 2;
    break;
  default: return HJ_OK;
  }
  ins->calls = hlo_alloc(P->m, sizeof *ins->calls * (size_t)n);
  if (!ins->calls) return hj__err(P->ctx, HJ_ERR_OOM, "out of memory");
  ins->ncalls = n;
  for (int i = 0; i < n; i++) {
    const char *name = hlo_prs_cstr(P, refs[i].s, refs[i].n);
    if (P->comp && strcmp(name, P->comp->name) == 0)
      return hlo_prs_err(P, refs[i].pos, HJ_ERR_PARSE, "computation '%s' calls itself", P->comp->name);
    ptrdiff_t k = shgeti(P->comps, name);
    if (k >= 0) {
      ins->calls[i] = P->comps[k].value;
    } else {
      hlo_prs_fixup f = { ins, i, hlo_strdup(P->m, name), refs[i].pos };
      if (!f.name) return hj__err(P->ctx, HJ_ERR_OOM, "out of memory");
      arrput(P->fixups, f);
    }
  }
  return HJ_OK;
}

hj_status hlo_prs_attrs(hlo_parser *P, hlo_instr *ins, size_t oppos, bool allow_attrs) {
  pra_state S = { .ins = ins };
  pra_mask seen = { { 0, 0 } };
  while (allow_attrs && hlo_prs_accept(P, ',')) PRA_TRY(pra_one(P, &S, &seen));
  PRA_TRY(pra_required(P, ins, &seen, oppos));
  return pra_calls(P, &S);
}

/* ---- constant literals -------------------------------------------------------------------- */

/* Largest elided `{...}` constant filled with zeros. */
#define PRA_MAX_ELIDED_BYTES ((int64_t)256 << 20)

static bool pra_tok_is(const hlo_tok *t, const char *w) {
  return t->kind == HLO_TK_IDENT && t->n == strlen(w) && memcmp(t->s, w, t->n) == 0;
}

/* `(0x1f)` after a nan: the payload (mantissa bits); 0 if absent. */
static hj_status pra_nan_payload(hlo_parser *P, uint64_t *payload) {
  *payload = 0;
  if (hlo_lex_rawc(&P->lx, P->lx.pos) != '(') return HJ_OK;
  size_t p = P->lx.pos + 1, start = P->lx.pos;
  if (hlo_lex_rawc(&P->lx, p) != '0' || hlo_lex_rawc(&P->lx, p + 1) != 'x')
    return hlo_prs_err(P, start, HJ_ERR_PARSE, "expected a NaN payload like nan(0x1)");
  p += 2;
  int digits = 0;
  for (int c; (c = hlo_lex_rawc(&P->lx, p)) >= 0; p++, digits++) {
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) break;
    if (digits >= 16) return hlo_prs_err(P, start, HJ_ERR_PARSE, "NaN payload out of range");
    *payload = *payload << 4 | (uint64_t)d;
  }
  if (digits == 0 || hlo_lex_rawc(&P->lx, p) != ')')
    return hlo_prs_err(P, start, HJ_ERR_PARSE, "expected a NaN payload like nan(0x1)");
  P->lx.pos = p + 1;
  return HJ_OK;
}

static hj_status pra_float_elem(hlo_parser *P, hlo_type ty, void *data, int64_t i, hlo_tok *t) {
  bool is_nan = pra_tok_is(t, "nan") || (t->kind == HLO_TK_FLOAT && t->n == 4 && memcmp(t->s, "-nan", 4) == 0);
  bool is_inf = pra_tok_is(t, "inf") || (t->kind == HLO_TK_FLOAT && t->n == 4 && memcmp(t->s, "-inf", 4) == 0);
  if (t->kind == HLO_TK_IDENT && !is_nan && !is_inf) return hlo_prs_unexpected(P, t, "a number");
  if (t->kind != HLO_TK_IDENT && t->kind != HLO_TK_INT && t->kind != HLO_TK_FLOAT)
    return hlo_prs_unexpected(P, t, "a number");
  if (is_nan) {
    uint64_t pl;
    PRA_TRY(pra_nan_payload(P, &pl));
    uint64_t sign = t->s[0] == '-';
    int mbits = ty == HLO_F64 ? 52 : ty == HLO_F32 ? 23 : ty == HLO_F16 ? 10 : 7;
    if (pl >> mbits) return hlo_prs_err(P, t->pos, HJ_ERR_PARSE, "NaN payload does not fit %s", hlo_type_name(ty));
    if (pl == 0) pl = (uint64_t)1 << (mbits - 1); /* the quiet NaN */
    int ebits = ty == HLO_F64 ? 11 : ty == HLO_F32 ? 8 : ty == HLO_F16 ? 5 : 8;
    uint64_t bits = sign << (mbits + ebits) | (((uint64_t)1 << ebits) - 1) << mbits | pl;
    int sz = hlo_type_size(ty);
    memcpy((char *)data + i * sz, &bits, (size_t)sz); /* little-endian hosts */
    return HJ_OK;
  }
  double d = 0;
  float f = 0;
  bool ok = ty == HLO_F32 ? hlo_lex_tok_float(t, &f) : hlo_lex_tok_double(t, &d);
  if (!ok) return hlo_prs_err(P, t->pos, HJ_ERR_PARSE, "bad number '%.*s'", PRA_NM(t->s, t->n));
  if (ty != HLO_F32) f = (float)d;
  bool inf = ty == HLO_F64 ? isinf(d) : ty == HLO_F16 ? (hlo_f32_to_f16(f) & 0x7fff) == 0x7c00
           : ty == HLO_BF16 ? (hlo_f32_to_bf16(f) & 0x7fff) == 0x7f80 : isinf(f);
  if (inf && !is_inf)
    return hlo_prs_err(P, t->pos, HJ_ERR_PARSE, "value '%.*s' is out of range for %s", PRA_NM(t->s, t->n),
                       hlo_type_name(ty));
  switch (ty) {
  case HLO_F32: ((float *)data)[i] = f; break;
  case HLO_F64: ((double *)data)[i] = d; break;
  case HLO_F16: ((uint16_t *)data)[i] = hlo_f32_to_f16(f); break;
  default: ((uint16_t *)data)[i] = hlo_f32_to_bf16(f); break;
  }
  return HJ_OK;
}

static hj_status pra_elem(hlo_parser *P, hlo_type ty, void *data, int64_t i) {
  hlo_tok t = hlo_lex_next(&P->lx);
  hlo_type_class cls = hlo_type_class_of(ty);
  if (cls == HLO_CLASS_FLOAT) return pra_float_elem(P, ty, data, i, &t);
  bool neg = false;
  uint64_t mag = 0;
  if (cls == HLO_CLASS_PRED && (pra_tok_is(&t, "true") || pra_tok_is(&t, "false"))) {
    mag = pra_tok_is(&t, "true");
  } else if (t.kind != HLO_TK_INT) {
    return hlo_prs_unexpected(P, &t, cls == HLO_CLASS_PRED ? "true or false" : "an integer");
  } else if (!hlo_lex_tok_int(&t, &neg, &mag)) {
    mag = UINT64_MAX, neg = true; /* out of any range */
  }
  int bits = cls == HLO_CLASS_PRED ? 1 : 8 * hlo_type_size(ty);
  uint64_t max_pos = cls == HLO_CLASS_SINT ? ((uint64_t)1 << (bits - 1)) - 1
                   : bits == 64 ? UINT64_MAX : ((uint64_t)1 << bits) - 1;
  uint64_t max_neg = cls == HLO_CLASS_SINT ? (uint64_t)1 << (bits - 1) : 0;
  if (neg ? mag > max_neg : mag > max_pos)
    return hlo_prs_err(P, t.pos, HJ_ERR_PARSE, "value '%.*s' is out of range for %s", PRA_NM(t.s, t.n),
                       hlo_type_name(ty));
  if (neg) hlo_store_s64(ty, data, i, (int64_t)(0 - mag));
  else hlo_store_u64(ty, data, i, mag);
  return HJ_OK;
}

/* `{ {1, 2}, {3, 4} }`: dimension |d| of |l|, elements stored from *next on. */
static hj_status pra_dense(hlo_parser *P, hlo_literal *l, int d, int64_t *next) {
  const hlo_shape *s = &l->shape;
  char sh[256];
  PRA_TRY(hlo_prs_expect(P, '{'));
  for (int64_t i = 0;; i++) {
    hlo_tok t = hlo_lex_peek(&P->lx);
    if (t.kind == HLO_TK_PUNCT && t.c == '}') {
      if (i != s->dims[d])
        return hlo_prs_err(P, t.pos, HJ_ERR_PARSE, "constant has %lld elements in dimension %d, but its shape %s "
                           "has %lld", (long long)i, d, hlo_shape_str(s, sh, sizeof sh), (long long)s->dims[d]);
      hlo_lex_next(&P->lx);
      return HJ_OK;
    }
    if (i == s->dims[d])
      return hlo_prs_err(P, t.pos, HJ_ERR_PARSE, "constant has more than %lld elements in dimension %d (shape %s)",
                         (long long)s->dims[d], d, hlo_shape_str(s, sh, sizeof sh));
    if (i > 0) PRA_TRY(hlo_prs_expect(P, ','));
    if (d == s->rank - 1) PRA_TRY(pra_elem(P, s->type, l->data, (*next)++));
    else PRA_TRY(pra_dense(P, l, d + 1, next));
  }
}

/* `{...}` as XLA writes an elided literal? Consumed if so. */
static bool pra_elided(hlo_parser *P) {
  hlo_lexer save = P->lx;
  static const char want[] = "{...}";
  for (int k = 0; k < 5; k++) {
    hlo_tok t = hlo_lex_next(&P->lx);
    if (t.kind != HLO_TK_PUNCT || t.c != want[k]) {
      P->lx = save;
      return false;
    }
  }
  return true;
}

static hj_status pra_literal(hlo_parser *P, const hlo_shape *s, hlo_literal **out) {
  hlo_literal *l = hlo_alloc(P->m, sizeof *l);
  if (!l) return hj__err(P->ctx, HJ_ERR_OOM, "out of memory");
  l->shape = *s;
  *out = l;
  char sh[256];
  if (s->type == HLO_TUPLE) {
    if (++P->depth > HLO_PRS_MAX_DEPTH)
      return hlo_prs_err(P, P->lx.pos, HJ_ERR_PARSE, "constant nested too deeply");
    l->elems = hlo_alloc(P->m, sizeof *l->elems * (size_t)(s->ntuple + 1));
    if (!l->elems) return hj__err(P->ctx, HJ_ERR_OOM, "out of memory");
    l->nelems = s->ntuple;
    PRA_TRY(hlo_prs_expect(P, '('));
    for (int i = 0; i < s->ntuple; i++) {
      if (i > 0) PRA_TRY(hlo_prs_expect(P, ','));
      PRA_TRY(pra_literal(P, &s->tuple[i], &l->elems[i]));
    }
    P->depth--;
    return hlo_prs_expect(P, ')');
  }
  if (s->type == HLO_TOKEN) return hlo_prs_err(P, P->lx.pos, HJ_ERR_UNSUPPORTED, "a constant of type token");
  int64_t numel = hlo_shape_numel(s);
  l->nbytes = numel * hlo_type_size(s->type);
  hlo_lex_peekc(&P->lx);
  size_t pos = P->lx.pos;
  bool elided = s->rank > 0 && pra_elided(P);
  if (elided ? l->nbytes > PRA_MAX_ELIDED_BYTES : numel > (int64_t)(P->lx.len - pos))
    return hlo_prs_err(P, pos, elided ? HJ_ERR_UNSUPPORTED : HJ_ERR_PARSE,
                       elided ? "elided constant %s is too large to fill with zeros"
                              : "constant %s has more elements than the rest of the text can hold",
                       hlo_shape_str(s, sh, sizeof sh));
  l->data = hlo_alloc(P->m, (size_t)l->nbytes);
  if (!l->data) return hj__err(P->ctx, HJ_ERR_OOM, "out of memory for constant %s", hlo_shape_str(s, sh, sizeof sh));
  if (elided) return HJ_OK; /* zeros: the values were not written */
  if (s->rank == 0) return pra_elem(P, s->type, l->data, 0);
  int64_t next = 0;
  return pra_dense(P, l, 0, &next);
}

hj_status hlo_prs_literal(hlo_parser *P, hlo_instr *ins) {
  return pra_literal(P, &ins->shape, &ins->literal);
}

#undef PRA_TRY
#undef PRA_NM
#undef PRA_I
#undef PRA_S
#undef PRA_OPS
#undef PRA_ANY
#undef PRA_NATTR
#undef PRA_MAX_ELIDED_BYTES
