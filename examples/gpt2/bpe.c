/* bpe.c — GPT-2's byte-level BPE tokenizer (see bpe.h for what it computes).

   LIBRARIES, AND WHY
   - The pre-tokenizer is GPT-2's regex itself, run by PCRE2 (Debian libpcre2-dev), rather
     than a hand-written state machine over Unicode tables: the pattern's lookahead
     `\s+(?!\S)` and its alternation order are then the regex engine's business, as they
     are in tiktoken. Two details make PCRE2 agree with tiktoken's Rust regex:
       * \s. Rust's \s is Unicode White_Space. PCRE2's \s (with UCP) is \p{Z} plus \h and
         \v, which adds U+180E; without UCP it is ASCII only. So the pattern spells the class
         out: White_Space = Zs/Zl/Zp plus U+0009-000D and U+0085 (stable since Unicode 6.3),
         written WS below. \p{L} and \p{N} are PCRE2's own Unicode tables.
       * Invalid UTF-8. Compiled with PCRE2_MATCH_INVALID_UTF, an invalid sequence never
         matches any item, so every match lies inside one valid run and a lookahead at a run's
         end behaves as at the end of the text: exactly bpe.h's rule. The bytes between
         matches are the invalid ones; each becomes its one-byte token.
     PCRE2's JIT compiles the pattern when the platform has it (the interpreter otherwise).
   - encoder.json is parsed by cJSON (Debian libcjson-dev).
   - Hash maps are stb_ds (gpt2_ds.h): merges (pair of ids -> rank and merged id), the
     token-string -> id map used while loading, and the piece cache.

   ALGORITHM
   Loading: each encoder.json key is decoded from GPT-2's byte alphabet (bytes_to_unicode:
   the 188 printable Latin-1 bytes stand for themselves, the other 68 bytes, in order, for
   U+0100..U+0143) into its bytes; ids index a table of byte spans. Merge line k (0-based,
   after the "#version" line) gets rank k.
   Encoding a piece (a regex match): its bytes start as one-byte tokens in a linked list; a
   min-heap holds (rank << 32 | left position) for every adjacent pair that is a merge. Pop
   the least; skip it if the pair at that position has changed since it was pushed (the
   left symbol is gone, or the ids there now form another pair or none); else merge the two
   symbols into the left one and push the new pairs it forms with its neighbours. Equal
   ranks pop leftmost first, so every occurrence of the best pair is merged left to right
   before the next rank, as GPT-2's encoder.py does, in O(n log n) even for a megabyte of
   spaces. Example, piece " low" with merges (Ġ l)=0, (o w)=1, (Ġl ow)=2: heap {0@0, 1@2};
   pop 0@0 -> [Ġl, o, w], push nothing for (Ġl, o); pop 1@2 -> [Ġl, ow], push 2@0; pop 2@0
   -> [Ġlow].
   Pieces up to CACHE_MAX_PIECE bytes are cached (hash of the bytes -> ids; the bytes are
   kept and compared, and a hash collision just skips the cache). The cache is emptied when
   it reaches CACHE_MAX_ENTRIES so memory stays bounded. */
#define _GNU_SOURCE /* memmem */
#include "bpe.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <cjson/cJSON.h>
#include <pcre2.h>

#include "gpt2_ds.h"

#define EOT_STR "<|endoftext|>"
#define CACHE_MAX_PIECE 128
#define CACHE_MAX_ENTRIES (1 << 18)

/* Unicode White_Space, as a PCRE2 character-class body. */
#define WS "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}" \
           "\\x{202F}\\x{205F}\\x{3000}"
static const char k_pattern[] =
    "'(?:[sdmt]|ll|ve|re)| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|[" WS "]+(?![^" WS
    "])|[" WS "]+";

typedef struct { uint32_t off, len; } span;
/* (a<<32|b) -> (rank<<32|merged). Ids are below 2^24 (load_encoder's limit), so bits 31
   and 63 of a key are 0, which keeps stb_ds's 8-byte hash clear of UB (see encode_piece). */
