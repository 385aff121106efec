/* text/parse.c — reads HLO text as XLA and JAX write it into an hlo_module.

   Grammar (what is accepted; `[x]` optional, `x*` repeated):
     module  := [`HloModule` name [`:`] (`,` attr=value)*] comp+
     comp    := [`ENTRY`] name [`(` p: shape, ... `)` `->` shape] `{` instr+ `}`
     instr   := [`ROOT`] name `=` [shape] opcode `(` operands `)` (`,` attr=value)*
     operand := [shape] name  |  [shape] opcode `(` operands `)`   (a nested instruction)
     shape   := type `[` [`<=`]N, ... `]` [`{` minor_to_major [`:` tiling...] `}`]
              | `(` shape, ... `)`
   Names may carry a leading `%`. Comments (`//`, `/ * * /`) and blanks go anywhere.
   Header attributes other than the name, and the computation signature, are read and
   dropped: the module's interface comes from the entry's parameters and root.

   Rules, as XLA's parser has them: instruction names are unique per computation and an
   operand must be defined before it is used (so the text order is topological); without
   ROOT the last instruction is the root; without ENTRY the last computation is the entry;
   parameter numbers are dense 0..n-1 in any order. A shape may be left out where it can
   be inferred (hlo_infer_shape). Computations may be used before they are defined: such
   uses are recorded as fixups and resolved at the end, then the computations are ordered
   callees first (the module invariant) and a call cycle is an error.

   Errors: the first one stops the parse; its message is "file:line:col: what" plus the
   source line and a caret (hlo_lex_error). Everything allocated lives in the module's arena
   or in stb_ds arrays owned by the parser state, so failing is freeing the module and the
   state. The verifier runs on every parsed module; its message is re-reported at the
   instruction it names (the parser remembers where each one was written). Attributes and
   constant literals are read in parse_attrs.c. */
#include "text_internal.h"
#include <locale.h>
#include <stdlib.h>

#define PRS_TRY(x)                                                                        \
  do {                                                                                    \
    hj_status prs_st_ = (x);                                                              \
    if (prs_st_ != HJ_OK) return prs_st_;                                                 \
  } while (0)
/* Names from the text in messages: at most 64 bytes of them. */
#define PRS_NM(s, n) (int)((n) > 64 ? 64 : (n)), (s)

/* ---- small helpers shared with parse_attrs.c --------------------------------------- */

hj_status hlo_prs_err(hlo_parser *P, size_t pos, hj_status code, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return hlo_lex_error(&P->lx, P->ctx, P->filename, pos, code, msg);
}

hj_status hlo_prs_unexpected(hlo_parser *P, const hlo_tok *t, const char *what) {
  switch (t->kind) {
  case HLO_TK_ERROR: return hlo_prs_err(P, t->pos, HJ_ERR_PARSE, "%s", t->err);
  case HLO_TK_EOF: return hlo_prs_err(P, t->pos, HJ_ERR_PARSE, "expected %s, got the end of the text", what);
  case HLO_TK_PUNCT: return hlo_prs_err(P, t->pos, HJ_ERR_PARSE, "expected %s, got '%c'", what, t->c);
  case HLO_TK_STRING: return hlo_prs_err(P, t->pos, HJ_ERR_PARSE, "expected %s, got a string", what);
  default: return hlo_prs_err(P, t->pos, HJ_ERR_PARSE, "expected %s, got '%.*s'", what, PRS_NM(t->s, t->n));
  }
}

bool hlo_prs_accept(hlo_parser *P, char punct) {
  hlo_tok t = hlo_lex_peek(&P->lx);
  if (t.kind != HLO_TK_PUNCT || t.c != punct) return false;
  hlo_lex_next(&P->lx);
  return true;
}

hj_status hlo_prs_expect(hlo_parser *P, char punct) {
  hlo_tok t = hlo_lex_next(&P->lx);
  if (t.kind == HLO_TK_PUNCT && t.c == punct) return HJ_OK;
  char what[4] = { '\'', punct, '\'', 0 };
  return hlo_prs_unexpected(P, &t, what);
}

const char *hlo_prs_cstr(hlo_parser *P, const char *s, size_t n) {
  arrsetlen(P->tmp, n + 1);
  memcpy(P->tmp, s, n);
  P->tmp[n] = 0;
  return P->tmp;
}

static bool prs_is(const hlo_tok *t, const char *word) {
  return t->kind == HLO_TK_IDENT && t->n == strlen(word) && memcmp(t->s, word, t->n) == 0;
}

/* A `%word` is never a keyword. */
static bool prs_keyword(const hlo_parser *P, const hlo_tok *t, const char *word) {
  return prs_is(t, word) && P->lx.text[t->pos] != '%';
}

