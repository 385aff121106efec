/* sample.h — choosing the next token from the logits: greedy, or temperature / top-k / top-p
   sampling with a seeded generator of our own, so a seed gives the same text on every run
   and machine. Library-independent C.

   GREEDY: the largest logit; ties go to the lowest id (NumPy's argmax, the reference's).

   SAMPLING (the order of tests/reference/gpt2.py's Sampler):
     1. z = logits / temperature, in double;
     2. top-k (k > 0): keep the k largest z (ties: lower id first);
     3. p = softmax(z) over what is kept;
     4. top-p (p < 1): sort by p, largest first, keep the shortest prefix whose sum reaches
        top_p (at least one token), renormalise;
     5. draw u uniform in [0, 1) and take the first token whose running sum of p exceeds
        u * sum.
   Without top-k, step 4 sorts only the tokens with p >= (1 - top_p) / V: the rest together
   hold less than 1 - top_p, so the prefix is complete before any of them (the top-p set is
   the same as with a full sort, and one step costs O(V) plus a short sort).

   THE GENERATOR: xoshiro256** (Blackman and Vigna, 2018), its 256-bit state seeded from
   the 64-bit seed by splitmix64 as its authors recommend; u = (next >> 11) * 2^-53. One
   draw per sampled token. The ids are reproducible for one seed and one build; they are
   not NumPy's draws, so a sampled run is not compared token by token with the reference
   (greedy runs are). */
#ifndef GPT2_SAMPLE_H
#define GPT2_SAMPLE_H

#include <stdbool.h>
#include <stdint.h>

#include "gpt2_err.h"

typedef struct gpt2_sampler_opts {
  bool greedy;        /* default false */
  double temperature; /* > 0; default 1 */
  int top_k;          /* 0: off (default) */
  double top_p;       /* in (0, 1]; 1: off (default) */
  uint64_t seed;      /* default 0 */
} gpt2_sampler_opts;
void gpt2_sampler_opts_init(gpt2_sampler_opts *o);

typedef struct gpt2_sampler gpt2_sampler;

/* A sampler over |V| logits; checks the options (temperature > 0, top_k >= 0, top_p in
   (0, 1]). *out is NULL on failure. */
int gpt2_sampler_create(const gpt2_sampler_opts *o, int V, gpt2_sampler **out, gpt2_err *err);
void gpt2_sampler_free(gpt2_sampler *s);
/* The next id from |logits| (V floats). NaN logits are never chosen while a number is
   there. */
int32_t gpt2_sample(gpt2_sampler *s, const float *logits);

/* The generator alone (for tests): seeded as above; next 64 bits; uniform in [0, 1). */
typedef struct gpt2_rng {
  uint64_t s[4];
} gpt2_rng;
void gpt2_rng_seed(gpt2_rng *r, uint64_t seed);
uint64_t gpt2_rng_next(gpt2_rng *r);
double gpt2_rng_uniform(gpt2_rng *r);

#endif
