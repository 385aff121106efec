/* text/lex.c — the tokenizer of HLO text, and the parser's error messages.

   Tokens: names (`%add.1`, `get-tuple-element.14`, `f32`), integers (`-3`), floats
   (`1.5`, `-1e+10`, `-inf`, `-nan`), strings (`"..."`), `->` and single punctuation
   characters. Blanks, `// line` and `/ * block * /` comments separate tokens anywhere.

   Invariants: the text is a (pointer, length) pair and need not be NUL-terminated; no read
   ever goes past |len| (the fuzzer feeds truncated buffers under ASan). The lexer state is
   one byte offset, so peeking is a struct copy. Line and column are computed only when an
   error is reported, by counting newlines up to the error's offset.

   Context-dependent spellings (`1x10` window sizes, `0_0x9_0` paddings, `[0:6]` slices,
   `<=64` bounds) are read by the parser with hlo_lex_raw_int at the right places; the
   general tokenizer stops a number at the first character that cannot continue it. */
#include "text_internal.h"
#include <errno.h>
#include <math.h>
#include <stdlib.h>

void hlo_lex_init(hlo_lexer *lx, const char *text, size_t len) {
  lx->text = text;
  lx->len = text ? len : 0;
  lx->pos = 0;
}

int hlo_lex_rawc(const hlo_lexer *lx, size_t pos) {
  return pos < lx->len ? (unsigned char)lx->text[pos] : -1;
}

static bool lx_digit(int c) { return c >= '0' && c <= '9'; }
static bool lx_alpha(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool lx_name_start(int c) { return lx_alpha(c) || c == '$'; }
static bool lx_name_char(int c) { return lx_alpha(c) || lx_digit(c) || c == '.' || c == '-' || c == '$'; }

/* Skips blanks and comments. false: an unterminated block comment starts at *errpos. */
static bool lx_skip_space(hlo_lexer *lx, size_t *errpos) {
  for (;;) {
    int c = hlo_lex_rawc(lx, lx->pos);
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
      lx->pos++;
    } else if (c == '/' && hlo_lex_rawc(lx, lx->pos + 1) == '/') {
      while (lx->pos < lx->len && lx->text[lx->pos] != '\n') lx->pos++;
    } else if (c == '/' && hlo_lex_rawc(lx, lx->pos + 1) == '*') {
      size_t start = lx->pos;
      lx->pos += 2;
      for (;;) {
        if (lx->pos + 1 >= lx->len) {
          *errpos = start;
          lx->pos = start;
          return false;
        }
        if (lx->text[lx->pos] == '*' && lx->text[lx->pos + 1] == '/') break;
        lx->pos++;
      }
      lx->pos += 2;
    } else {
      return true;
    }
  }
}

int hlo_lex_peekc(hlo_lexer *lx) {
  size_t e;
  if (!lx_skip_space(lx, &e)) return -1;
  return hlo_lex_rawc(lx, lx->pos);
}

/* True when "inf" or "nan" starts at |p| and is not the start of a longer name. */
static bool lx_inf_nan_at(const hlo_lexer *lx, size_t p) {
  if (p + 3 > lx->len) return false;
  if (memcmp(lx->text + p, "inf", 3) != 0 && memcmp(lx->text + p, "nan", 3) != 0) return false;
  return !lx_name_char(hlo_lex_rawc(lx, p + 3));
}

static void lx_number(hlo_lexer *lx, hlo_tok *t) {
  size_t p = lx->pos;
  bool is_float = false;
  if (hlo_lex_rawc(lx, p) == '-') p++;
  if (lx_inf_nan_at(lx, p)) {
    t->kind = HLO_TK_FLOAT;
    lx->pos = p + 3;
    return;
  }
  while (lx_digit(hlo_lex_rawc(lx, p))) p++;
  if (hlo_lex_rawc(lx, p) == '.') {
    is_float = true;
    p++;
    while (lx_digit(hlo_lex_rawc(lx, p))) p++;
  }
  int e = hlo_lex_rawc(lx, p);
  if (e == 'e' || e == 'E') {
    size_t q = p + 1;
    if (hlo_lex_rawc(lx, q) == '+' || hlo_lex_rawc(lx, q) == '-') q++;
    if (lx_digit(hlo_lex_rawc(lx, q))) {
      while (lx_digit(hlo_lex_rawc(lx, q))) q++;
      p = q;
      is_float = true;
    }
  }
  t->kind = is_float ? HLO_TK_FLOAT : HLO_TK_INT;
  lx->pos = p;
}

