/* sample.c — greedy and seeded temperature / top-k / top-p sampling (the rules and the
   generator are in sample.h).

   Top-k selection keeps a min-heap of the k best (z, id) pairs seen so far, O(V log k);
   the kept candidates are then sorted best first, so top-p and the draw walk them in the
   same order as the reference's stable argsort. */
#include "sample.h"

#include <math.h>
#include <stdlib.h>

struct gpt2_sampler {
  gpt2_sampler_opts o;
  gpt2_rng rng;
  int V;
  int32_t *id; /* candidates */
  double *z;   /* their scaled logits, then probabilities */
};

void gpt2_sampler_opts_init(gpt2_sampler_opts *o) {
  *o = (gpt2_sampler_opts){.greedy = false, .temperature = 1.0, .top_k = 0, .top_p = 1.0,
                           .seed = 0};
}

/* ---- xoshiro256**, seeded by splitmix64 ------------------------------------------------- */
static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void gpt2_rng_seed(gpt2_rng *r, uint64_t seed) {
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t gpt2_rng_next(gpt2_rng *r) {
  uint64_t *s = r->s, out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return out;
}

double gpt2_rng_uniform(gpt2_rng *r) { return (double)(gpt2_rng_next(r) >> 11) * 0x1p-53; }

/* ---- the sampler ------------------------------------------------------------------------ */
int gpt2_sampler_create(const gpt2_sampler_opts *o, int V, gpt2_sampler **out, gpt2_err *err) {
  *out = NULL;
  if (V <= 0) return gpt2_errf(err, "sampler: vocabulary size %d", V);
  if (!o->greedy) {
    if (!(o->temperature > 0) || !isfinite(o->temperature))
      return gpt2_errf(err, "--temperature must be a number > 0 (got %g); use --greedy for "
                            "argmax", o->temperature);
    if (o->top_k < 0) return gpt2_errf(err, "--top-k must be >= 0 (got %d)", o->top_k);
    if (!(o->top_p > 0 && o->top_p <= 1))
      return gpt2_errf(err, "--top-p must be in (0, 1] (got %g)", o->top_p);
  }
  gpt2_sampler *s = calloc(1, sizeof *s);
  if (s) {
    s->id = malloc(sizeof *s->id * (size_t)V);
    s->z = malloc(sizeof *s->z * (size_t)V);
  }
  if (!s || !s->id || !s->z) {
    gpt2_sampler_free(s);
    return gpt2_errf(err, "sampler: out of memory");
  }
  s->o = *o;
  s->V = V;
  gpt2_rng_seed(&s->rng, o->seed);
  *out = s;
  return 0;
}

void gpt2_sampler_free(gpt2_sampler *s) {
  if (!s) return;
  free(s->id);
  free(s->z);
  free(s);
}

/* (za, ia) ranks before (zb, ib): larger value first, then lower id; NaN last. */
static int better(double za, int32_t ia, double zb, int32_t ib) {
  if (za > zb) return 1;
  if (za < zb) return 0;
  if (za == zb) return ia < ib;
  return isnan(zb) && !isnan(za) ? 1 : (isnan(za) && !isnan(zb) ? 0 : ia < ib);
}

static int32_t argmax(const float *x, int V) {
  int32_t best = 0;
  for (int32_t i = 1; i < V; i++)
    if (better(x[i], i, x[best], best)) best = i;
  return best;
}

/* Min-heap (the worst of the kept at the root) of n candidates. */
static void sift_down(double *z, int32_t *id, int n, int i) {
  for (;;) {
    int l = 2 * i + 1, r = l + 1, w = i;
    if (l < n && better(z[w], id[w], z[l], id[l])) w = l;
    if (r < n && better(z[w], id[w], z[r], id[r])) w = r;
    if (w == i) return;
    double tz = z[i];
    int32_t ti = id[i];
    z[i] = z[w], id[i] = id[w], z[w] = tz, id[w] = ti;
    i = w;
  }
}

typedef struct cand {
  double z;
  int32_t id;
} cand;

static int cand_cmp(const void *a, const void *b) {
  const cand *x = a, *y = b;
  return better(x->z, x->id, y->z, y->id) ? -1 : better(y->z, y->id, x->z, x->id) ? 1 : 0;
}

/* Sorts the n candidates best first (through a temporary array of pairs). */
static int sort_cands(double *z, int32_t *id, int n) {
  cand *c = malloc(sizeof *c * (size_t)(n > 0 ? n : 1));
  if (!c) return -1;
  for (int i = 0; i < n; i++) c[i] = (cand){z[i], id[i]};
  qsort(c, (size_t)n, sizeof *c, cand_cmp);
  for (int i = 0; i < n; i++) z[i] = c[i].z, id[i] = c[i].id;
  free(c);
  return 0;
}

int32_t gpt2_sample(gpt2_sampler *s, const float *logits) {
  const int V = s->V;
  if (s->o.greedy) return argmax(logits, V);
  double *z = s->z;
  int32_t *id = s->id;
  const double invT = 1.0 / s->o.temperature;
  int n = 0;
  if (s->o.top_k > 0 && s->o.top_k < V) { // step 2 via a heap of the k best
    const int k = s->o.top_k;
    for (int32_t i = 0; i < V; i++) {
      double zi = logits[i] * invT;
      if (n < k) {
        z[n] = zi, id[n] = i, n++;
        if (n == k)
          for (int j = k / 2 - 1; j >= 0; j--) sift_down(z, id, k, j);
      } else if (better(zi, i, z[0], id[0])) {
        z[0] = zi, id[0] = i;
        sift_down(z, id, k, 0);
      }
    }
  } else {
    for (int32_t i = 0; i < V; i++) z[i] = logits[i] * invT, id[i] = i;
    n = V;
  }
  double m = -INFINITY; // step 3
  for (int i = 0; i < n; i++)
    if (z[i] > m) m = z[i];
  if (!isfinite(m)) return argmax(logits, V); // all -inf or NaN: nothing to weigh
  double sum = 0;
  for (int i = 0; i < n; i++) {
    z[i] = isnan(z[i]) ? 0.0 : exp(z[i] - m);
    sum += z[i];
  }
  for (int i = 0; i < n; i++) z[i] /= sum;
  bool sorted = n < V; // the top-k candidates get sorted below
  if (s->o.top_p < 1.0 && !sorted) { // only tokens that can be in the nucleus
    const double eps = (1.0 - s->o.top_p) / V;
    int kept = 0;
    for (int i = 0; i < n; i++)
      if (z[i] >= eps) z[kept] = z[i], id[kept] = id[i], kept++;
    n = kept;
    sorted = true;
  }
  if (sorted && sort_cands(z, id, n)) return id[0];
  double total = 1.0;
  if (s->o.top_p < 1.0) { // step 4
    double c = 0;
    int keep = n;
    for (int i = 0; i < n; i++) {
      c += z[i];
      if (c >= s->o.top_p) {
        keep = i + 1;
        break;
      }
    }
    n = keep;
    total = 0;
    for (int i = 0; i < n; i++) total += z[i];
  }
  double u = gpt2_rng_uniform(&s->rng) * total, c = 0; // step 5
  for (int i = 0; i < n; i++) {
    c += z[i];
    if (u < c) return id[i];
  }
  return id[n - 1];
}
