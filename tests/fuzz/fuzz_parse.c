/* fuzz_parse.c — a mutation fuzzer for hlojit's HLO text parser, printer and evaluator.

   Usage: fuzz_parse [--count N] [--seed S] [--save DIR] [--no-eval] [--verbose] DIR...

   Loads every .hlo file in each DIR and in DIR's immediate subdirectories (the corpus has
   golden/), sorted by path so that a run depends only on the files and the seed. It feeds
   each seed once as it is, then |count| mutated texts. A mutant is a seed with 1-3 edits:
   truncation, byte flips (random or "interesting" bytes such as NUL, braces, digits),
   insertions, deletions, a token spliced in from another module (tokens: runs of
   identifier characters, or single punctuation), a number replaced by a boundary value
   (0, -1, 2^31, 2^63, 1e309, ...), a duplicated line, a deleted line.

   Each text goes to hj_module_parse in a malloc'd buffer of exactly its length (no NUL
   after it), so AddressSanitizer catches any read past |len|. Then:
     - parsed:   hj_module_print must succeed; the printed text must parse again and print
                 to the same text (the printer's output is canonical: a fixed point); if the
                 module has no `while` and its shapes are small, it is compiled for the
                 reference evaluator and run on zeroed inputs (an error is fine, a crash or
                 an error without a message is not);
     - rejected: *out must stay NULL and the message must hold a position `:LINE:COL:`
                 (a ':' then digits, ':', digits), unless the status is HJ_ERR_OOM.
   A failing input is saved to DIR/fail-N.hlo (--save, default build/fuzz-failures) with
   the reason; a crash (ASan/UBSan report, or a 10 s hang) saves the input being run to
   DIR/crash.hlo first. The last line reads `fuzz_parse: N passed, M failed` (CI reads
   it); the exit status is 1 when anything failed.

   The PRNG is xorshift64*, so a seed gives the same inputs on every machine. */
#define _GNU_SOURCE
#include "hlojit.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_UNDEFINED__)
#include <sanitizer/common_interface_defs.h>
#define FZ_HAVE_SANITIZER 1
#endif

/* ---- PRNG ------------------------------------------------------------------------- */
static uint64_t fz_state = 1;
static uint64_t fz_next(void) {
  fz_state ^= fz_state >> 12;
  fz_state ^= fz_state << 25;
  fz_state ^= fz_state >> 27;
  return fz_state * 0x2545F4914F6CDD1DULL;
}
static size_t fz_below(size_t n) { return n ? (size_t)(fz_next() % n) : 0; }

/* ---- seeds ------------------------------------------------------------------------ */
typedef struct { size_t off, len; } fz_span;
typedef struct {
  char *path;
  char *text;
  size_t len;
  fz_span *toks; size_t ntoks;    /* token spans, for splicing */
} fz_seed;

static fz_seed *fz_seeds;
static size_t fz_nseeds, fz_capseeds;

static void *fz_xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (!q) { fprintf(stderr, "fuzz_parse: out of memory\n"); exit(2); }
  return q;
}

static int fz_is_ident(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '_' || c == '.' || c == '%' || c == '-' || c == '+';
}

