/* test_gpt2_api.c — cmocka tests of the GPT-2 example's C API in-process (bpe.h,
   weights.h), built with ASan+UBSan by `make -f examples/gpt2/gpt2.mk test-gpt2-unit`.
   The tokenizer's ids are checked against tiktoken by tests/gpt2/test_tokenizer.py; here:
   the known ids of the vocabulary's NOTICE, decode(encode(x)) == x on random bytes, the
   piece cache filling up and being emptied, error paths (bad ids, missing files) and the
   loader's views of a tiny llm.c file written here. GPT2_DATA names the data directory
   (default examples/gpt2/data). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "bpe.h"
#include "weights.h"

static char g_enc[4096], g_merges[4096];

static int setup_paths(void **state) {
  const char *d = getenv("GPT2_DATA");
  if (!d) d = "examples/gpt2/data";
  snprintf(g_enc, sizeof g_enc, "%s/gpt2-bpe/encoder.json", d);
  snprintf(g_merges, sizeof g_merges, "%s/gpt2-bpe/vocab.bpe", d);
  gpt2_bpe *b;
  gpt2_err err;
  if (gpt2_bpe_load(g_enc, g_merges, &b, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    return -1;
  }
  *state = b;
  return 0;
}

static int teardown_bpe(void **state) {
  gpt2_bpe_free(*state);
  return 0;
}

static void expect_ids(gpt2_bpe *b, const char *text, int special, const int32_t *want,
                       size_t n_want) {
  gpt2_bpe_encode_opts o;
  gpt2_bpe_encode_opts_init(&o);
  o.allow_special = special;
  int32_t *ids;
  size_t n;
  gpt2_err err;
  assert_int_equal(gpt2_bpe_encode(b, text, strlen(text), &o, &ids, &n, &err), 0);
  assert_int_equal(n, n_want);
  for (size_t i = 0; i < n; i++) assert_int_equal(ids[i], want[i]);
  free(ids);
}

static void test_known_ids(void **state) {
  gpt2_bpe *b = *state;
  assert_int_equal(gpt2_bpe_vocab_size(b), 50257);
  assert_int_equal(gpt2_bpe_eot(b), 50256);
  expect_ids(b, "hello world", 0, (const int32_t[]){31373, 995}, 2);
  expect_ids(b, "Hello world", 0, (const int32_t[]){15496, 995}, 2);
  expect_ids(b, "hello <|endoftext|>", 1, (const int32_t[]){31373, 220, 50256}, 3);
  /* Without allow_special the marker is text: "<", "|", "end", "of", "text", "|", ">". */
  expect_ids(b, "<|endoftext|>", 0, (const int32_t[]){27, 91, 437, 1659, 5239, 91, 29}, 7);
  expect_ids(b, "", 1, NULL, 0);
}

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static uint64_t rnd(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return g_rng;
}

static void roundtrip(gpt2_bpe *b, const char *s, size_t len, int special) {
  gpt2_bpe_encode_opts o = {.allow_special = special};
  int32_t *ids;
  size_t n;
  gpt2_err err;
  assert_int_equal(gpt2_bpe_encode(b, s, len, &o, &ids, &n, &err), 0);
  char *back;
  size_t blen;
  assert_int_equal(gpt2_bpe_decode(b, ids, n, &back, &blen, &err), 0);
  assert_int_equal(blen, len);
  assert_memory_equal(back, s, len);
  assert_int_equal(back[blen], 0);
  size_t total = 0;
  for (size_t i = 0; i < n; i++) {
    size_t tl;
    const char *t = gpt2_bpe_token(b, ids[i], &tl);
    assert_non_null(t);
    assert_memory_equal(t, back + total, tl);
    total += tl;
  }
  assert_int_equal(total, len);
  free(ids);
  free(back);
}

