/* gpt2_tok.c — command-line front end of the GPT-2 tokenizer (bpe.h), for people and for
   tests/gpt2/test_tokenizer.py.

     gpt2_tok VOCAB [--special] encode [FILE]     ids of FILE (or stdin), one line, spaces
     gpt2_tok VOCAB decode [FILE]                 ids (spaces, commas, newlines) -> bytes
     gpt2_tok VOCAB [--special] encode-batch FILE records -> one line of ids per record
     gpt2_tok VOCAB decode-batch FILE             lines of ids -> one record per line
     gpt2_tok VOCAB bench FILE                    encode FILE, print the time and MB/s
   VOCAB is `--vocab DIR` (DIR/encoder.json and DIR/vocab.bpe) or
   `--encoder FILE --merges FILE`. A record is "<decimal byte count>\n<the bytes>", so a
   batch file carries arbitrary bytes; one process then serves thousands of test strings.
   Exit status 0, or 1 with the error (naming the file) on stderr. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bpe.h"

static int usage(void) {
  fprintf(stderr,
          "usage: gpt2_tok (--vocab DIR | --encoder FILE --merges FILE) [--special] CMD [FILE]\n"
          "  CMD: encode | decode | encode-batch | decode-batch | bench\n");
  return 2;
}

static int slurp(const char *path, char **buf, size_t *len) {
  FILE *f = path ? fopen(path, "rb") : stdin;
  if (!f) {
    fprintf(stderr, "gpt2_tok: %s: %s\n", path, strerror(errno));
    return -1;
  }
  size_t n = 0, cap = 1 << 16;
  char *p = malloc(cap + 1);
  for (;;) {
    if (!p) { fprintf(stderr, "gpt2_tok: out of memory\n"); break; }
    if (n == cap) {
      char *q = realloc(p, 2 * cap + 1);
      if (!q) { free(p); p = NULL; continue; }
      p = q;
      cap *= 2;
    }
    size_t got = fread(p + n, 1, cap - n, f);
    n += got;
    if (got == 0) break;
  }
  if (f != stdin) fclose(f);
  if (!p) return -1;
  p[n] = 0;
  *buf = p;
  *len = n;
  return 0;
}

static void print_ids(const int32_t *ids, size_t n) {
  for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", (int)ids[i]);
  putchar('\n');
}

/* Parses ids separated by spaces or commas in [s, e); returns the count or -1. */
static long parse_ids(const char *s, const char *e, int32_t **ids) {
  size_t n = 0, cap = 16;
  int32_t *v = malloc(cap * sizeof *v);
  if (!v) return -1;
  while (s < e) {
    if (*s == ' ' || *s == ',' || *s == '\t' || *s == '\n' || *s == '\r') { s++; continue; }
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (end == s || end > e || errno || x < INT32_MIN || x > INT32_MAX) {
      fprintf(stderr, "gpt2_tok: bad id near '%.20s'\n", s);
      free(v);
      return -1;
    }
    if (n == cap) {
      int32_t *q = realloc(v, 2 * cap * sizeof *v);
      if (!q) { free(v); return -1; }
      v = q;
      cap *= 2;
    }
    v[n++] = (int32_t)x;
    s = end;
  }
  *ids = v;
  return (long)n;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int encode_batch(gpt2_bpe *bpe, const gpt2_bpe_encode_opts *o, const char *buf,
                        size_t len) {
  size_t at = 0;
  while (at < len) {
    char *end;
    unsigned long long n = strtoull(buf + at, &end, 10);
    if (end == buf + at || *end != '\n' || n > len - (size_t)(end + 1 - buf)) {
      fprintf(stderr, "gpt2_tok: bad record header at byte %zu\n", at);
      return -1;
    }
    at = (size_t)(end + 1 - buf);
    int32_t *ids;
    size_t k;
    gpt2_err err;
    if (gpt2_bpe_encode(bpe, buf + at, (size_t)n, o, &ids, &k, &err)) {
      fprintf(stderr, "gpt2_tok: %s\n", err.msg);
      return -1;
    }
    print_ids(ids, k);
    free(ids);
    at += (size_t)n;
  }
  return 0;
}

static int decode_ids(gpt2_bpe *bpe, const char *s, const char *e, int record) {
  int32_t *ids;
  long n = parse_ids(s, e, &ids);
  if (n < 0) return -1;
  char *text;
  size_t len;
  gpt2_err err;
  int rc = gpt2_bpe_decode(bpe, ids, (size_t)n, &text, &len, &err);
  free(ids);
  if (rc) {
    fprintf(stderr, "gpt2_tok: %s\n", err.msg);
    return -1;
  }
  if (record) printf("%zu\n", len);
  fwrite(text, 1, len, stdout);
  free(text);
  return 0;
}

static int bench(gpt2_bpe *bpe, const char *buf, size_t len) {
  int32_t *ids;
  size_t n;
  gpt2_err err;
  double t0 = now_s();
  if (gpt2_bpe_encode(bpe, buf, len, NULL, &ids, &n, &err)) {
    fprintf(stderr, "gpt2_tok: %s\n", err.msg);
    return -1;
  }
  double t1 = now_s();
  free(ids);
  /* Again with the piece cache filled by the first run: the steady state of a server. */
  if (gpt2_bpe_encode(bpe, buf, len, NULL, &ids, &n, &err)) {
    fprintf(stderr, "gpt2_tok: %s\n", err.msg);
    return -1;
  }
  double t2 = now_s();
  free(ids);
  printf("bench: bytes=%zu tokens=%zu cold_s=%.4f cold_MB_s=%.1f warm_s=%.4f warm_MB_s=%.1f\n",
         len, n, t1 - t0, (double)len / 1e6 / (t1 - t0), t2 - t1,
         (double)len / 1e6 / (t2 - t1));
  return 0;
}

int main(int argc, char **argv) {
  const char *dir = NULL, *enc = NULL, *merges = NULL, *cmd = NULL, *file = NULL;
  gpt2_bpe_encode_opts o;
  gpt2_bpe_encode_opts_init(&o);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--vocab") && i + 1 < argc) dir = argv[++i];
    else if (!strcmp(argv[i], "--encoder") && i + 1 < argc) enc = argv[++i];
    else if (!strcmp(argv[i], "--merges") && i + 1 < argc) merges = argv[++i];
    else if (!strcmp(argv[i], "--special")) o.allow_special = 1;
    else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(); return 0; }
    else if (!cmd) cmd = argv[i];
    else if (!file) file = argv[i];
    else return usage();
  }
  char encbuf[4096], mergebuf[4096];
  if (dir) {
    snprintf(encbuf, sizeof encbuf, "%s/encoder.json", dir);
    snprintf(mergebuf, sizeof mergebuf, "%s/vocab.bpe", dir);
    enc = encbuf;
    merges = mergebuf;
  }
  if (!enc || !merges || !cmd) return usage();
  gpt2_bpe *bpe;
  gpt2_err err;
  double t0 = now_s();
  if (gpt2_bpe_load(enc, merges, &bpe, &err)) {
    fprintf(stderr, "gpt2_tok: %s\n", err.msg);
    return 1;
  }
  double t_load = now_s() - t0;
  char *buf = NULL;
  size_t len = 0;
  int rc = -1;
  if (slurp(file, &buf, &len)) goto done;
  if (!strcmp(cmd, "encode")) {
    int32_t *ids;
    size_t n;
    if (gpt2_bpe_encode(bpe, buf, len, &o, &ids, &n, &err)) {
      fprintf(stderr, "gpt2_tok: %s\n", err.msg);
      goto done;
    }
    print_ids(ids, n);
    free(ids);
    rc = 0;
  } else if (!strcmp(cmd, "decode")) {
    rc = decode_ids(bpe, buf, buf + len, 0);
  } else if (!strcmp(cmd, "encode-batch")) {
    rc = encode_batch(bpe, &o, buf, len);
  } else if (!strcmp(cmd, "decode-batch")) {
    rc = 0;
    for (char *s = buf, *e; rc == 0 && s < buf + len; s = e + 1) {
      e = memchr(s, '\n', (size_t)(buf + len - s));
      if (!e) e = buf + len;
      rc = decode_ids(bpe, s, e, 1);
    }
  } else if (!strcmp(cmd, "bench")) {
    printf("bench: load_s=%.4f vocab=%d\n", t_load, gpt2_bpe_vocab_size(bpe));
    rc = bench(bpe, buf, len);
  } else {
    usage();
  }
done:
  free(buf);
  gpt2_bpe_free(bpe);
  return rc ? 1 : 0;
}