static void fz_index(fz_seed *s) {
  size_t cap = 0, i = 0;
  while (i < s->len) {
    unsigned char c = (unsigned char)s->text[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') { i++; continue; }
    size_t j = i + 1;
    if (fz_is_ident(c)) while (j < s->len && fz_is_ident((unsigned char)s->text[j])) j++;
    if (s->ntoks == cap) { cap = cap ? 2 * cap : 256; s->toks = fz_xrealloc(s->toks, cap * sizeof *s->toks); }
    s->toks[s->ntoks++] = (fz_span){ i, j - i };
    i = j;
  }
}

static int fz_has_suffix(const char *s, const char *suf) {
  size_t n = strlen(s), m = strlen(suf);
  return n >= m && strcmp(s + n - m, suf) == 0;
}

static void fz_add_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return;
  char *buf = NULL;
  size_t len = 0, cap = 0, got;
  do {
    if (cap - len < 65536) { cap = cap ? 2 * cap : 65536; buf = fz_xrealloc(buf, cap); }
    got = fread(buf + len, 1, cap - len, f);
    len += got;
  } while (got > 0);
  fclose(f);
  if (fz_nseeds == fz_capseeds) {
    fz_capseeds = fz_capseeds ? 2 * fz_capseeds : 64;
    fz_seeds = fz_xrealloc(fz_seeds, fz_capseeds * sizeof *fz_seeds);
  }
  fz_seed *s = &fz_seeds[fz_nseeds++];
  memset(s, 0, sizeof *s);
  s->path = strdup(path);
  s->text = buf;
  s->len = len;
  fz_index(s);
}

static int fz_cmpstr(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Appends the sorted paths of |dir|'s .hlo files (and, if |depth| > 0, those of its
   subdirectories) to *paths. */
static void fz_scan(const char *dir, int depth, char ***paths, size_t *n, size_t *cap) {
  DIR *d = opendir(dir);
  if (!d) { fprintf(stderr, "fuzz_parse: cannot open %s: %s\n", dir, strerror(errno)); return; }
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char *p = NULL;
    if (asprintf(&p, "%s/%s", dir, e->d_name) < 0) continue;
    struct stat st;
    if (stat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
      if (depth > 0) fz_scan(p, depth - 1, paths, n, cap);
      free(p);
    } else if (fz_has_suffix(e->d_name, ".hlo")) {
      if (*n == *cap) { *cap = *cap ? 2 * *cap : 64; *paths = fz_xrealloc(*paths, *cap * sizeof **paths); }
      (*paths)[(*n)++] = p;
    } else {
      free(p);
    }
  }
  closedir(d);
}

/* ---- mutations -------------------------------------------------------------------- */
typedef struct { char *p; size_t len, cap; } fz_buf;

static void fz_reserve(fz_buf *b, size_t n) {
  if (n > b->cap) { b->cap = n * 2 + 64; b->p = fz_xrealloc(b->p, b->cap); }
}
/* Replaces b[at, at+del) by |ins| (n bytes). */
static void fz_splice(fz_buf *b, size_t at, size_t del, const char *ins, size_t n) {
  if (at > b->len) at = b->len;
  if (del > b->len - at) del = b->len - at;
  fz_reserve(b, b->len - del + n);
  memmove(b->p + at + n, b->p + at + del, b->len - at - del);
  if (n) memcpy(b->p + at, ins, n);
  b->len = b->len - del + n;
}

static const char fz_interesting[] = "\0\n {}[]()<>,=:%-_.0123456789/*\"'\\xe";

static char fz_rand_byte(void) {
  uint64_t r = fz_next();
  if (r & 1) return fz_interesting[(r >> 8) % (sizeof fz_interesting - 1)];
  return (char)(r >> 8);
}

/* The line of the buffer around |pos| (with its '\n'): its start in *start, its length. */
static size_t fz_line_at(const fz_buf *b, size_t pos, size_t *start) {
  size_t s = pos, e = pos;
  while (s > 0 && b->p[s - 1] != '\n') s--;
  while (e < b->len && b->p[e] != '\n') e++;
  if (e < b->len) e++;
  *start = s;
  return e - s;
}