static void test_roundtrip_random_bytes(void **state) {
  gpt2_bpe *b = *state;
  static const char *const frag[] = {" ", "  ", "\n", "\t", "'s", "the", " The", "<|endoftext|>",
                                     "\xc3\xa9", "\xe2\x80", "\xff", "\xf0\x9f\x98\x80", "1",
                                     "\xed\xa0\x80", "\x00", "\xc0\x80", "a", "Z"};
  char buf[512];
  for (int it = 0; it < 4000; it++) {
    size_t len = 0, want = rnd() % 400;
    while (len < want) {
      if (rnd() % 2) {
        buf[len++] = (char)(rnd() & 0xff);
      } else {
        const char *f = frag[rnd() % (sizeof frag / sizeof frag[0])];
        size_t fl = f[0] ? strlen(f) : 1;
        if (len + fl > sizeof buf) break;
        memcpy(buf + len, f, fl);
        len += fl;
      }
    }
    roundtrip(b, buf, len, (int)(it & 1));
  }
}

/* More distinct pieces than the cache holds (it is emptied when full): the ids of a second
   encode, cache warm, equal the first. */
static void test_cache_fill(void **state) {
  gpt2_bpe *b = *state;
  size_t nwords = 300000, cap = nwords * 8, len = 0;
  char *s = malloc(cap);
  assert_non_null(s);
  for (size_t i = 0; i < nwords; i++) {
    s[len++] = ' ';
    for (size_t k = i + 26 * 26 * 26; k; k /= 26) s[len++] = (char)('a' + k % 26);
  }
  int32_t *a, *c;
  size_t na, nc;
  gpt2_err err;
  assert_int_equal(gpt2_bpe_encode(b, s, len, NULL, &a, &na, &err), 0);
  assert_int_equal(gpt2_bpe_encode(b, s, len, NULL, &c, &nc, &err), 0);
  assert_int_equal(na, nc);
  assert_memory_equal(a, c, na * sizeof *a);
  roundtrip(b, s, len, 0);
  free(a);
  free(c);
  free(s);
}

static void test_decode_errors(void **state) {
  gpt2_bpe *b = *state;
  char *text = (char *)1;
  size_t len = 7, tl;
  gpt2_err err;
  assert_int_equal(gpt2_bpe_decode(b, (const int32_t[]){31373, 50257}, 2, &text, &len, &err), -1);
  assert_null(text);
  assert_non_null(strstr(err.msg, "id 50257 (position 1) is outside the vocabulary 0..50256"));
  assert_int_equal(gpt2_bpe_decode(b, (const int32_t[]){-1}, 1, &text, &len, &err), -1);
  assert_null(gpt2_bpe_token(b, 50257, &tl));
  assert_null(gpt2_bpe_token(b, -5, &tl));
  const char *eot = gpt2_bpe_token(b, 50256, &tl);
  assert_int_equal(tl, 13);
  assert_memory_equal(eot, "<|endoftext|>", 13);
  assert_int_equal(gpt2_bpe_decode(b, NULL, 0, &text, &len, &err), 0);
  assert_int_equal(len, 0);
  assert_string_equal(text, "");
  free(text);
}

static void test_load_errors(void **state) {
  (void)state;
  gpt2_bpe *b = (gpt2_bpe *)1;
  gpt2_err err;
  assert_int_equal(gpt2_bpe_load("/nonexistent/encoder.json", g_merges, &b, &err), -1);
  assert_null(b);
  assert_non_null(strstr(err.msg, "/nonexistent/encoder.json: cannot open"));
  assert_int_equal(gpt2_bpe_load(g_enc, "/nonexistent/vocab.bpe", &b, NULL), -1); /* err NULL ok */
  assert_null(b);
  gpt2_bpe_free(NULL);
}

/* ---- weights ---------------------------------------------------------------------- */

static void write_llmc(const char *path, const int32_t h8[8], size_t n_floats) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  int32_t h[256] = {0};
  memcpy(h, h8, 8 * sizeof *h);
  assert_int_equal(fwrite(h, sizeof h, 1, f), 1);
  for (size_t i = 0; i < n_floats; i++) {
    float v = (float)i;
    assert_int_equal(fwrite(&v, sizeof v, 1, f), 1);
  }
  fclose(f);
}