static void lx_string(hlo_lexer *lx, hlo_tok *t) {
  size_t p = lx->pos + 1;
  for (;;) {
    int c = hlo_lex_rawc(lx, p);
    if (c < 0) {
      t->kind = HLO_TK_ERROR;
      t->err = "unterminated string";
      return;
    }
    if (c == '\\') {
      p += 2;
      continue;
    }
    p++;
    if (c == '"') break;
  }
  t->kind = HLO_TK_STRING;
  t->s = lx->text + lx->pos + 1;
  t->n = p - lx->pos - 2;
  lx->pos = p;
}

hlo_tok hlo_lex_next(hlo_lexer *lx) {
  hlo_tok t = { 0 };
  if (!lx_skip_space(lx, &t.pos)) {
    t.kind = HLO_TK_ERROR;
    t.err = "unterminated /* comment";
    return t;
  }
  size_t p = lx->pos;
  int c = hlo_lex_rawc(lx, p), c1 = hlo_lex_rawc(lx, p + 1);
  t.pos = p;
  t.s = lx->text + p;
  if (c < 0) {
    t.kind = HLO_TK_EOF;
    t.s = lx->text + lx->len;
    return t;
  }
  if (c == '%' || lx_name_start(c)) {
    size_t q = p + (c == '%');
    if (c == '%' && !lx_name_char(hlo_lex_rawc(lx, q))) {
      t.kind = HLO_TK_ERROR;
      t.err = "expected a name after '%'";
      return t;
    }
    while (lx_name_char(hlo_lex_rawc(lx, q))) q++;
    t.kind = HLO_TK_IDENT;
    t.s = lx->text + p + (c == '%');
    t.n = q - p - (c == '%');
    lx->pos = q;
    return t;
  }
  if (lx_digit(c) || (c == '.' && lx_digit(c1)) ||
      (c == '-' && (lx_digit(c1) || (c1 == '.' && lx_digit(hlo_lex_rawc(lx, p + 2))) ||
                    lx_inf_nan_at(lx, p + 1)))) {
    lx_number(lx, &t);
    t.n = lx->pos - p;
    return t;
  }
  if (c == '"') {
    lx_string(lx, &t);
    return t;
  }
  if (c == '-' && c1 == '>') {
    t.kind = HLO_TK_ARROW;
    t.n = 2;
    lx->pos += 2;
    return t;
  }
  t.kind = HLO_TK_PUNCT;
  t.c = (char)c;
  t.n = 1;
  lx->pos++;
  return t;
}

hlo_tok hlo_lex_peek(const hlo_lexer *lx) {
  hlo_lexer copy = *lx;
  return hlo_lex_next(&copy);
}

int hlo_lex_raw_int(hlo_lexer *lx, int64_t *v) {
  size_t p = lx->pos;
  bool neg = hlo_lex_rawc(lx, p) == '-';
  if (neg) p++;
  if (!lx_digit(hlo_lex_rawc(lx, p))) return 1;
  uint64_t mag = 0;
  bool over = false;
  while (lx_digit(hlo_lex_rawc(lx, p))) {
    unsigned d = (unsigned)(lx->text[p++] - '0');
    if (mag > (UINT64_MAX - d) / 10) over = true;
    else mag = mag * 10 + d;
  }
  if (over || mag > (uint64_t)INT64_MAX + neg) return 2;
  *v = neg ? (int64_t)(0 - mag) : (int64_t)mag;
  lx->pos = p;
  return 0;
}

/* ---- skipping attribute values we ignore ------------------------------------------------ */

static bool lx_skip_group(hlo_lexer *lx, size_t *errpos, const char **err) {
  char stack[HLO_PRS_MAX_DEPTH];
  int depth = 0;
  size_t open_pos = lx->pos;
  for (;;) {
    size_t e;
    if (!lx_skip_space(lx, &e)) {
      *errpos = e;
      *err = "unterminated /* comment";
      return false;
    }
    int c = hlo_lex_rawc(lx, lx->pos);
    if (c < 0) {
      *errpos = open_pos;
      *err = "unbalanced bracket: no closing bracket before the end of the text";
      return false;
    }
    if (c == '"') {
      hlo_tok t = { 0 };
      lx_string(lx, &t);
      if (t.kind == HLO_TK_ERROR) {
        *errpos = lx->pos;
        *err = t.err;
        return false;
      }
      continue;
    }
    lx->pos++;
    if (c == '{' || c == '(' || c == '[') {
      if (depth == HLO_PRS_MAX_DEPTH) {
        *errpos = lx->pos - 1;
        *err = "brackets nested too deeply (more than 64 levels)";
        return false;
      }
      stack[depth++] = (char)(c == '{' ? '}' : c == '(' ? ')' : ']');
    } else if (c == '}' || c == ')' || c == ']') {
      if (depth == 0 || stack[depth - 1] != c) {
        *errpos = lx->pos - 1;
        *err = "mismatched closing bracket";
        return false;
      }
      if (--depth == 0) return true;
    }
  }
}

