/* text/parse_header.c — module header attributes hlojit keeps: input_output_alias.

   Grammar (XLA's HloParser::ParseAliasing):
       aliasing    := '{' [entry (',' entry)*] '}'
       entry       := shape_index ':' '(' INT ',' shape_index [',' kind] ')'
       shape_index := '{' [INT (',' INT)*] '}'
       kind        := 'may-alias' | 'must-alias'         (absent: may-alias, as in XLA)
   Example: `input_output_alias={ {0}: (2, {}, may-alias), {1}: (3, {}) }`.
   Entries go into the module (hlo_module_add_alias, which refuses an output named twice);
   whether they name real array leaves of matching size is the verifier's question, asked
   once the entry computation exists. */
#include "text_internal.h"

/* `{1,0}` into |idx| (HLO_MAX_SHAPE_INDEX at most); *n its length. */
static hj_status prh_shape_index(hlo_parser *P, int64_t *idx, int *n) {
  *n = 0;
  hj_status st = hlo_prs_expect(P, '{');
  if (st != HJ_OK || hlo_prs_accept(P, '}')) return st;
  for (;;) {
    hlo_tok t = hlo_lex_next(&P->lx);
    bool neg;
    uint64_t v;
    if (t.kind != HLO_TK_INT) return hlo_prs_unexpected(P, &t, "a tuple index");
    if (!hlo_lex_tok_int(&t, &neg, &v) || neg || v > (uint64_t)INT32_MAX)
      return hlo_prs_err(P, t.pos, HJ_ERR_PARSE, "tuple index out of range");
    if (*n == HLO_MAX_SHAPE_INDEX)
      return hlo_prs_err(P, t.pos, HJ_ERR_UNSUPPORTED, "shape index deeper than %d", HLO_MAX_SHAPE_INDEX);
    idx[(*n)++] = (int64_t)v;
    if (hlo_prs_accept(P, '}')) return HJ_OK;
    if ((st = hlo_prs_expect(P, ',')) != HJ_OK) return st;
  }
}

static bool prh_word(const hlo_tok *t, const char *w) {
  return t->kind == HLO_TK_IDENT && t->n == strlen(w) && memcmp(t->s, w, t->n) == 0;
}

/* One `{0}: (2, {}, may-alias)`. */
static hj_status prh_entry(hlo_parser *P) {
  int64_t out[HLO_MAX_SHAPE_INDEX], pidx[HLO_MAX_SHAPE_INDEX];
  int nout, npidx;
  size_t at = hlo_lex_peek(&P->lx).pos;
  hj_status st = prh_shape_index(P, out, &nout);
  if (st == HJ_OK) st = hlo_prs_expect(P, ':');
  if (st == HJ_OK) st = hlo_prs_expect(P, '(');
  if (st != HJ_OK) return st;
  hlo_tok t = hlo_lex_next(&P->lx);
  bool neg;
  uint64_t param;
  if (t.kind != HLO_TK_INT) return hlo_prs_unexpected(P, &t, "a parameter number");
  if (!hlo_lex_tok_int(&t, &neg, &param) || neg || param > (uint64_t)INT32_MAX)
    return hlo_prs_err(P, t.pos, HJ_ERR_PARSE, "parameter number out of range");
  if ((st = hlo_prs_expect(P, ',')) != HJ_OK || (st = prh_shape_index(P, pidx, &npidx)) != HJ_OK)
    return st;
  bool must = false;
  if (hlo_prs_accept(P, ',')) {
    t = hlo_lex_next(&P->lx);
    if (prh_word(&t, "must-alias")) must = true;
    else if (!prh_word(&t, "may-alias")) return hlo_prs_unexpected(P, &t, "'may-alias' or 'must-alias'");
  }
  if ((st = hlo_prs_expect(P, ')')) != HJ_OK) return st;
  st = hlo_module_add_alias(P->m, out, nout, (int64_t)param, pidx, npidx, must);
  if (st == HJ_ERR_INVALID_ARG) {
    char msg[256];
    snprintf(msg, sizeof msg, "%.200s", P->ctx ? hj__ctx_err(P->ctx) : "bad entry");
    return hlo_prs_err(P, at, HJ_ERR_PARSE, "%s", msg);
  }
  return st;
}

hj_status hlo_prs_io_alias(hlo_parser *P) {
  hj_status st = hlo_prs_expect(P, '{');
  if (st != HJ_OK || hlo_prs_accept(P, '}')) return st;
  for (;;) {
    if ((st = prh_entry(P)) != HJ_OK) return st;
    if (hlo_prs_accept(P, '}')) return HJ_OK;
    if ((st = hlo_prs_expect(P, ',')) != HJ_OK) return st;
  }
}