static hj_status prs_ident(hlo_parser *P, hlo_tok *t, const char *what) {
  *t = hlo_lex_next(&P->lx);
  return t->kind == HLO_TK_IDENT ? HJ_OK : hlo_prs_unexpected(P, t, what);
}

/* ---- shapes ------------------------------------------------------------------------------ */

/* Element types XLA has and hlojit does not: named in "not supported" errors. */
static const char *const prs_other_types[] = {
  "c64", "c128", "s1", "s2", "s4", "u1", "u2", "u4", "f4e2m1fn", "f8e3m4", "f8e4m3",
  "f8e4m3fn", "f8e4m3fnuz", "f8e4m3b11fnuz", "f8e5m2", "f8e5m2fnuz", "f8e8m0fnu", "opaque",
};

static hj_status prs_elem_type(hlo_parser *P, const hlo_tok *t, hlo_type *out) {
  if (hlo_type_from_name(t->s, t->n, out) && *out != HLO_TUPLE) return HJ_OK;
  for (size_t i = 0; i < sizeof prs_other_types / sizeof *prs_other_types; i++)
    if (strlen(prs_other_types[i]) == t->n && memcmp(prs_other_types[i], t->s, t->n) == 0)
      return hlo_prs_err(P, t->pos, HJ_ERR_UNSUPPORTED, "element type '%s' is not supported",
                         prs_other_types[i]);
  /* Newer narrow float formats (f8e..., f6e..., f4e...) are XLA types too. */
  if (t->n > 3 && t->s[0] == 'f' && (t->s[1] == '8' || t->s[1] == '6' || t->s[1] == '4') && t->s[2] == 'e')
    return hlo_prs_err(P, t->pos, HJ_ERR_UNSUPPORTED, "element type '%.*s' is not supported", PRS_NM(t->s, t->n));
  return hlo_prs_err(P, t->pos, HJ_ERR_PARSE, "unknown element type '%.*s'", PRS_NM(t->s, t->n));
}

/* `[<=2, 3]`: the dims of |s|, checked for rank and element-count overflow. */
static hj_status prs_dims(hlo_parser *P, hlo_shape *s) {
  size_t open = P->lx.pos;
  PRS_TRY(hlo_prs_expect(P, '['));
  if (hlo_prs_accept(P, ']')) return HJ_OK;
  int64_t numel = 1;
  for (;;) {
    hlo_tok t = hlo_lex_next(&P->lx);
    bool bounded = false;
    if (t.kind == HLO_TK_PUNCT && t.c == '<' && hlo_lex_rawc(&P->lx, P->lx.pos) == '=') {
      P->lx.pos++;
      bounded = true;
      t = hlo_lex_next(&P->lx);
    }
    if (t.kind == HLO_TK_PUNCT && t.c == '?')
      return hlo_prs_err(P, t.pos, HJ_ERR_UNSUPPORTED, "unbounded dynamic dimension '?' is not supported");
    if (t.kind != HLO_TK_INT) return hlo_prs_unexpected(P, &t, "a dimension size");
    bool neg;
    uint64_t v;
    if (!hlo_lex_tok_int(&t, &neg, &v) || neg || v > (uint64_t)INT64_MAX)
      return hlo_prs_err(P, t.pos, HJ_ERR_PARSE, "dimension size '%.*s' is out of range", PRS_NM(t.s, t.n));
    if (s->rank == HLO_MAX_RANK)
      return hlo_prs_err(P, t.pos, HJ_ERR_UNSUPPORTED, "shape has more than %d dimensions (the maximum rank)",
                         HLO_MAX_RANK);
    s->dynamic[s->rank] = bounded;
    s->dims[s->rank++] = (int64_t)v;
    /* checked once all dims are in (ir.h's hlo_dims_numel): a zero dim anywhere makes the
       count 0, so f32[4,9223372036854775807,0] reads back as f32[0,9223372036854775807,4] does */
    if (hlo_prs_accept(P, ']')) {
      if (!hlo_dims_numel(s->rank, s->dims, &numel))
        return hlo_prs_err(P, open, HJ_ERR_PARSE, "shape has too many elements (more than 2^53)");
      return HJ_OK;
    }
    PRS_TRY(hlo_prs_expect(P, ','));
  }
}