typedef struct { uint64_t key; uint64_t value; } pair_ent;
typedef struct { char *key; int32_t value; } str_ent;       /* token string -> id (loading) */
typedef struct {
  uint64_t key;                  /* hash of the piece's bytes */
  uint32_t bytes_off, bytes_len; /* the piece, in cache_bytes */
  uint32_t ids_off, ids_n;       /* its ids, in cache_ids */
} cache_ent;

/* A growable array with checked allocation (stb_ds arrays cannot report failure). */
typedef struct { void *p; size_t n, cap; } vec;

struct gpt2_bpe {
  int n_vocab, eot;
  char *tok_bytes; /* all tokens' bytes, back to back */
  span *tok;       /* (n_vocab) */
  int32_t byte_id[256];
  pair_ent *pairs; /* stb_ds hash map */
  pcre2_code *re;
  pcre2_match_data *md;
  pcre2_match_context *mctx;
  pcre2_jit_stack *jit_stack;
  cache_ent *cache; /* stb_ds hash map */
  vec cache_bytes, cache_ids;
  vec out, sym, prev, next, heap; /* encode scratch */
};

static int vec_reserve(vec *v, size_t elem, size_t more) {
  if (v->n + more <= v->cap) return 0;
  size_t cap = v->cap ? v->cap : 64;
  while (cap < v->n + more) cap *= 2;
  void *p = realloc(v->p, cap * elem);
  if (!p) return -1;
  v->p = p;
  v->cap = cap;
  return 0;
}

static int push_id(gpt2_bpe *b, int32_t id) {
  if (vec_reserve(&b->out, sizeof(int32_t), 1)) return -1;
  ((int32_t *)b->out.p)[b->out.n++] = id;
  return 0;
}

/* ---- loading ---------------------------------------------------------------------- */

static int read_file(const char *path, char **buf, size_t *len, gpt2_err *err) {
  *buf = NULL;
  *len = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return gpt2_errf(err, "%s: cannot open: %s", path, strerror(errno));
  int rc = -1;
  char *p = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n == cap) {
      cap = cap ? cap * 2 : 1 << 16;
      char *q = realloc(p, cap + 1);
      if (!q) { gpt2_errf(err, "%s: out of memory reading it", path); goto done; }
      p = q;
    }
    size_t got = fread(p + n, 1, cap - n, f);
    n += got;
    if (got == 0) break;
  }
  if (ferror(f)) { gpt2_errf(err, "%s: read error: %s", path, strerror(errno)); goto done; }
  p[n] = 0;
  *buf = p;
  *len = n;
  p = NULL;
  rc = 0;
done:
  free(p);
  fclose(f);
  return rc;
}

/* GPT-2's bytes_to_unicode, inverted: byte_of_cp[cp] is the byte that code point stands
   for, or -1. */
#define ALPHABET_CPS 324
static void byte_alphabet(int16_t byte_of_cp[ALPHABET_CPS]) {
  for (int i = 0; i < ALPHABET_CPS; i++) byte_of_cp[i] = -1;
  int n = 0;
  for (int c = 0; c < 256; c++) {
    int printable = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE);
    byte_of_cp[printable ? c : 256 + n++] = (int16_t)c;
  }
}

/* Decodes a token string (UTF-8 of alphabet code points, all below U+0800) into bytes at
   |out| (room for strlen(s) bytes). Returns the byte count, or -1 if |s| holds anything
   outside the alphabet. */
static long decode_key(const int16_t *byte_of_cp, const char *s, char *out) {
  const unsigned char *u = (const unsigned char *)s;
  long n = 0;
  while (*u) {
    unsigned cp;
    if (u[0] < 0x80) {
      cp = u[0];
      u += 1;
    } else if ((u[0] & 0xE0) == 0xC0 && (u[1] & 0xC0) == 0x80) {
      cp = (unsigned)(u[0] & 0x1F) << 6 | (u[1] & 0x3F);
      if (cp < 0x80) return -1; /* overlong */
      u += 2;
    } else {
      return -1;
    }
    if (cp >= ALPHABET_CPS || byte_of_cp[cp] < 0) return -1;
    out[n++] = (char)byte_of_cp[cp];
  }
  return n;
}

