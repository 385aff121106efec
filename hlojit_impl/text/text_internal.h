/* text/text_internal.h — the lexer and the parser state parse.c and parse_attrs.c share
   (private to text/). */
#ifndef HLOJIT_TEXT_INTERNAL_H
#define HLOJIT_TEXT_INTERNAL_H

#include "text.h"

/* ---- lex.c: tokenizer of HLO text (used only by parse*.c) -------- ----------------------
   The text need not be NUL-terminated: every read is bounded by |len|. Tokens are byte
   spans of the text; line:column are worked out only when an error is reported. */
typedef enum { HLO_TK_EOF, HLO_TK_IDENT, HLO_TK_INT, HLO_TK_FLOAT, HLO_TK_STRING,
               HLO_TK_PUNCT, HLO_TK_ARROW, HLO_TK_ERROR } hlo_tok_kind;
typedef struct hlo_tok {
  hlo_tok_kind kind;
  size_t pos;                         /* first byte (the '%' of "%name", the '"' of a string) */
  const char *s;                      /* payload: name without '%', string without quotes */
  size_t n;
  char c;                             /* PUNCT: the character */
  const char *err;                    /* ERROR: what is wrong (static text) */
} hlo_tok;
typedef struct hlo_lexer { const char *text; size_t len, pos; } hlo_lexer;

void hlo_lex_init(hlo_lexer *lx, const char *text, size_t len);
hlo_tok hlo_lex_next(hlo_lexer *lx);                 /* skips blanks and comments first */
hlo_tok hlo_lex_peek(const hlo_lexer *lx);
/* Next significant character (after blanks and comments) without consuming it; -1 at the
   end or before an unterminated comment. */
int hlo_lex_peekc(hlo_lexer *lx);
int hlo_lex_rawc(const hlo_lexer *lx, size_t pos);   /* byte at |pos|, -1 past the end */
/* `-?[0-9]+` right at lx->pos (no blanks skipped): 0 ok, 1 no digits, 2 overflow. */
int hlo_lex_raw_int(hlo_lexer *lx, int64_t *v);
/* Skips one balanced `{...}`, `(...)` or `[...]` group (strings and comments inside are
   honoured, nesting at most 64) starting at the next significant character, or else one
   bare word (`true`, `1`, `kLoop`). false: *errpos and *err say what is wrong. */
bool hlo_lex_skip_value(hlo_lexer *lx, size_t *errpos, const char **err);
/* Token text as numbers. INT: false on overflow of 64 bits. FLOAT/INT: correctly rounded
   (strtod/strtof in the C locale); "inf", "-inf", "nan", "-nan" are accepted. */
bool hlo_lex_tok_int(const hlo_tok *t, bool *neg, uint64_t *mag);
bool hlo_lex_tok_double(const hlo_tok *t, double *d);
bool hlo_lex_tok_float(const hlo_tok *t, float *f);
/* Records "file:line:col: msg\n<source line>\n<caret>" in |ctx| and returns |code|. */
hj_status hlo_lex_error(const hlo_lexer *lx, hj_ctx_t *ctx, const char *filename, size_t pos,
                        hj_status code, const char *msg);

/* ---- parse.c, parse_attrs.c: parser state shared by the two files ---- ------------- */
typedef struct hlo_prs_fixup {        /* a use of a computation not defined yet */
  hlo_instr *ins;
  int slot;                           /* index into ins->calls */
  const char *name;
  size_t pos;
} hlo_prs_fixup;
typedef struct hlo_parser {
  hj_ctx_t *ctx;
  const char *filename;
  hlo_lexer lx;
  hlo_module *m;
  hlo_comp *comp;                                   /* computation being parsed */
  struct hlo_prs_name { char *key; hlo_instr *value; } *names;  /* its instructions */
  struct hlo_prs_comp { char *key; hlo_comp *value; } *comps;   /* computations by name */
  struct hlo_prs_param { hlo_instr *ins; size_t pos; } *params;  /* its parameters (stb_ds) */
  struct hlo_prs_cpos { hlo_comp *key; size_t value; } *comp_pos; /* where each is named */
  struct hlo_prs_ipos { hlo_instr *key; size_t value; } *instr_pos; /* where each is written */
  hlo_prs_fixup *fixups;                            /* stb_ds */
  char *tmp;                                        /* stb_ds scratch for NUL-terminated names */
  int depth;                                        /* tuples, literals, nested operands */
  size_t alias_pos;                                 /* the input_output_alias attribute */
} hlo_parser;
#define HLO_PRS_MAX_DEPTH 64
/* Formats the message and reports it at byte |pos| (see hlo_lex_error). */
hj_status hlo_prs_err(hlo_parser *P, size_t pos, hj_status code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Reports |t| as unexpected ("expected WHAT, got 'x'"), or the lexer's own error. */
hj_status hlo_prs_unexpected(hlo_parser *P, const hlo_tok *t, const char *what);
hj_status hlo_prs_expect(hlo_parser *P, char punct);   /* consumes |punct| or fails */
bool hlo_prs_accept(hlo_parser *P, char punct);        /* consumes |punct| if next */
const char *hlo_prs_cstr(hlo_parser *P, const char *s, size_t n);  /* valid until next call */
/* hlo_parse_attrs.c: `, name=value` attributes of |ins| up to the end of the instruction
   (|oppos|: where the opcode is, for "missing attribute" errors); the constant literal. */
hj_status hlo_prs_attrs(hlo_parser *P, hlo_instr *ins, size_t oppos, bool allow_attrs);
hj_status hlo_prs_literal(hlo_parser *P, hlo_instr *ins);
/* parse_header.c: the value of the module attribute input_output_alias, after its '=':
   `{ {0}: (0, {}, may-alias), ... }` into P->m's aliases (checked by the verifier later). */
hj_status hlo_prs_io_alias(hlo_parser *P);


#endif