/* `{1,0}` or `{1,0:T(8,128)(2,1)}`: minor_to_major; the tiling part after ':' is dropped. */
static hj_status prs_layout(hlo_parser *P, hlo_shape *s) {
  size_t open = P->lx.pos;
  PRS_TRY(hlo_prs_expect(P, '{'));
  int n = 0;
  bool used[HLO_MAX_RANK] = { false };
  hlo_tok t = hlo_lex_next(&P->lx);
  while (t.kind == HLO_TK_INT) {
    bool neg;
    uint64_t v;
    if (!hlo_lex_tok_int(&t, &neg, &v) || neg || v >= (uint64_t)s->rank || used[v])
      return hlo_prs_err(P, t.pos, HJ_ERR_PARSE, "layout entry '%.*s' is not a dimension of rank %d or repeats",
                         PRS_NM(t.s, t.n), s->rank);
    used[v] = true;
    s->minor_to_major[n++] = (int8_t)v;
    t = hlo_lex_next(&P->lx);
    if (t.kind == HLO_TK_PUNCT && t.c == ',') t = hlo_lex_next(&P->lx);
  }
  if (t.kind == HLO_TK_PUNCT && t.c == ':') {
    int depth = 0;
    for (t = hlo_lex_next(&P->lx); !(t.kind == HLO_TK_PUNCT && t.c == '}' && depth == 0);
         t = hlo_lex_next(&P->lx)) {
      if (t.kind == HLO_TK_EOF || t.kind == HLO_TK_ERROR) return hlo_prs_unexpected(P, &t, "'}' closing the layout");
      if (t.kind == HLO_TK_PUNCT && t.c == '(') depth++;
      if (t.kind == HLO_TK_PUNCT && t.c == ')' && --depth < 0)
        return hlo_prs_unexpected(P, &t, "'}' closing the layout");
    }
  }
  if (t.kind != HLO_TK_PUNCT || t.c != '}') return hlo_prs_unexpected(P, &t, "'}' closing the layout");
  if (n != s->rank)
    return hlo_prs_err(P, open, HJ_ERR_PARSE, "layout has %d entries but the shape has rank %d", n, s->rank);
  s->has_layout = true;
  return HJ_OK;
}

static hj_status prs_shape(hlo_parser *P, hlo_shape *out) {
  memset(out, 0, sizeof *out);
  hlo_tok t = hlo_lex_next(&P->lx);
  if (t.kind == HLO_TK_PUNCT && t.c == '(') {
    if (++P->depth > HLO_PRS_MAX_DEPTH)
      return hlo_prs_err(P, t.pos, HJ_ERR_PARSE, "tuple shapes nested too deeply (more than %d levels)",
                         HLO_PRS_MAX_DEPTH);
    out->type = HLO_TUPLE;
    int cap = 0;
    if (!hlo_prs_accept(P, ')')) {
      for (;;) {
        if (out->ntuple == cap) {
          cap = cap ? 2 * cap : 4;
          hlo_shape *grown = hlo_alloc(P->m, sizeof *grown * (size_t)cap);
          if (!grown) return hj__err(P->ctx, HJ_ERR_OOM, "out of memory parsing a tuple shape");
          if (out->ntuple) memcpy(grown, out->tuple, sizeof *grown * (size_t)out->ntuple);
          out->tuple = grown;
        }
        PRS_TRY(prs_shape(P, &out->tuple[out->ntuple]));
        out->ntuple++;
        if (hlo_prs_accept(P, ')')) break;
        PRS_TRY(hlo_prs_expect(P, ','));
      }
    }
    P->depth--;
    return HJ_OK;
  }
  if (t.kind != HLO_TK_IDENT) return hlo_prs_unexpected(P, &t, "a shape");
  PRS_TRY(prs_elem_type(P, &t, &out->type));
  PRS_TRY(prs_dims(P, out));
  if (out->type == HLO_TOKEN && out->rank != 0)
    return hlo_prs_err(P, t.pos, HJ_ERR_PARSE, "a token shape has no dimensions");
  hlo_shape_set_default_layout(out);
  out->has_layout = false;
  /* A layout is glued to the ']' (so `-> f32[] {` opens a computation body). */
  if (hlo_lex_rawc(&P->lx, P->lx.pos) == '{') PRS_TRY(prs_layout(P, out));
  return HJ_OK;
}

/* Does a shape start at the next token: `(`, or a name glued to `[`? */
static bool prs_shape_next(hlo_parser *P) {
  hlo_tok t = hlo_lex_peek(&P->lx);
  if (t.kind == HLO_TK_PUNCT) return t.c == '(';
  return t.kind == HLO_TK_IDENT && P->lx.text[t.pos] != '%' &&
         hlo_lex_rawc(&P->lx, (size_t)(t.s - P->lx.text) + t.n) == '[';
}

/* ---- instructions -------------------------------------------------------------------------- */