static void test_weights_llmc_views(void **state) {
  (void)state;
  char path[] = "/tmp/gpt2_api_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  /* maxT 2, V 3, L 2, NH 1, C 4, Vp 4: 16 + 8 + L (4+4+48+12+16+4+4+4+64+16+64+4) + 8. */
  const int64_t per_layer = 4 + 4 + 48 + 12 + 16 + 4 + 4 + 4 + 64 + 16 + 64 + 4;
  size_t n = (size_t)(16 + 8 + 2 * per_layer + 8);
  write_llmc(path, (const int32_t[]){20240326, 3, 2, 3, 2, 1, 4, 4}, n);
  gpt2_weights *w = (gpt2_weights *)1;
  gpt2_err err;
  assert_int_equal(gpt2_weights_load(path, &w, &err), 0);
  assert_int_equal(w->cfg.C, 4);
  assert_int_equal(w->cfg.Vp, 4);
  assert_int_equal(w->cfg.V, 3);
  assert_int_equal(w->n_copied, 0);
  assert_int_equal(gpt2_weights_count(w), 28);
  assert_null(gpt2_weights_get(w, 28));
  assert_null(gpt2_weights_get(w, -1));
  /* Floats hold their index in the file, so each view's first value is its offset. */
  const gpt2_tensor *q1 = &w->layer[1].qkvw;
  assert_int_equal(q1->layout, GPT2_OUT_IN);
  assert_int_equal(q1->shape[0], 12);
  assert_int_equal(q1->shape[1], 4);
  assert_string_equal(q1->name, "qkvw[1]");
  assert_true(((const float *)q1->data)[0] == (float)(16 + 8 + 2 * 4 + 2 * 4 + 48));
  assert_true(((const float *)w->lnfb.data)[3] == (float)(n - 1));
  assert_ptr_equal(gpt2_weights_get(w, 2 + 2 * 2 + 1), q1); /* kind 2 (qkvw), layer 1 */
  gpt2_weights_free(w);
  /* The same header one float short. */
  write_llmc(path, (const int32_t[]){20240326, 3, 2, 3, 2, 1, 4, 4}, n - 1);
  assert_int_equal(gpt2_weights_load(path, &w, &err), -1);
  assert_null(w);
  assert_non_null(strstr(err.msg, "(truncated?)"));
  assert_non_null(strstr(err.msg, path));
  unlink(path);
  gpt2_weights_free(NULL);
}

static void test_weights_missing(void **state) {
  (void)state;
  gpt2_weights *w;
  gpt2_err err;
  assert_int_equal(gpt2_weights_load("/nonexistent/model.bin", &w, &err), -1);
  assert_null(w);
  assert_non_null(strstr(err.msg, "/nonexistent/model.bin: cannot open"));
  /* the model file is named first, then a missing config.json beside a present one */
  assert_int_equal(gpt2_weights_load_safetensors("/nonexistent/m.safetensors", NULL, &w, &err), -1);
  assert_non_null(strstr(err.msg, "/nonexistent/m.safetensors: cannot open"));
  char dir[] = "/tmp/gpt2_api_XXXXXX", path[64], cfg[64];
  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/m.safetensors", dir);
  snprintf(cfg, sizeof cfg, "%s/config.json", dir);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  fputs("not empty", f);
  fclose(f);
  assert_int_equal(gpt2_weights_load_safetensors(path, NULL, &w, &err), -1);
  assert_null(w);
  remove(path);
  rmdir(dir);
  assert_non_null(strstr(err.msg, cfg));
  assert_non_null(strstr(err.msg, "cannot open"));
}

int main(void) {
  const struct CMUnitTest bpe_tests[] = {
      cmocka_unit_test(test_known_ids),          cmocka_unit_test(test_roundtrip_random_bytes),
      cmocka_unit_test(test_cache_fill),         cmocka_unit_test(test_decode_errors),
      cmocka_unit_test(test_load_errors),
  };
  const struct CMUnitTest weight_tests[] = {
      cmocka_unit_test(test_weights_llmc_views),
      cmocka_unit_test(test_weights_missing),
  };
  int fail = cmocka_run_group_tests_name("gpt2_bpe", bpe_tests, setup_paths, teardown_bpe);
  fail += cmocka_run_group_tests_name("gpt2_weights", weight_tests, NULL, NULL);
  return fail ? 1 : 0;
}