static void json_error_at(const char *path, const char *buf, size_t len, const char *at,
                          gpt2_err *err) {
  size_t off = (at && at >= buf && at <= buf + len) ? (size_t)(at - buf) : len;
  int line = 1, col = 1;
  for (size_t i = 0; i < off; i++) {
    if (buf[i] == '\n') { line++; col = 1; } else col++;
  }
  if (off >= len)
    gpt2_errf(err, "%s: bad JSON: ends early (truncated?) after %zu bytes", path, len);
  else
    gpt2_errf(err, "%s: bad JSON at line %d, column %d", path, line, col);
}

/* Fills b->tok, b->tok_bytes, b->byte_id, b->eot and the string map from encoder.json. */
static int load_encoder(gpt2_bpe *b, const char *path, cJSON **json, str_ent **strmap,
                        gpt2_err *err) {
  char *buf = NULL;
  size_t len = 0;
  int rc = -1;
  if (read_file(path, &buf, &len, err)) return -1;
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(buf, len, &end, 0);
  *json = root;
  if (!root) { json_error_at(path, buf, len, end, err); goto done; }
  if (!cJSON_IsObject(root)) {
    gpt2_errf(err, "%s: expected a JSON object of token -> id", path);
    goto done;
  }
  int n = 0, cap_bytes = 0;
  for (cJSON *it = root->child; it; it = it->next) {
    n++;
    cap_bytes += (int)strlen(it->string);
    if (n > (1 << 24) || cap_bytes > (1 << 28)) {
      gpt2_errf(err, "%s: more than %d tokens or %d bytes of them", path, 1 << 24, 1 << 28);
      goto done;
    }
  }
  if (n == 0) { gpt2_errf(err, "%s: no tokens", path); goto done; }
  b->n_vocab = n;
  b->tok = malloc((size_t)n * sizeof *b->tok);
  b->tok_bytes = malloc((size_t)cap_bytes + 1);
  if (!b->tok || !b->tok_bytes) { gpt2_errf(err, "%s: out of memory", path); goto done; }
  for (int i = 0; i < n; i++) b->tok[i].len = UINT32_MAX;
  for (int c = 0; c < 256; c++) b->byte_id[c] = -1;
  int16_t byte_of_cp[ALPHABET_CPS];
  byte_alphabet(byte_of_cp);
  uint32_t used = 0;
  for (cJSON *it = root->child; it; it = it->next) {
    const char *key = it->string;
    if (!cJSON_IsNumber(it)) {
      gpt2_errf(err, "%s: token '%.80s': id is not a number", path, key);
      goto done;
    }
    double v = it->valuedouble;
    if (!(v >= 0 && v < n) || v != (double)(int)v) {
      gpt2_errf(err, "%s: token '%.80s': id %.17g is not an integer in 0..%d (ids must be "
                "0..N-1 for N tokens)", path, key, v, n - 1);
      goto done;
    }
    int id = (int)v;
    if (b->tok[id].len != UINT32_MAX) {
      gpt2_errf(err, "%s: id %d is given to two tokens (the second is '%.80s')", path, id, key);
      goto done;
    }
    if (shgeti(*strmap, key) >= 0) {
      gpt2_errf(err, "%s: token '%.80s' appears twice", path, key);
      goto done;
    }
    long nb;
    if (strcmp(key, EOT_STR) == 0) {
      b->eot = id;
      nb = (long)strlen(key);
      memcpy(b->tok_bytes + used, key, (size_t)nb);
    } else {
      nb = decode_key(byte_of_cp, key, b->tok_bytes + used);
      if (nb < 0) {
        gpt2_errf(err, "%s: token '%.80s' (id %d) has a character outside GPT-2's byte "
                  "alphabet", path, key, id);
        goto done;
      }
      if (nb == 0) { gpt2_errf(err, "%s: empty token (id %d)", path, id); goto done; }
    }
    b->tok[id] = (span){used, (uint32_t)nb};
    if (nb == 1) b->byte_id[(unsigned char)b->tok_bytes[used]] = id;
    used += (uint32_t)nb;
    shput(*strmap, (char *)key, id);
  }
  for (int c = 0; c < 256; c++) {
    if (b->byte_id[c] < 0) {
      gpt2_errf(err, "%s: no token for the byte 0x%02x (every byte needs a one-byte token)",
                path, c);
      goto done;
    }
  }
  rc = 0;
done:
  free(buf);
  return rc;
}