static const char *fz_mutate(fz_buf *b, const fz_seed *self) {
  size_t pos = fz_below(b->len + 1);
  switch (fz_below(9)) {
  case 0:  /* truncation */
    b->len = pos;
    return "truncate";
  case 1: { /* byte flips */
    if (!b->len) return "flip(empty)";
    int n = 1 + (int)fz_below(4);
    for (int i = 0; i < n; i++) b->p[fz_below(b->len)] = fz_rand_byte();
    return "flip";
  }
  case 2: { /* insertion of 1-8 bytes */
    char ins[8];
    size_t n = 1 + fz_below(8);
    for (size_t i = 0; i < n; i++) ins[i] = fz_rand_byte();
    fz_splice(b, pos, 0, ins, n);
    return "insert";
  }
  case 3:  /* deletion of 1-16 bytes */
    fz_splice(b, pos, 1 + fz_below(16), NULL, 0);
    return "delete";
  case 4:
  case 5: { /* token splice from another module (or this one) */
    const fz_seed *o = fz_below(4) == 0 ? self : &fz_seeds[fz_below(fz_nseeds)];
    if (!o->ntoks || !b->len) return "token(none)";
    fz_span t = o->toks[fz_below(o->ntoks)];
    /* Replace the token around |pos| in the buffer, or insert before it. */
    size_t s = pos < b->len ? pos : b->len - 1, e;
    if (fz_is_ident((unsigned char)b->p[s])) {
      while (s > 0 && fz_is_ident((unsigned char)b->p[s - 1])) s--;
      e = s;
      while (e < b->len && fz_is_ident((unsigned char)b->p[e])) e++;
    } else {
      e = s + (fz_below(2) ? 1 : 0);
    }
    fz_splice(b, s, e - s, o->text + t.off, t.len);
    return "token";
  }
  case 6: { /* duplicate a line */
    size_t s, n = fz_line_at(b, pos < b->len ? pos : (b->len ? b->len - 1 : 0), &s);
    if (!n) return "dup(none)";
    char *copy = malloc(n);
    if (!copy) return "dup(oom)";
    memcpy(copy, b->p + s, n);
    size_t at = fz_below(2) ? s : s + n;    /* right before or right after */
    if (fz_below(4) == 0) fz_line_at(b, fz_below(b->len + 1), &at);  /* or anywhere */
    fz_splice(b, at, 0, copy, n);
    free(copy);
    return "dupline";
  }
  case 7: { /* a number near |pos| becomes a boundary value (dims, indices, literals) */
    static const char *const nums[] = {
      "0", "1", "-1", "2", "8", "255", "256", "65536", "2147483647", "2147483648",
      "-2147483648", "4294967296", "9223372036854775807", "9223372036854775808",
      "-9223372036854775809", "99999999999999999999999", "1000000", "1e309", "-0", "nan",
      "inf", "0x10", "1.5", "65505" };
    size_t s = pos;
    while (s < b->len && !(b->p[s] >= '0' && b->p[s] <= '9')) s++;
    if (s >= b->len) return "number(none)";
    size_t e = s;
    while (e < b->len && b->p[e] >= '0' && b->p[e] <= '9') e++;
    const char *n = nums[fz_below(sizeof nums / sizeof nums[0])];
    fz_splice(b, s, e - s, n, strlen(n));
    return "number";
  }
  default: { /* delete a line */
    size_t s, n = fz_line_at(b, pos < b->len ? pos : (b->len ? b->len - 1 : 0), &s);
    fz_splice(b, s, n, NULL, 0);
    return "delline";
  }
  }
}

/* ---- checks ----------------------------------------------------------------------- */
static const char *fz_save_dir = "build/fuzz-failures";
static const char *fz_current;         /* the input being run, for the crash handler */
static size_t fz_current_len;
static long fz_current_iter = -1;
static int fz_verbose;

static long fz_failures, fz_failed_inputs, fz_tried;
static int fz_this_failed;

static void fz_mkdirs(const char *dir) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s", dir);
  for (char *p = tmp + 1; *p; p++)
    if (*p == '/') { *p = 0; mkdir(tmp, 0777); *p = '/'; }
  mkdir(tmp, 0777);
}

static void fz_write(const char *path, const char *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return;
  fwrite(data, 1, n, f);
  fclose(f);
}

/* A crash, sanitizer report or hang: saves the input being run and prints the summary
   line (this input counted as failed). Runs once, from a signal handler or the
   sanitizer's death callback, so it keeps to plain stdio on the way out. */