/* Opcodes XLA has and hlojit does not run: "not supported" rather than "unknown". */
static const char *const prs_other_ops[] = {
  "all-reduce", "all-reduce-start", "all-reduce-done", "all-gather",
  "all-gather-start", "all-gather-done", "all-to-all", "ragged-all-to-all", "reduce-scatter",
  "collective-permute", "collective-permute-start", "collective-permute-done",
  "collective-broadcast", "rng", "rng-get-and-update-state", "infeed",
  "outfeed", "send", "send-done", "recv", "recv-done", "after-all", "add-dependency",
  "fft", "triangular-solve", "cholesky", "batch-norm-training",
  "batch-norm-inference", "batch-norm-grad", "domain", "partition-id",
  "replica-id", "set-dimension-size", "dynamic-reshape", "copy-start",
  "copy-done", "async-start", "async-update", "async-done", "real", "imag", "complex",
  "stochastic-convert", "erf-inv", "composite",
};

static hj_status prs_opcode(hlo_parser *P, const hlo_tok *t, hlo_opcode *op) {
  if (t->kind != HLO_TK_IDENT || P->lx.text[t->pos] == '%') return hlo_prs_unexpected(P, t, "an opcode");
  if (hlo_opcode_from_name(t->s, t->n, op)) return HJ_OK;
  for (size_t i = 0; i < sizeof prs_other_ops / sizeof *prs_other_ops; i++)
    if (strlen(prs_other_ops[i]) == t->n && memcmp(prs_other_ops[i], t->s, t->n) == 0)
      return hlo_prs_err(P, t->pos, HJ_ERR_UNSUPPORTED, "opcode '%s' is not supported", prs_other_ops[i]);
  return hlo_prs_err(P, t->pos, HJ_ERR_UNSUPPORTED, "unknown opcode '%.*s'", PRS_NM(t->s, t->n));
}

static hj_status prs_instr_body(hlo_parser *P, const char *name, const hlo_shape *shape,
                                bool allow_attrs, hlo_instr **out);

static hlo_instr *prs_lookup(hlo_parser *P, const char *s, size_t n) {
  const char *key = hlo_prs_cstr(P, s, n);
  ptrdiff_t i = shgeti(P->names, key);
  return i >= 0 ? P->names[i].value : NULL;
}

/* `[shape] name` or a nested instruction `[shape] opcode(...)`. */
static hj_status prs_operand(hlo_parser *P, hlo_instr **out) {
  hlo_shape decl;
  bool has_decl = prs_shape_next(P);
  if (has_decl) PRS_TRY(prs_shape(P, &decl));
  hlo_tok t;
  PRS_TRY(prs_ident(P, &t, "an operand name"));
  if (hlo_lex_peekc(&P->lx) == '(') {
    if (++P->depth > HLO_PRS_MAX_DEPTH)
      return hlo_prs_err(P, t.pos, HJ_ERR_PARSE, "nested operands too deep (more than %d levels)",
                         HLO_PRS_MAX_DEPTH);
    P->lx.pos = t.pos; /* re-read the opcode */
    PRS_TRY(prs_instr_body(P, NULL, has_decl ? &decl : NULL, false, out));
    P->depth--;
    return HJ_OK;
  }
  hlo_instr *ins = prs_lookup(P, t.s, t.n);
  if (!ins)
    return hlo_prs_err(P, t.pos, HJ_ERR_PARSE, "unknown operand '%.*s' (not defined before this point in computation '%s')",
                       PRS_NM(t.s, t.n), P->comp->name);
  if (has_decl && !hlo_shape_compatible(&decl, &ins->shape)) {
    char a[256], b[256];
    return hlo_prs_err(P, t.pos, HJ_ERR_PARSE, "operand '%s' is written as %s but is %s", ins->name,
                       hlo_shape_str(&decl, a, sizeof a), hlo_shape_str(&ins->shape, b, sizeof b));
  }
  *out = ins;
  return HJ_OK;
}

/* `(a, b, ...)` into an arena array. */
static hj_status prs_operands(hlo_parser *P, hlo_instr ***ops, int *n) {
  PRS_TRY(hlo_prs_expect(P, '('));
  int cap = 0;
  *n = 0;
  if (hlo_prs_accept(P, ')')) return HJ_OK;
  for (;;) {
    if (*n == cap) {
      cap = cap ? 2 * cap : 8;
      hlo_instr **grown = hlo_alloc(P->m, sizeof *grown * (size_t)cap);
      if (!grown) return hj__err(P->ctx, HJ_ERR_OOM, "out of memory parsing operands");
      if (*n) memcpy(grown, *ops, sizeof *grown * (size_t)*n);
      *ops = grown;
    }
    PRS_TRY(prs_operand(P, &(*ops)[*n]));
    (*n)++;
    if (hlo_prs_accept(P, ')')) return HJ_OK;
    PRS_TRY(hlo_prs_expect(P, ','));
  }
}