/* Reads the merges of vocab.bpe into b->pairs, checking them against encoder.json. */
static int load_merges(gpt2_bpe *b, const char *path, const char *enc_path, str_ent *strmap,
                       gpt2_err *err) {
  char *buf = NULL, *tmp = NULL;
  size_t len = 0;
  int rc = -1;
  if (read_file(path, &buf, &len, err)) return -1;
  tmp = malloc(2 * len + 3);
  if (!tmp) { gpt2_errf(err, "%s: out of memory", path); goto done; }
  if (len == 0 || buf[0] != '#') {
    gpt2_errf(err, "%s: line 1: expected the '#version: 0.2' line", path);
    goto done;
  }
  size_t at = 0;
  int line = 0, rank = 0;
  while (at < len) {
    const char *s = buf + at;
    const char *nl = memchr(s, '\n', len - at);
    size_t n = nl ? (size_t)(nl - s) : len - at;
    at += n + (nl ? 1 : 0);
    line++;
    if (line == 1) continue;
    if (n && s[n - 1] == '\r') n--;
    if (n == 0) {
      if (at >= len) break; /* the file's final newline */
      gpt2_errf(err, "%s: line %d: empty line (expected a merge 'A B')", path, line);
      goto done;
    }
    const char *sp = memchr(s, ' ', n);
    if (!sp || sp == s || sp == s + n - 1 || memchr(sp + 1, ' ', (size_t)(s + n - sp - 1)) ||
        memchr(s, 0, n)) {
      gpt2_errf(err, "%s: line %d: expected a merge 'A B', got '%.*s'", path, line,
                (int)(n < 80 ? n : 80), s);
      goto done;
    }
    /* tmp holds "A\0B\0AB\0". */
    size_t na = (size_t)(sp - s), nb = n - na - 1;
    char *a = tmp, *bb = tmp + na + 1, *ab = bb + nb + 1;
    memcpy(a, s, na); a[na] = 0;
    memcpy(bb, sp + 1, nb); bb[nb] = 0;
    memcpy(ab, a, na); memcpy(ab + na, bb, nb); ab[na + nb] = 0;
    ptrdiff_t ia = shgeti(strmap, a), ib = shgeti(strmap, bb), iab = shgeti(strmap, ab);
    if (ia < 0 || ib < 0) {
      gpt2_errf(err, "%s: line %d: merge '%s %s': '%s' is not in %s", path, line, a, bb,
                ia < 0 ? a : bb, enc_path);
      goto done;
    }
    if (iab < 0) {
      gpt2_errf(err, "%s: line %d: merge '%s %s' makes '%s', which is not in %s", path, line,
                a, bb, ab, enc_path);
      goto done;
    }
    uint64_t key = (uint64_t)(uint32_t)strmap[ia].value << 32 | (uint32_t)strmap[ib].value;
    ptrdiff_t dup = hmgeti(b->pairs, key);
    if (dup >= 0) {
      gpt2_errf(err, "%s: line %d: merge '%s %s' repeats line %d", path, line, a, bb,
                (int)(b->pairs[dup].value >> 32) + 2);
      goto done;
    }
    hmput(b->pairs, key, (uint64_t)(uint32_t)rank << 32 | (uint32_t)strmap[iab].value);
    rank++;
  }
  rc = 0;
done:
  free(tmp);
  free(buf);
  return rc;
}