static void fz_die_report(void) {
  static int done;
  if (done) return;
  done = 1;
  if (fz_current) {
    char path[4200];
    snprintf(path, sizeof path, "%s/crash.hlo", fz_save_dir);
    fz_mkdirs(fz_save_dir);
    fz_write(path, fz_current, fz_current_len);
    fprintf(stderr, "fuzz_parse: input %ld crashed or hung; saved to %s\n", fz_current_iter, path);
  }
  long failed = fz_failed_inputs + (fz_this_failed ? 0 : 1);
  printf("fuzz_parse: %ld passed, %ld failed\n", fz_tried - failed, failed);
  fflush(stdout);
}

#ifdef FZ_HAVE_SANITIZER
/* UBSan's report does not run the death callback when ASan is linked too: make it abort
   (caught below) and print a stack trace. */
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void) { return "print_stacktrace=1:abort_on_error=1"; }
#endif

static void fz_on_abort(int sig) {
  fz_die_report();
  signal(sig, SIG_DFL);
  raise(sig);
}

static void fz_on_alarm(int sig) {
  (void)sig;
  fprintf(stderr, "fuzz_parse: timeout (10 s on one input)\n");
  fz_die_report();
  _exit(2);
}

/* Failure counts by reason (the reasons are string literals), for the summary. */
#define FZ_MAX_REASONS 16
static const char *fz_reason[FZ_MAX_REASONS];
static long fz_reason_count[FZ_MAX_REASONS];
static int fz_nreasons;

static long fz_count_reason(const char *why) {
  int i = 0;
  while (i < fz_nreasons && fz_reason[i] != why) i++;
  if (i == fz_nreasons) {
    if (fz_nreasons == FZ_MAX_REASONS) return 0;
    fz_reason[fz_nreasons++] = why;
  }
  return fz_reason_count[i]++;
}

static void fz_fail(const char *why, const char *text, size_t len, const char *detail,
                    const char *origin) {
  char path[4200];
  fz_mkdirs(fz_save_dir);
  snprintf(path, sizeof path, "%s/fail-%ld.hlo", fz_save_dir, fz_failures);
  fz_write(path, text, len);
  if (fz_count_reason(why) < 3 || fz_verbose)   /* the first three of each kind */
    fprintf(stderr, "FAIL #%ld (input %ld, from %s): %s\n  saved: %s\n  %s\n", fz_failures,
            fz_current_iter, origin, why, path, detail ? detail : "");
  fz_failures++;
  if (!fz_this_failed) fz_failed_inputs++;
  fz_this_failed = 1;
}

/* A ':' followed by digits, ':', digits — a line:column position. */
static int fz_has_position(const char *msg) {
  for (const char *p = msg; *p; p++) {
    if (*p != ':') continue;
    const char *q = p + 1;
    if (*q < '0' || *q > '9') continue;
    while (*q >= '0' && *q <= '9') q++;
    if (*q != ':') continue;
    q++;
    if (*q >= '0' && *q <= '9') return 1;
  }
  return 0;
}

/* Largest array and total element count over every `[d,d,...]` shape in |text|
   (slice attributes, which hold ':', are skipped). Keeps evaluation cheap. */
static void fz_shape_sizes(const char *text, double *max_one, double *total) {
  *max_one = 0; *total = 0;
  for (const char *p = text; *p; p++) {
    if (*p != '[') continue;
    double n = 1;
    const char *q = p + 1;
    int ok = 1;
    while (*q && *q != ']') {
      if (*q == '<' || *q == '=' || *q == ',' || *q == ' ') { q++; continue; }
      if (*q < '0' || *q > '9') { ok = 0; break; }
      double d = 0;
      while (*q >= '0' && *q <= '9') d = d * 10 + (*q++ - '0');
      n *= d;
    }
    if (!ok || *q != ']') continue;
    if (n > *max_one) *max_one = n;
    *total += n;
  }
}