/* A name for a nested instruction: "<opcode>.<id>", made unique in the computation. */
static const char *prs_nested_name(hlo_parser *P, hlo_opcode op) {
  char buf[96];
  snprintf(buf, sizeof buf, "%s.%d", hlo_opcode_name(op), P->m->next_id);
  while (shgeti(P->names, buf) >= 0 && strlen(buf) + 2 < sizeof buf) strcat(buf, "_");
  return hlo_strdup(P->m, buf);
}

static hj_status prs_infer(hlo_parser *P, hlo_instr *ins, size_t oppos) {
  for (int i = 0; i < ins->ncalls; i++)
    if (!ins->calls[i])
      return hlo_prs_err(P, oppos, HJ_ERR_PARSE, "the shape of '%s' cannot be inferred: it calls a computation "
                         "defined further down (write the shape, or define the computation first)", ins->name);
  hlo_shape s;
  memset(&s, 0, sizeof s);
  hj_status ist = hlo_infer_shape(P->ctx, ins, &s);
  if (ist != HJ_OK) {
    char why[900];
    snprintf(why, sizeof why, "%.899s", P->ctx ? hj__ctx_err(P->ctx) : "shape inference failed");
    return hlo_prs_err(P, oppos, ist, "cannot infer the shape of '%.64s': %s",
                       ins->name, why);
  }
  ins->shape = hlo_shape_dup(P->m, &s);
  return HJ_OK;
}

/* opcode `(` operands `)` [attributes], with the result |shape| already read (or NULL). */
static hj_status prs_instr_body(hlo_parser *P, const char *name, const hlo_shape *shape,
                                bool allow_attrs, hlo_instr **out) {
  hlo_tok t = hlo_lex_next(&P->lx);
  hlo_opcode op = HLO_OP_COUNT;
  PRS_TRY(prs_opcode(P, &t, &op));
  size_t oppos = t.pos, parpos = hlo_lex_peekc(&P->lx) >= 0 ? P->lx.pos : t.pos;
  if (!shape && (op == HLO_OP_PARAMETER || op == HLO_OP_CONSTANT || op == HLO_OP_IOTA))
    return hlo_prs_err(P, oppos, HJ_ERR_PARSE, "op '%s' needs its shape written before the opcode",
                       hlo_opcode_name(op));
  hlo_instr **ops = NULL;
  int nops = 0;
  int64_t param_no = 0;
  if (op == HLO_OP_PARAMETER || op == HLO_OP_CONSTANT) {
    PRS_TRY(hlo_prs_expect(P, '('));
    if (op == HLO_OP_PARAMETER) {
      hlo_tok n = hlo_lex_next(&P->lx);
      bool neg;
      uint64_t v;
      if (n.kind != HLO_TK_INT) return hlo_prs_unexpected(P, &n, "a parameter number");
      if (!hlo_lex_tok_int(&n, &neg, &v) || neg || v > 1u << 30)
        return hlo_prs_err(P, n.pos, HJ_ERR_PARSE, "parameter number '%.*s' is out of range", PRS_NM(n.s, n.n));
      param_no = (int64_t)v;
      parpos = n.pos;
    }
  } else {
    PRS_TRY(prs_operands(P, &ops, &nops));
    const char *want;
    if (!hlo_operand_count_ok(op, nops, &want) && *want)
      return hlo_prs_err(P, parpos, HJ_ERR_PARSE, "op '%s' takes %s operands, got %d", hlo_opcode_name(op),
                         want, nops);
    if (!hlo_operand_count_ok(op, nops, &want))
      return hlo_prs_err(P, parpos, HJ_ERR_PARSE, "op '%s' takes %d operand%s, got %d", hlo_opcode_name(op),
                         hlo_opcode_arity(op), hlo_opcode_arity(op) == 1 ? "" : "s", nops);
  }
  if (!name) name = prs_nested_name(P, op);
  hlo_instr *ins = hlo_instr_new(P->comp, op, name, shape, ops, nops);
  if (!ins) return HJ_ERR_OOM;
  ins->index = param_no;
  if (op == HLO_OP_PARAMETER) arrput(P->params, ((struct hlo_prs_param){ ins, parpos }));
  if (op == HLO_OP_CONSTANT) {
    PRS_TRY(hlo_prs_literal(P, ins));
    PRS_TRY(hlo_prs_expect(P, ')'));
  } else if (op == HLO_OP_PARAMETER) {
    PRS_TRY(hlo_prs_expect(P, ')'));
  }
  PRS_TRY(hlo_prs_attrs(P, ins, oppos, allow_attrs));
  if (!shape) PRS_TRY(prs_infer(P, ins, oppos));
  shput(P->names, (char *)ins->name, ins);
  hmput(P->instr_pos, ins, oppos);
  *out = ins;
  return HJ_OK;
}