static int compile_regex(gpt2_bpe *b, gpt2_err *err) {
  int code;
  PCRE2_SIZE off;
  b->re = pcre2_compile((PCRE2_SPTR)k_pattern, PCRE2_ZERO_TERMINATED,
                        PCRE2_UTF | PCRE2_MATCH_INVALID_UTF, &code, &off, NULL);
  if (!b->re) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(code, msg, sizeof msg);
    return gpt2_errf(err, "GPT-2 pattern: PCRE2 error at %zu: %s", (size_t)off, (char *)msg);
  }
  /* Without JIT (unsupported platform) the interpreter runs the same pattern. */
  if (pcre2_jit_compile(b->re, PCRE2_JIT_COMPLETE) == 0) {
    b->mctx = pcre2_match_context_create(NULL);
    b->jit_stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL);
    if (!b->mctx || !b->jit_stack) return gpt2_errf(err, "GPT-2 pattern: out of memory");
    pcre2_jit_stack_assign(b->mctx, NULL, b->jit_stack);
  }
  b->md = pcre2_match_data_create_from_pattern(b->re, NULL);
  if (!b->md) return gpt2_errf(err, "GPT-2 pattern: out of memory");
  return 0;
}

int gpt2_bpe_load(const char *encoder_json, const char *vocab_bpe, gpt2_bpe **out,
                  gpt2_err *err) {
  *out = NULL;
  gpt2_bpe *b = calloc(1, sizeof *b);
  if (!b) return gpt2_errf(err, "out of memory");
  b->eot = -1;
  cJSON *json = NULL;
  str_ent *strmap = NULL;
  int rc = -1;
  if (load_encoder(b, encoder_json, &json, &strmap, err)) goto done;
  if (load_merges(b, vocab_bpe, encoder_json, strmap, err)) goto done;
  if (compile_regex(b, err)) goto done;
  *out = b;
  b = NULL;
  rc = 0;
done:
  shfree(strmap);
  cJSON_Delete(json);
  gpt2_bpe_free(b);
  return rc;
}

void gpt2_bpe_free(gpt2_bpe *b) {
  if (!b) return;
  free(b->tok);
  free(b->tok_bytes);
  hmfree(b->pairs);
  hmfree(b->cache);
  pcre2_match_data_free(b->md);
  pcre2_match_context_free(b->mctx);
  pcre2_jit_stack_free(b->jit_stack);
  pcre2_code_free(b->re);
  vec *vs[] = {&b->cache_bytes, &b->cache_ids, &b->out, &b->sym, &b->prev, &b->next, &b->heap};
  for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++) free(vs[i]->p);
  free(b);
}

int gpt2_bpe_vocab_size(const gpt2_bpe *b) { return b->n_vocab; }
int gpt2_bpe_eot(const gpt2_bpe *b) { return b->eot; }
void gpt2_bpe_encode_opts_init(gpt2_bpe_encode_opts *o) { o->allow_special = 0; }

const char *gpt2_bpe_token(const gpt2_bpe *b, int32_t id, size_t *len) {
  if (id < 0 || id >= b->n_vocab) { *len = 0; return NULL; }
  *len = b->tok[id].len;
  return b->tok_bytes + b->tok[id].off;
}

/* ---- encoding --------------------------------------------------------------------- */

static void heap_push(uint64_t *h, size_t *n, uint64_t v) {
  size_t i = (*n)++;
  while (i > 0 && h[(i - 1) / 2] > v) { h[i] = h[(i - 1) / 2]; i = (i - 1) / 2; }
  h[i] = v;
}

static uint64_t heap_pop(uint64_t *h, size_t *n) {
  uint64_t top = h[0], v = h[--*n];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= *n) break;
    if (c + 1 < *n && h[c + 1] < h[c]) c++;
    if (h[c] >= v) break;
    h[i] = h[c];
    i = c;
  }
  h[i] = v;
  return top;
}

/* The merge of ids (l, r): its rank << 32 | merged id, or UINT64_MAX. */
static uint64_t pair_lookup(gpt2_bpe *b, int32_t l, int32_t r) {
  ptrdiff_t i = hmgeti(b->pairs, (uint64_t)(uint32_t)l << 32 | (uint32_t)r);
  return i < 0 ? UINT64_MAX : b->pairs[i].value;
}

