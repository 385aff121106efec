/* test_gpt2_session.c — cmocka tests of the GPT-2 session's KV cache buckets (session.h,
   KV CACHE), in-process on the CPU backend, built with ASan+UBSan by
   `make test-gpt2-session`. The model: random weights of a small config (bench/gpt2_random.h)
   (L = 3, C = 64, maxT = 8192, so that its full cache, 12 MiB, is over the 8 MiB under
   which a session makes the cache full length at once and buckets are used).
   Checked: a prefill makes the cache its own bucket, smaller than before too, and a
   decode step then gives the bits a fresh session gives; rewind keeps the bucket; a decode
   step that crosses a bucket's end grows the cache with the filled positions kept (its
   logits agree with a prefill of the same ids). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "session.h"
#include "bench/gpt2_random.h"

enum { L = 3, NH = 2, C = 64, V = 100, VP = 128, MAXT = 8192 };

static float *g_params;
static gpt2_weights g_w;
static gpt2_layer g_layer[L];

static int setup_weights(void **state) {
  gpt2_config cfg = {.max_T = MAXT, .V = V, .Vp = VP, .L = L, .NH = NH, .C = C};
  g_params = gpt2_random_weights(&g_w, g_layer, cfg, 5.0, 12345);   /* bench/gpt2_random.h */
  if (!g_params) return -1;
  *state = &g_w;
  return 0;
}

static int teardown_weights(void **state) {
  free(g_params);
  return 0;
}

static gpt2_session *new_session(void) {
  gpt2_session_opts o;
  gpt2_session_opts_init(&o);
  o.backend = HJ_BACKEND_CPU;
  o.num_threads = 1;
  gpt2_session *s = NULL;
  gpt2_err err;
  if (gpt2_session_create(&g_w, &o, &s, &err)) fail_msg("session: %s", err.msg);
  return s;
}

static int cache_entries(const gpt2_session *s) {
  gpt2_session_stats st;
  gpt2_session_get_stats(s, &st);
  return st.cache_entries;
}

static int32_t g_ids[512];

static void prefill(gpt2_session *s, int n, float *logits) {
  const float *lg;
  gpt2_err err;
  if (gpt2_session_prefill(s, g_ids, n, &lg, &err)) fail_msg("prefill %d: %s", n, err.msg);
  if (logits) memcpy(logits, lg, sizeof *logits * V);
}

static void decode(gpt2_session *s, int32_t id, float *logits) {
  const float *lg;
  gpt2_err err;
  if (gpt2_session_decode(s, id, &lg, &err)) fail_msg("decode: %s", err.msg);
  memcpy(logits, lg, sizeof *logits * V);
}

/* A prefill makes the cache its bucket again after a longer one; the step after it gives
   the bits of a fresh session's; rewind keeps the bucket. */
static void test_prefill_fits_cache(void **state) {
  for (int i = 0; i < 512; i++) g_ids[i] = (int32_t)((i * 37 + 11) % V);
  float a[V], b[V];
  gpt2_session *s = new_session(), *fresh = new_session();
  prefill(s, 300, NULL);
  assert_int_equal(cache_entries(s), 512);
  decode(s, 7, a);
  prefill(s, 100, NULL);
  assert_int_equal(cache_entries(s), 128);
  decode(s, 7, a);
  prefill(fresh, 100, NULL);
  assert_int_equal(cache_entries(fresh), 128);
  decode(fresh, 7, b);
  assert_memory_equal(a, b, sizeof a);
  gpt2_session_rewind(s, 50);
  assert_int_equal(gpt2_session_length(s), 50);
  assert_int_equal(cache_entries(s), 128);
  gpt2_session_free(s);
  gpt2_session_free(fresh);
}

/* Decode steps across a bucket's end: the cache grows (positions kept), and the step's
   logits agree with a prefill of the same ids. */
static void test_decode_grows_cache(void **state) {
  for (int i = 0; i < 512; i++) g_ids[i] = (int32_t)((i * 53 + 5) % V);
  float a[V], b[V];
  gpt2_session *s = new_session();
  prefill(s, 126, NULL);
  assert_int_equal(cache_entries(s), 128);
  decode(s, g_ids[126], a); /* position 126: the bucket's last free entry is 127 */
  assert_int_equal(cache_entries(s), 128);
  decode(s, g_ids[127], a); /* position 127 fills it */
  assert_int_equal(cache_entries(s), 128);
  decode(s, g_ids[128], a); /* position 128: grows to 256 */
  assert_int_equal(cache_entries(s), 256);
  assert_int_equal(gpt2_session_length(s), 129);
  prefill(s, 129, b);
  float scale = 0, diff = 0;
  for (int i = 0; i < V; i++) {
    scale = fmaxf(scale, fabsf(b[i]));
    diff = fmaxf(diff, fabsf(a[i] - b[i]));
  }
  assert_true(scale > 0);
  if (diff > 1e-4f * scale) fail_msg("decode vs prefill logits: max diff %g of max %g", diff, scale);
  gpt2_session_free(s);
}

int main(void) {
  setenv("HLOJIT_CACHE_DIR", "off", 1); /* no disk cache written by the tests */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_prefill_fits_cache),
      cmocka_unit_test(test_decode_grows_cache),
  };
  return cmocka_run_group_tests(tests, setup_weights, teardown_weights);
}