static long fz_parsed, fz_rejected, fz_evaluated, fz_eval_errors;

static void fz_eval(hj_ctx_t *ctx, hj_module_t *m, const char *printed, const char *text,
                    size_t len, const char *origin) {
  double max_one, total;
  if (strstr(printed, "while(")) return;      /* may not terminate */
  fz_shape_sizes(printed, &max_one, &total);
  if (max_one >= 1e5 || total >= 1e6) return;
  /* reduce-window costs elements x window size: keep it well below the 10 s watchdog */
  if (strstr(printed, "reduce-window(") && max_one >= 2e3) return;
  int nin = hj_module_num_inputs(m);
  if (nin < 0 || nin > 64) return;
  hj_exec_t *e = NULL;
  hj_ctx_clear_error(ctx);
  hj_status st = hj_compile_module(ctx, m, &e);
  if (st != HJ_OK) {
    if (e) fz_fail("hj_compile_module failed but set *out", text, len, hj_ctx_error(ctx), origin);
    if (!hj_ctx_error(ctx)[0]) fz_fail("hj_compile_module failed without a message", text, len, NULL, origin);
    fz_eval_errors++;
    return;
  }
  hj_buffer_t *in[64] = {0};
  int nout = hj_exec_num_outputs(e);
  hj_buffer_t **out = calloc(nout > 0 ? (size_t)nout : 1, sizeof *out);
  int ok = out != NULL;
  for (int i = 0; ok && i < nin; i++) {
    hj_dtype_t t; hj_shape_t s;
    if (hj_module_input(m, i, &t, &s) != HJ_OK) { ok = 0; break; }
    for (int k = 0; k < s.rank; k++) if (s.dims[k] < 0) s.dims[k] = -s.dims[k];
    if (hj_buffer_create(ctx, t, s, &in[i]) != HJ_OK) ok = 0;
  }
  if (ok) {
    hj_ctx_clear_error(ctx);
    st = hj_exec_run(e, in, nin, out, nout);
    fz_evaluated++;
    if (st != HJ_OK) {
      fz_eval_errors++;
      if (!hj_ctx_error(ctx)[0]) fz_fail("hj_exec_run failed without a message", text, len, NULL, origin);
    }
  }
  for (int i = 0; i < nout; i++) if (out && out[i]) hj_buffer_destroy(out[i]);
  for (int i = 0; i < nin; i++) if (in[i]) hj_buffer_destroy(in[i]);
  free(out);
  hj_exec_destroy(e);
}

/* Parses |len| bytes at |text| from an exact-size heap copy. */
static hj_status fz_parse_exact(hj_ctx_t *ctx, const char *text, size_t len, hj_module_t **m) {
  char *copy = malloc(len ? len : 1);
  if (!copy) { fprintf(stderr, "fuzz_parse: out of memory\n"); exit(2); }
  if (len) memcpy(copy, text, len);
  fz_current = copy;
  fz_current_len = len;
  *m = (hj_module_t *)(uintptr_t)1;    /* must become NULL or a module */
  hj_ctx_clear_error(ctx);
  hj_status st = hj_module_parse(ctx, copy, len, "fuzz.hlo", m);
  fz_current = text;
  free(copy);
  return st;
}

static int fz_do_eval = 1;