/* BPE of one piece of |n| >= 2 bytes; appends its ids to b->out. */
static int bpe_piece(gpt2_bpe *b, const unsigned char *p, size_t n) {
  if (n > INT32_MAX) return -1;
  /* The heap takes at most 3n entries: n - 1 pairs at the start, then at most two per
     merge, and there are fewer than n merges. */
  if (vec_reserve(&b->sym, 4, n) || vec_reserve(&b->prev, 4, n) ||
      vec_reserve(&b->next, 4, n) || vec_reserve(&b->heap, 8, 3 * n))
    return -1;
  int32_t *sym = b->sym.p, *prev = b->prev.p, *next = b->next.p;
  uint64_t *heap = b->heap.p;
  size_t nh = 0;
  for (size_t i = 0; i < n; i++) {
    sym[i] = b->byte_id[p[i]];
    prev[i] = (int32_t)i - 1;
    next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
  }
  for (size_t i = 0; i + 1 < n; i++) {
    uint64_t m = pair_lookup(b, sym[i], sym[i + 1]);
    if (m != UINT64_MAX) heap_push(heap, &nh, (m >> 32) << 32 | i);
  }
  while (nh) {
    uint64_t top = heap_pop(heap, &nh);
    int32_t i = (int32_t)(top & 0xffffffffu), j = next[i];
    if (sym[i] < 0 || j < 0) continue;
    uint64_t m = pair_lookup(b, sym[i], sym[j]);
    if (m == UINT64_MAX || m >> 32 != top >> 32) continue; /* stale entry */
    sym[i] = (int32_t)(m & 0xffffffffu);
    sym[j] = -1;
    next[i] = next[j];
    if (next[j] >= 0) prev[next[j]] = i;
    if (prev[i] >= 0) {
      uint64_t q = pair_lookup(b, sym[prev[i]], sym[i]);
      if (q != UINT64_MAX) heap_push(heap, &nh, (q >> 32) << 32 | (uint32_t)prev[i]);
    }
    if (next[i] >= 0) {
      uint64_t q = pair_lookup(b, sym[i], sym[next[i]]);
      if (q != UINT64_MAX) heap_push(heap, &nh, (q >> 32) << 32 | (uint32_t)i);
    }
  }
  for (int32_t i = 0; i >= 0; i = next[i])
    if (push_id(b, sym[i])) return -1;
  return 0;
}

static void cache_clear(gpt2_bpe *b) {
  hmfree(b->cache);
  b->cache_bytes.n = b->cache_ids.n = 0;
}

/* FNV-1a of the piece, the cache's key. Not stb_ds's stbds_hash_bytes: that shifts bytes
   into the sign bit of an int (`d[3] << 24`), which UBSan rightly flags for bytes >= 0x80;
   for the same reason bits 31 and 63 are cleared, as stb_ds hashes this 8-byte key in turn.
   The bytes are compared on a hit, so the narrower hash costs at most a skipped entry. */
static uint64_t piece_hash(const unsigned char *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h & ~(1ull << 31 | 1ull << 63);
}

/* Encodes one regex match: from the cache, else by BPE (then cached). */
static int encode_piece(gpt2_bpe *b, const unsigned char *p, size_t n) {
  if (n == 1) return push_id(b, b->byte_id[p[0]]);
  uint64_t h = 0;
  if (n <= CACHE_MAX_PIECE) {
    h = piece_hash(p, n);
    ptrdiff_t ci = hmgeti(b->cache, h);
    if (ci >= 0) {
      cache_ent *e = &b->cache[ci];
      if (e->bytes_len == n && memcmp((char *)b->cache_bytes.p + e->bytes_off, p, n) == 0) {
        if (vec_reserve(&b->out, 4, e->ids_n)) return -1;
        memcpy((int32_t *)b->out.p + b->out.n, (int32_t *)b->cache_ids.p + e->ids_off,
               e->ids_n * sizeof(int32_t));
        b->out.n += e->ids_n;
        return 0;
      }
      h = 0; /* a collision: leave the cache as it is */
    }
  }
  size_t first = b->out.n;
  if (bpe_piece(b, p, n)) return -1;
  if (n > CACHE_MAX_PIECE || h == 0) return 0;
  if (hmlen(b->cache) >= CACHE_MAX_ENTRIES) cache_clear(b);
  size_t k = b->out.n - first;
  if (vec_reserve(&b->cache_bytes, 1, n) || vec_reserve(&b->cache_ids, 4, k)) return 0;
  cache_ent e = {h, (uint32_t)b->cache_bytes.n, (uint32_t)n, (uint32_t)b->cache_ids.n,
                 (uint32_t)k};
  memcpy((char *)b->cache_bytes.p + b->cache_bytes.n, p, n);
  memcpy((int32_t *)b->cache_ids.p + b->cache_ids.n, (int32_t *)b->out.p + first, k * 4);
  b->cache_bytes.n += n;
  b->cache_ids.n += k;
  hmputs(b->cache, e);
  return 0;
}