/* `[ROOT] name = [shape] opcode(...) , attrs`. */
static hj_status prs_instruction(hlo_parser *P, hlo_instr **root) {
  hlo_tok t;
  PRS_TRY(prs_ident(P, &t, "an instruction name"));
  bool is_root = false;
  if (prs_keyword(P, &t, "ROOT")) {
    hlo_tok n = hlo_lex_peek(&P->lx);
    if (!(n.kind == HLO_TK_PUNCT && n.c == '=')) {
      is_root = true;
      PRS_TRY(prs_ident(P, &t, "an instruction name"));
    }
  }
  if (prs_lookup(P, t.s, t.n))
    return hlo_prs_err(P, t.pos, HJ_ERR_PARSE, "instruction '%.*s' is already defined in computation '%s'",
                       PRS_NM(t.s, t.n), P->comp->name);
  const char *name = hlo_strndup(P->m, t.s, t.n);
  if (!name) return hj__err(P->ctx, HJ_ERR_OOM, "out of memory");
  PRS_TRY(hlo_prs_expect(P, '='));
  hlo_shape shape;
  size_t rhs = hlo_lex_peekc(&P->lx) >= 0 ? P->lx.pos : t.pos;
  bool has_shape = prs_shape_next(P);
  if (has_shape) PRS_TRY(prs_shape(P, &shape));
  hlo_instr *ins;
  PRS_TRY(prs_instr_body(P, name, has_shape ? &shape : NULL, true, &ins));
  hmput(P->instr_pos, ins, rhs);
  if (is_root) {
    if (*root)
      return hlo_prs_err(P, t.pos, HJ_ERR_PARSE, "computation '%s' has a second ROOT ('%s' is the first)",
                         P->comp->name, (*root)->name);
    *root = ins;
  }
  return HJ_OK;
}

/* ---- computations ---------------------------------------------------------------------- */

/* `(p: f32[], q: s32[]) -> f32[]`: read for syntax, then dropped. */
static hj_status prs_signature(hlo_parser *P) {
  hlo_shape s;
  PRS_TRY(hlo_prs_expect(P, '('));
  if (!hlo_prs_accept(P, ')')) {
    for (;;) {
      hlo_tok t;
      PRS_TRY(prs_ident(P, &t, "a parameter name"));
      PRS_TRY(hlo_prs_expect(P, ':'));
      PRS_TRY(prs_shape(P, &s));
      if (hlo_prs_accept(P, ')')) break;
      PRS_TRY(hlo_prs_expect(P, ','));
    }
  }
  hlo_tok a = hlo_lex_next(&P->lx);
  if (a.kind != HLO_TK_ARROW) return hlo_prs_unexpected(P, &a, "'->'");
  return prs_shape(P, &s);
}

/* The root (ROOT or the last instruction) and the parameters by number. */
static hj_status prs_finish_comp(hlo_parser *P, hlo_comp *c, hlo_instr *root, size_t namepos) {
  ptrdiff_t n = arrlen(c->instrs), np = arrlen(P->params);
  if (n == 0) return hlo_prs_err(P, namepos, HJ_ERR_PARSE, "computation '%s' has no instructions", c->name);
  c->root = root ? root : c->instrs[n - 1];
  c->root->is_root = true;
  arrsetlen(c->params, np);
  for (ptrdiff_t i = 0; i < np; i++) c->params[i] = NULL;
  for (ptrdiff_t i = 0; i < np; i++) {
    hlo_instr *ins = P->params[i].ins;
    if (ins->index >= np || c->params[ins->index])
      return hlo_prs_err(P, P->params[i].pos, HJ_ERR_PARSE, "computation '%s' has %td parameters, so their "
                         "numbers must be 0..%td, each once; this one is %lld", c->name, np, np - 1,
                         (long long)ins->index);
    c->params[ins->index] = ins;
  }
  return HJ_OK;
}

