/* test_gpt2_sample.c — cmocka tests of the GPT-2 example's sampler (examples/gpt2/sample.h),
   built with ASan+UBSan by `make test-gpt2-unit`.

   The generator: splitmix64's first outputs from 0 are the published ones (they seed
   xoshiro256**'s state), uniform draws stay in [0, 1) with mean and variance close to
   1/2 and 1/12. Greedy: the largest logit, ties to the lowest id, NaN never chosen over a
   number. Sampling: over 200,000 draws from fixed logits the frequency of each id is
   within 0.006 of the probability the rules in sample.h give, computed here the plain
   way (a full sort of every id); ids outside the top-k / top-p set never come. The same
   seed repeats the same ids. Bad options are refused with a message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sample.h"

static void test_rng(void **state) {
  (void)state;
  gpt2_rng r;
  gpt2_rng_seed(&r, 0);
  // splitmix64 from x = 0 (Vigna's splitmix64.c): its first four outputs are the state.
  assert_true(r.s[0] == 0xe220a8397b1dcdafull);
  assert_true(r.s[1] == 0x6e789e6aa1b965f4ull);
  assert_true(r.s[2] == 0x06c45d188009454full);
  assert_true(r.s[3] == 0xf88bb8a8724c81ecull);
  double sum = 0, sq = 0;
  const int n = 1000000;
  for (int i = 0; i < n; i++) {
    double u = gpt2_rng_uniform(&r);
    assert_true(u >= 0 && u < 1);
    sum += u, sq += u * u;
  }
  double mean = sum / n, var = sq / n - mean * mean;
  assert_true(fabs(mean - 0.5) < 0.002);
  assert_true(fabs(var - 1.0 / 12) < 0.001);
}

static gpt2_sampler *make(gpt2_sampler_opts o, int V) {
  gpt2_sampler *s;
  gpt2_err err;
  assert_int_equal(gpt2_sampler_create(&o, V, &s, &err), 0);
  return s;
}

static void test_greedy(void **state) {
  (void)state;
  gpt2_sampler_opts o;
  gpt2_sampler_opts_init(&o);
  o.greedy = true;
  gpt2_sampler *s = make(o, 6);
  float a[6] = {1, 3, 2, 3, -1, 0};
  assert_int_equal(gpt2_sample(s, a), 1);
  float b[6] = {NAN, -5, NAN, -4, -7, NAN};
  assert_int_equal(gpt2_sample(s, b), 3);
  gpt2_sampler_free(s);
}

/* The probabilities of sample.h's rules by a full sort (ids by z desc, then id asc). */
static void expected(const float *lg, int V, gpt2_sampler_opts o, double *p) {
  int *ord = malloc(sizeof *ord * (size_t)V);
  for (int i = 0; i < V; i++) ord[i] = i;
  for (int i = 0; i < V; i++) // selection sort: V is small
    for (int j = i + 1; j < V; j++)
      if (lg[ord[j]] > lg[ord[i]] || (lg[ord[j]] == lg[ord[i]] && ord[j] < ord[i])) {
        int t = ord[i];
        ord[i] = ord[j], ord[j] = t;
      }
  int n = o.top_k > 0 && o.top_k < V ? o.top_k : V;
  double m = lg[ord[0]] / o.temperature, sum = 0;
  memset(p, 0, sizeof *p * (size_t)V);
  for (int i = 0; i < n; i++) sum += p[ord[i]] = exp(lg[ord[i]] / o.temperature - m);
  for (int i = 0; i < n; i++) p[ord[i]] /= sum;
  if (o.top_p < 1) {
    double c = 0;
    int keep = n;
    for (int i = 0; i < n; i++)
      if ((c += p[ord[i]]) >= o.top_p) {
        keep = i + 1;
        break;
      }
    double t = 0;
    for (int i = 0; i < n; i++) {
      if (i >= keep) p[ord[i]] = 0;
      t += p[ord[i]];
    }
    for (int i = 0; i < V; i++) p[i] /= t;
  }
  free(ord);
}

static void check_distribution(gpt2_sampler_opts o) {
  enum { V = 40, N = 200000 };
  float lg[V];
  for (int i = 0; i < V; i++) lg[i] = (float)(2.0 * sin(1.3 * i) + 0.05 * i);
  lg[7] = lg[3]; // a tie
  double p[V], f[V] = {0};
  expected(lg, V, o, p);
  gpt2_sampler *s = make(o, V);
  for (int i = 0; i < N; i++) {
    int32_t id = gpt2_sample(s, lg);
    assert_true(id >= 0 && id < V);
    assert_true(p[id] > 0); // never outside the kept set
    f[id] += 1.0 / N;
  }
  for (int i = 0; i < V; i++) {
    if (fabs(f[i] - p[i]) > 0.006)
      fail_msg("T=%g k=%d p=%g: id %d drawn %.4f, expected %.4f", o.temperature, o.top_k,
               o.top_p, i, f[i], p[i]);
  }
  gpt2_sampler_free(s);
  // the same seed, the same ids
  gpt2_sampler *a = make(o, V), *b = make(o, V);
  for (int i = 0; i < 1000; i++) assert_int_equal(gpt2_sample(a, lg), gpt2_sample(b, lg));
  gpt2_sampler_free(a);
  gpt2_sampler_free(b);
}

static void test_distributions(void **state) {
  (void)state;
  static const struct { double t; int k; double p; } cfg[] = {
      {1.0, 0, 1.0}, {0.7, 0, 1.0}, {1.5, 5, 1.0}, {1.0, 0, 0.8},
      {0.8, 10, 0.6}, {1.0, 1, 1.0}, {1.0, 0, 1e-9}, {2.0, 40, 0.95}};
  for (size_t i = 0; i < sizeof cfg / sizeof *cfg; i++) {
    gpt2_sampler_opts o;
    gpt2_sampler_opts_init(&o);
    o.temperature = cfg[i].t, o.top_k = cfg[i].k, o.top_p = cfg[i].p, o.seed = 1000 + i;
    check_distribution(o);
  }
}

static void test_bad_options(void **state) {
  (void)state;
  static const struct { double t; int k; double p; } bad[] = {
      {0, 0, 1}, {-1, 0, 1}, {NAN, 0, 1}, {1, -1, 1}, {1, 0, 0}, {1, 0, 1.5}, {1, 0, NAN}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    gpt2_sampler_opts o;
    gpt2_sampler_opts_init(&o);
    o.temperature = bad[i].t, o.top_k = bad[i].k, o.top_p = bad[i].p;
    gpt2_sampler *s = (gpt2_sampler *)1;
    gpt2_err err = {{0}};
    assert_int_equal(gpt2_sampler_create(&o, 10, &s, &err), -1);
    assert_null(s);
    assert_true(strstr(err.msg, "--t") != NULL);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rng),
      cmocka_unit_test(test_greedy),
      cmocka_unit_test(test_distributions),
      cmocka_unit_test(test_bad_options),
  };
  return cmocka_run_group_tests_name("gpt2 sampler", tests, NULL, NULL);
}