/* Ordinary text (no special tokens): regex matches are pieces, bytes between them are the
   invalid ones. */
static int encode_ordinary(gpt2_bpe *b, const unsigned char *s, size_t len, gpt2_err *err) {
  size_t at = 0;
  while (at < len) {
    int rc = pcre2_match(b->re, s, len, at, 0, b->md, b->mctx);
    size_t ms = len, me = len;
    if (rc >= 0) {
      PCRE2_SIZE *ov = pcre2_get_ovector_pointer(b->md);
      ms = ov[0];
      me = ov[1];
      if (me <= ms || ms < at || me > len)
        return gpt2_errf(err, "encode: the GPT-2 pattern made an empty match at byte %zu", ms);
    } else if (rc != PCRE2_ERROR_NOMATCH) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      return gpt2_errf(err, "encode: PCRE2 match error at byte %zu: %s", at, (char *)msg);
    }
    for (; at < ms; at++)
      if (push_id(b, b->byte_id[s[at]])) return gpt2_errf(err, "encode: out of memory");
    if (ms == len) break;
    if (encode_piece(b, s + ms, me - ms)) return gpt2_errf(err, "encode: out of memory");
    at = me;
  }
  return 0;
}

int gpt2_bpe_encode(gpt2_bpe *b, const char *text, size_t len,
                    const gpt2_bpe_encode_opts *opts, int32_t **ids, size_t *n,
                    gpt2_err *err) {
  *ids = NULL;
  *n = 0;
  gpt2_bpe_encode_opts def;
  if (!opts) { gpt2_bpe_encode_opts_init(&def); opts = &def; }
  b->out.n = 0;
  const unsigned char *s = (const unsigned char *)text;
  size_t at = 0, el = strlen(EOT_STR);
  while (at < len) {
    const unsigned char *hit = NULL;
    if (opts->allow_special && b->eot >= 0) hit = memmem(s + at, len - at, EOT_STR, el);
    size_t stop = hit ? (size_t)(hit - s) : len;
    if (encode_ordinary(b, s + at, stop - at, err)) return -1;
    if (!hit) break;
    if (push_id(b, b->eot)) return gpt2_errf(err, "encode: out of memory");
    at = stop + el;
  }
  if (b->out.n) {
    *ids = malloc(b->out.n * sizeof(int32_t));
    if (!*ids) return gpt2_errf(err, "encode: out of memory for %zu ids", b->out.n);
    memcpy(*ids, b->out.p, b->out.n * sizeof(int32_t));
    *n = b->out.n;
  }
  return 0;
}

int gpt2_bpe_decode(const gpt2_bpe *b, const int32_t *ids, size_t n, char **text,
                    size_t *len, gpt2_err *err) {
  *text = NULL;
  *len = 0;
  size_t total = 0;
  for (size_t i = 0; i < n; i++) {
    if (ids[i] < 0 || ids[i] >= b->n_vocab)
      return gpt2_errf(err, "decode: id %d (position %zu) is outside the vocabulary 0..%d",
                       (int)ids[i], i, b->n_vocab - 1);
    total += b->tok[ids[i]].len;
  }
  char *p = malloc(total + 1);
  if (!p) return gpt2_errf(err, "decode: out of memory for %zu bytes", total);
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    memcpy(p + at, b->tok_bytes + b->tok[ids[i]].off, b->tok[ids[i]].len);
    at += b->tok[ids[i]].len;
  }
  p[at] = 0;
  *text = p;
  *len = at;
  return 0;
}