static hj_status prs_computation(hlo_parser *P, hlo_comp **entry) {
  hlo_tok t;
  PRS_TRY(prs_ident(P, &t, "a computation name (or ENTRY)"));
  bool is_entry = prs_keyword(P, &t, "ENTRY");
  if (is_entry) PRS_TRY(prs_ident(P, &t, "the entry computation's name"));
  const char *name = hlo_prs_cstr(P, t.s, t.n);
  if (shgeti(P->comps, name) >= 0)
    return hlo_prs_err(P, t.pos, HJ_ERR_PARSE, "computation '%.*s' is defined twice", PRS_NM(t.s, t.n));
  hlo_comp *c = hlo_comp_new(P->m, name);
  if (!c) return HJ_ERR_OOM;
  shput(P->comps, (char *)c->name, c);
  hmput(P->comp_pos, c, t.pos);
  if (is_entry) {
    if (*entry)
      return hlo_prs_err(P, t.pos, HJ_ERR_PARSE, "a second ENTRY computation ('%s' is the first)", (*entry)->name);
    *entry = c;
  }
  if (hlo_lex_peekc(&P->lx) == '(') PRS_TRY(prs_signature(P));
  PRS_TRY(hlo_prs_expect(P, '{'));
  P->comp = c;
  shfree(P->names);
  P->names = NULL;
  arrsetlen(P->params, 0);
  hlo_instr *root = NULL;
  while (!hlo_prs_accept(P, '}')) {
    hlo_tok n = hlo_lex_peek(&P->lx);
    if (n.kind != HLO_TK_IDENT) {
      char what[160];
      snprintf(what, sizeof what, "an instruction or '}' closing computation '%.64s'", c->name);
      return hlo_prs_unexpected(P, &n, what);
    }
    PRS_TRY(prs_instruction(P, &root));
  }
  PRS_TRY(prs_finish_comp(P, c, root, t.pos));
  P->comp = NULL;
  return HJ_OK;
}

/* `HloModule name[:] (, attr=value)*`; input_output_alias is kept (parse_header.c), the
   other attributes are dropped. */
static hj_status prs_header(hlo_parser *P) {
  hlo_tok t = hlo_lex_peek(&P->lx);
  if (!prs_keyword(P, &t, "HloModule")) return HJ_OK;
  hlo_lex_next(&P->lx);
  PRS_TRY(prs_ident(P, &t, "the module name"));
  P->m->name = hlo_strndup(P->m, t.s, t.n);
  if (!P->m->name) return hj__err(P->ctx, HJ_ERR_OOM, "out of memory");
  hlo_prs_accept(P, ':');
  while (hlo_prs_accept(P, ',')) {
    PRS_TRY(prs_ident(P, &t, "a module attribute"));
    PRS_TRY(hlo_prs_expect(P, '='));
    if (prs_is(&t, "input_output_alias")) {
      P->alias_pos = t.pos;
      PRS_TRY(hlo_prs_io_alias(P));
      continue;
    }
    size_t epos;
    const char *err;
    if (!hlo_lex_skip_value(&P->lx, &epos, &err)) return hlo_prs_err(P, epos, HJ_ERR_PARSE, "%s", err);
  }
  return HJ_OK;
}

/* ---- after the last computation: forward references, order, entry ----------------------- */

typedef struct { hlo_comp *key; int value; } prs_mark;   /* 1: on the DFS stack, 2: placed */
typedef struct { hlo_comp *c; ptrdiff_t i; int k; } prs_frame;  /* at instrs[i]->calls[k] */

/* Post-order DFS from |root| with an explicit stack (call chains may be long): callees are
   appended to |order| before their callers; meeting a computation still on the stack is a
   cycle. */
static hj_status prs_order(hlo_parser *P, hlo_comp *root, prs_mark **marks, hlo_comp ***order) {
  if (hmget(*marks, root) != 0) return HJ_OK;
  prs_frame *stack = NULL;
  hj_status st = HJ_OK;
  hmput(*marks, root, 1);
  arrput(stack, ((prs_frame){ root, 0, 0 }));
  while (arrlen(stack) > 0 && st == HJ_OK) {
    prs_frame *f = &arrlast(stack);
    if (f->i == arrlen(f->c->instrs)) {
      hmput(*marks, f->c, 2);
      arrput(*order, f->c);
      arrpop(stack);
      continue;
    }
    hlo_instr *ins = f->c->instrs[f->i];
    if (f->k == ins->ncalls) {
      f->i++;
      f->k = 0;
      continue;
    }
    hlo_comp *callee = ins->calls[f->k++];
    int mark = (int)hmget(*marks, callee);
    if (mark == 1)
      st = hlo_prs_err(P, hmget(P->comp_pos, callee), HJ_ERR_PARSE, "computation '%s' calls itself through "
                       "computations that call each other in a cycle", callee->name);
    else if (mark == 0) {
      hmput(*marks, callee, 1);
      arrput(stack, ((prs_frame){ callee, 0, 0 }));
    }
  }
  arrfree(stack);
  return st;
}