static void fz_one(hj_ctx_t *ctx, const char *text, size_t len, const char *origin) {
  fz_tried++;
  fz_this_failed = 0;
  fz_current = text;
  fz_current_len = len;
  alarm(10);
  hj_module_t *m = NULL;
  hj_status st = fz_parse_exact(ctx, text, len, &m);
  if (st != HJ_OK) {
    fz_rejected++;
    const char *msg = hj_ctx_error(ctx);
    if (m != NULL) fz_fail("failed parse left *out non-NULL", text, len, msg, origin);
    else if (st != HJ_ERR_OOM && !fz_has_position(msg))
      fz_fail("parse error without a :LINE:COL: position", text, len, msg, origin);
    if (fz_verbose) fprintf(stderr, "rejected (%s): %.200s\n", origin, msg);
    alarm(0);
    return;
  }
  fz_parsed++;
  char *printed = NULL;
  if (hj_module_print(m, &printed) != HJ_OK || !printed) {
    fz_fail("hj_module_print failed on a parsed module", text, len, hj_ctx_error(ctx), origin);
    hj_module_destroy(m);
    alarm(0);
    return;
  }
  hj_module_t *m2 = NULL;
  size_t plen = strlen(printed);
  st = fz_parse_exact(ctx, printed, plen, &m2);
  if (st != HJ_OK) {
    char *detail = NULL;
    if (asprintf(&detail, "%s\n--- printed ---\n%.2000s", hj_ctx_error(ctx), printed) < 0) detail = NULL;
    fz_fail("printed text does not parse again", text, len, detail, origin);
    free(detail);
  } else {
    char *printed2 = NULL;
    if (hj_module_print(m2, &printed2) != HJ_OK || !printed2)
      fz_fail("printing the re-parsed module failed", text, len, hj_ctx_error(ctx), origin);
    else if (strcmp(printed, printed2) != 0) {
      size_t k = 0;
      while (printed[k] && printed[k] == printed2[k]) k++;
      size_t from = k > 80 ? k - 80 : 0;
      char *detail = NULL;
      if (asprintf(&detail, "print(parse(print(m))) != print(m) at byte %zu:\n  first:  %.160s\n  second: %.160s",
                   k, printed + from, printed2 + from) < 0) detail = NULL;
      fz_fail("printed text is not a fixed point", text, len, detail, origin);
      free(detail);
    }
    free(printed2);
    hj_module_destroy(m2);
  }
  if (fz_do_eval) fz_eval(ctx, m, printed, text, len, origin);
  free(printed);
  hj_module_destroy(m);
  alarm(0);
}

/* API misuse: these must fail cleanly, with a message. */
static void fz_misuse(hj_ctx_t *ctx) {
  hj_module_t *m = (hj_module_t *)(uintptr_t)1;
  hj_ctx_clear_error(ctx);
  fz_current_iter = -2;
  fz_tried++;
  fz_this_failed = 0;
  hj_status st = hj_module_parse(ctx, NULL, 0, NULL, &m);
  if (st == HJ_OK || m != NULL || !hj_ctx_error(ctx)[0])
    fz_fail("hj_module_parse(ctx, NULL, 0, ...) did not fail cleanly", "", 0, hj_ctx_error(ctx), "misuse");
  char *empty = malloc(1);
  fz_tried++;
  fz_this_failed = 0;
  m = (hj_module_t *)(uintptr_t)1;
  hj_ctx_clear_error(ctx);
  st = hj_module_parse(ctx, empty, 0, "empty.hlo", &m);
  if (st == HJ_OK || m != NULL || !hj_ctx_error(ctx)[0])
    fz_fail("hj_module_parse of a zero-length text did not fail cleanly", "", 0, hj_ctx_error(ctx), "misuse");
  free(empty);
  static const char ws[] = "  \n// only a comment\n\n";
  fz_one(ctx, ws, sizeof ws - 1, "misuse(whitespace)");
}