bool hlo_lex_skip_value(hlo_lexer *lx, size_t *errpos, const char **err) {
  int c = hlo_lex_peekc(lx);
  if (c == '{' || c == '(' || c == '[') return lx_skip_group(lx, errpos, err);
  hlo_tok t = hlo_lex_next(lx);
  if (t.kind == HLO_TK_ERROR) {
    *errpos = t.pos;
    *err = t.err;
    return false;
  }
  if (t.kind == HLO_TK_IDENT || t.kind == HLO_TK_INT || t.kind == HLO_TK_FLOAT ||
      t.kind == HLO_TK_STRING)
    return true;
  *errpos = t.pos;
  *err = "expected an attribute value";
  return false;
}

/* ---- numbers ------------------------------------------------------------------------------- */

bool hlo_lex_tok_int(const hlo_tok *t, bool *neg, uint64_t *mag) {
  size_t i = 0;
  *neg = t->n > 0 && t->s[0] == '-';
  i = *neg;
  uint64_t v = 0;
  for (; i < t->n; i++) {
    unsigned d = (unsigned)(t->s[i] - '0');
    if (d > 9) return false;
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *mag = v;
  return true;
}

/* Copies the token into |buf| (NUL-terminated); false when it is too long to be a number. */
static bool lx_num_buf(const hlo_tok *t, char *buf, size_t cap) {
  if (t->n == 0 || t->n >= cap) return false;
  memcpy(buf, t->s, t->n);
  buf[t->n] = 0;
  return true;
}

/* inf/nan spellings: 1 = matched (value in *d), 0 = a plain number. */
static int lx_special(const char *b, double *d) {
  bool neg = b[0] == '-';
  const char *w = b + neg;
  if (strcmp(w, "inf") == 0) *d = neg ? -HUGE_VAL : HUGE_VAL;
  else if (strcmp(w, "nan") == 0) *d = neg ? -__builtin_nan("") : __builtin_nan("");
  else return 0;
  return 1;
}

/* The caller runs under the C numeric locale (hlo_parse_module switches with uselocale), so
   strtod reads '.' as the decimal point whatever the application's locale is. */
bool hlo_lex_tok_double(const hlo_tok *t, double *d) {
  char buf[512];
  if (!lx_num_buf(t, buf, sizeof buf)) return false;
  if (lx_special(buf, d)) return true;
  char *end;
  errno = 0;
  *d = strtod(buf, &end);
  return *end == 0;
}

bool hlo_lex_tok_float(const hlo_tok *t, float *f) {
  char buf[512];
  double d;
  if (!lx_num_buf(t, buf, sizeof buf)) return false;
  if (lx_special(buf, &d)) {
    *f = (float)d;
    return true;
  }
  char *end;
  *f = strtof(buf, &end); /* correctly rounded, unlike (float)strtod */
  return *end == 0;
}

/* ---- error messages ---------------------------------------------------------------------- */

/* chibicc style:  file:3:14: message
                   ROOT %x = f32[2] frob(%a)
                                    ^          (tabs in the line are kept in the caret's pad) */
hj_status hlo_lex_error(const hlo_lexer *lx, hj_ctx_t *ctx, const char *filename, size_t pos,
                        hj_status code, const char *msg) {
  if (pos > lx->len) pos = lx->len;
  size_t line_start = 0;
  int line = 1;
  for (size_t i = 0; i < pos; i++)
    if (lx->text[i] == '\n') {
      line++;
      line_start = i + 1;
    }
  size_t line_end = line_start;
  while (line_end < lx->len && lx->text[line_end] != '\n') line_end++;
  if (line_end > line_start && lx->text[line_end - 1] == '\r') line_end--;
  size_t col = pos - line_start + 1;
  /* Long lines (a constant with a million numbers) show a window around the spot. */
  size_t from = line_start, to = line_end;
  if (pos - from > 100) from = pos - 100;
  if (to - from > 200) to = from + 200;
  char shown[256], pad[256];
  size_t n = 0, k = 0;
  for (size_t i = from; i < to; i++) {
    unsigned char c = (unsigned char)lx->text[i];
    shown[n++] = (char)(c == '\t' || (c >= 0x20 && c != 0x7f) ? c : ' ');
  }
  shown[n] = 0;
  for (size_t i = from; i < pos && i < to; i++) pad[k++] = lx->text[i] == '\t' ? '\t' : ' ';
  pad[k] = 0;
  return hj__err(ctx, code, "%s:%d:%zu: %s\n%s\n%s^", filename ? filename : "<input>", line, col,
                 msg, shown, pad);
}