static hj_status prs_finish_module(hlo_parser *P, hlo_comp *entry) {
  for (ptrdiff_t i = 0; i < arrlen(P->fixups); i++) {
    hlo_prs_fixup *f = &P->fixups[i];
    ptrdiff_t k = shgeti(P->comps, f->name);
    if (k < 0) return hlo_prs_err(P, f->pos, HJ_ERR_PARSE, "unknown computation '%.64s'", f->name);
    f->ins->calls[f->slot] = P->comps[k].value;
  }
  hlo_module *m = P->m;
  if (arrlen(m->comps) == 0)
    return hlo_prs_err(P, P->lx.len, HJ_ERR_PARSE, "no computation in the text");
  m->entry = entry ? entry : m->comps[arrlen(m->comps) - 1];
  m->entry->is_entry = true;
  if (arrlen(P->fixups) == 0) return HJ_OK; /* definitions precede uses: order is fine */
  prs_mark *marks = NULL;
  hlo_comp **order = NULL;
  hj_status st = HJ_OK;
  for (ptrdiff_t i = 0; i < arrlen(m->comps) && st == HJ_OK; i++)
    st = prs_order(P, m->comps[i], &marks, &order);
  if (st == HJ_OK) memcpy(m->comps, order, sizeof *order * (size_t)arrlen(order));
  hmfree(marks);
  arrfree(order);
  return st;
}

/* ---- entry point ------------------------------------------------------------------------ */

/* Where the first instruction of |c| quoted in |s| ('name') was written; |dflt| if none. */
static size_t prs_quoted_instr_pos(hlo_parser *P, const hlo_comp *c, const char *s, size_t dflt) {
  for (const char *q = strchr(s, '\''); q; q = strchr(q + 1, '\'')) {
    const char *qe = strchr(q + 1, '\'');
    if (!qe) break;
    size_t n = (size_t)(qe - q - 1);
    for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++)
      if (strlen(c->instrs[i]->name) == n && memcmp(c->instrs[i]->name, q + 1, n) == 0)
        return hmget(P->instr_pos, c->instrs[i]);
    q = qe;
  }
  return dflt;
}

/* The verifier knows no positions: its message ("verifier: computation 'c': 'x' (add)
   declares ...") is re-reported at the first instruction of 'c' it names, else at 'c',
   else at the entry computation. */
static hj_status prs_verify(hlo_parser *P) {
  hj_status st = hlo_verify_module(P->m);
  if (st == HJ_OK || st == HJ_ERR_OOM || !P->ctx) return st;
  char msg[1024];
  snprintf(msg, sizeof msg, "%.1000s", hj__ctx_err(P->ctx));
  size_t pos = strstr(msg, "input_output_alias") ? P->alias_pos : hmget(P->comp_pos, P->m->entry);
  const char *c = strstr(msg, "computation '"), *ce = c ? strchr(c + 13, '\'') : NULL;
  ptrdiff_t k = ce ? shgeti(P->comps, hlo_prs_cstr(P, c + 13, (size_t)(ce - c - 13))) : -1;
  if (k >= 0) {
    hlo_comp *comp = P->comps[k].value;
    pos = prs_quoted_instr_pos(P, comp, ce + 1, hmget(P->comp_pos, comp));
  }
  return hlo_prs_err(P, pos, st, "%s", msg);
}

static hj_status prs_module(hlo_parser *P) {
  PRS_TRY(prs_header(P));
  hlo_comp *entry = NULL;
  for (;;) {
    hlo_tok t = hlo_lex_peek(&P->lx);
    if (t.kind == HLO_TK_EOF) break;
    if (t.kind == HLO_TK_ERROR) return hlo_prs_unexpected(P, &t, "a computation");
    PRS_TRY(prs_computation(P, &entry));
  }
  return prs_finish_module(P, entry);
}

hj_status hlo_parse_module(hj_ctx_t *ctx, const char *text, size_t len, const char *filename,
                           hlo_module **out) {
  if (!out) return hj__err(ctx, HJ_ERR_INVALID_ARG, "hlo_parse_module: out is NULL");
  *out = NULL;
  if (!text && len) return hj__err(ctx, HJ_ERR_INVALID_ARG, "hlo_parse_module: text is NULL");
  hlo_parser P = { .ctx = ctx, .filename = filename };
  hlo_lex_init(&P.lx, text, len);
  P.m = hlo_module_new(ctx, "module");
  if (!P.m) return HJ_ERR_OOM;
  /* Numbers are read with strtod: switch this thread to the C numeric locale meanwhile. */
  locale_t cloc = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
  locale_t old = cloc ? uselocale(cloc) : (locale_t)0;
  hj_status st = prs_module(&P);
  if (cloc) {
    uselocale(old);
    freelocale(cloc);
  }
  if (st == HJ_OK) st = prs_verify(&P);
  shfree(P.names);
  shfree(P.comps);
  arrfree(P.fixups);
  arrfree(P.params);
  hmfree(P.comp_pos);
  hmfree(P.instr_pos);
  arrfree(P.tmp);
  if (st != HJ_OK) {
    hlo_module_free(P.m);
    return st;
  }
  *out = P.m;
  return HJ_OK;
}

#undef PRS_TRY
#undef PRS_NM