int main(int argc, char **argv) {
  long count = 10000;
  uint64_t seed = 1;
  char **dirs = NULL;
  int ndirs = 0;
  dirs = calloc((size_t)argc, sizeof *dirs);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--count") && i + 1 < argc) count = atol(argv[++i]);
    else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--save") && i + 1 < argc) fz_save_dir = argv[++i];
    else if (!strcmp(argv[i], "--no-eval")) fz_do_eval = 0;
    else if (!strcmp(argv[i], "--verbose")) fz_verbose = 1;
    else if (argv[i][0] == '-') {
      fprintf(stderr, "usage: fuzz_parse [--count N] [--seed S] [--save DIR] [--no-eval] [--verbose] DIR...\n");
      return 2;
    } else dirs[ndirs++] = argv[i];
  }
  fz_state = seed * 0x9E3779B97F4A7C15ULL + 0x1234567ULL;
  if (!fz_state) fz_state = 1;

  char **paths = NULL;
  size_t npaths = 0, cap = 0;
  for (int i = 0; i < ndirs; i++) fz_scan(dirs[i], 1, &paths, &npaths, &cap);
  if (npaths) qsort(paths, npaths, sizeof *paths, fz_cmpstr);
  for (size_t i = 0; i < npaths; i++) { fz_add_file(paths[i]); free(paths[i]); }
  free(paths);
  free(dirs);
  if (!fz_nseeds) {
    fprintf(stderr, "fuzz_parse: no .hlo files found\nfuzz_parse: 0 passed, 1 failed\n");
    return 1;
  }

#ifdef FZ_HAVE_SANITIZER
  __sanitizer_set_death_callback(fz_die_report);
#endif
  signal(SIGALRM, fz_on_alarm);
  signal(SIGABRT, fz_on_abort);
  signal(SIGSEGV, fz_on_abort);   /* without a sanitizer */

  hj_ctx_options_t opt;
  hj_ctx_options_init(&opt);
  opt.backend = HJ_BACKEND_INTERP;
  opt.num_threads = 1;
  hj_ctx_t *ctx = NULL;
  if (hj_ctx_create(&opt, &ctx) != HJ_OK || !ctx) {
    fprintf(stderr, "fuzz_parse: hj_ctx_create failed\nfuzz_parse: 0 passed, 1 failed\n");
    return 1;
  }
  fz_misuse(ctx);

  /* The seeds as they are. */
  long seeds_parsed = 0;
  for (size_t i = 0; i < fz_nseeds; i++) {
    long before = fz_parsed;
    fz_current_iter = -1;
    fz_one(ctx, fz_seeds[i].text, fz_seeds[i].len, fz_seeds[i].path);
    if (fz_parsed > before) seeds_parsed++;
    else if (fz_verbose || fz_nseeds < 200)
      fprintf(stderr, "note: seed %s does not parse: %.300s\n", fz_seeds[i].path, hj_ctx_error(ctx));
  }

  /* Mutants. */
  fz_buf b = {0};
  for (long it = 0; it < count; it++) {
    const fz_seed *s = &fz_seeds[fz_below(fz_nseeds)];
    fz_reserve(&b, s->len + 1);
    memcpy(b.p, s->text, s->len);
    b.len = s->len;
    int nmut = 1 + (int)fz_below(3);
    const char *what = "";
    for (int k = 0; k < nmut; k++) what = fz_mutate(&b, s);
    char origin[512];
    snprintf(origin, sizeof origin, "%s, %d edits, last %s", s->path, nmut, what);
    fz_current_iter = it;
    fz_one(ctx, b.p, b.len, origin);
  }
  free(b.p);
  fz_current = NULL;

  hj_ctx_destroy(ctx);
  for (size_t i = 0; i < fz_nseeds; i++) {
    free(fz_seeds[i].path); free(fz_seeds[i].text);
    free(fz_seeds[i].toks);
  }
  free(fz_seeds);

  printf("fuzz_parse: seeds %zu (%ld parse as they are), tried %ld, parsed %ld, rejected %ld, "
         "evaluated %ld (%ld eval errors), failure reports %ld\n",
         fz_nseeds, seeds_parsed, fz_tried, fz_parsed, fz_rejected, fz_evaluated, fz_eval_errors,
         fz_failures);
  for (int i = 0; i < fz_nreasons; i++)
    printf("fuzz_parse: %ld x %s\n", fz_reason_count[i], fz_reason[i]);
  printf("fuzz_parse: %ld passed, %ld failed\n", fz_tried - fz_failed_inputs, fz_failed_inputs);
  return fz_failed_inputs ? 1 : 0;
}
