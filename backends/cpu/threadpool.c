/* threadpool.c — persistent pthread pool with a statically chunked parallel-for
   (interface and guarantees in threadpool.h).

   Protocol: one job at a time (|submit| held by the caller for the whole call). The caller
   writes the job under |mu|, bumps |gen| and broadcasts |work|; worker k (1-based) wakes,
   sees a new generation, runs chunk k if k < chunks, and the last of the c - 1 chunk
   runners signals |done|. Workers without a chunk only note the generation, so |pending|
   counts exactly the chunks still running; the next job cannot start before it reaches 0,
   so a worker that oversleeps a generation it had no part in never misses one it had.

   Example: n = 10, grain = 1, 4 threads -> chunks [0,3) [3,6) [6,8) [8,10); the caller runs
   [0,3), workers 1..3 the others. n = 10, grain = 4 -> 2 chunks [0,5) [5,10). */
#include "threadpool.h"
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

struct tp_pool {
  int nthreads;            /* the caller counts as thread 0 */
  pthread_t *workers;      /* nthreads - 1 */
  int started;             /* workers actually created */
  pthread_mutex_t submit;  /* one job at a time */
  pthread_mutex_t mu;      /* guards everything below */
  pthread_cond_t work, done;
  uint64_t gen;
  bool stop;
  tp_fn fn;                /* the current job */
  void *user;
  int64_t n;
  int chunks;
  int pending;             /* worker chunks of the current job not finished yet */
};

typedef struct tp_worker_arg {
  tp_pool *pool;
  int index;
} tp_worker_arg;

/* Non-NULL while this thread runs pool work: a parallel-for from there runs inline. */
static _Thread_local const tp_pool *tp_current;

void tp_chunk_range(int64_t n, int chunks, int k, int64_t *begin, int64_t *end) {
  int64_t q = n / chunks, r = n % chunks;
  *begin = k * q + (k < r ? k : r);
  *end = *begin + q + (k < r ? 1 : 0);
}

int tp_chunks(const tp_pool *p, int64_t n, int64_t grain) {
  if (n <= 0) return 0;
  if (grain < 1) grain = 1;
  int64_t c = n / grain;
  if (c < 1) c = 1;
  return c < p->nthreads ? (int)c : p->nthreads;
}

int tp_size(const tp_pool *p) { return p->nthreads; }

static void *tp_worker_main(void *arg) {
  tp_worker_arg a = *(tp_worker_arg *)arg;
  free(arg);
  tp_pool *p = a.pool;
  tp_current = p;
  uint64_t seen = 0;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (p->gen == seen && !p->stop) pthread_cond_wait(&p->work, &p->mu);
    if (p->stop) break;
    seen = p->gen;
    if (a.index >= p->chunks) continue;
    tp_fn fn = p->fn;
    void *user = p->user;
    int64_t b, e;
    tp_chunk_range(p->n, p->chunks, a.index, &b, &e);
    pthread_mutex_unlock(&p->mu);
    fn(user, b, e);
    pthread_mutex_lock(&p->mu);
    if (--p->pending == 0) pthread_cond_signal(&p->done);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

hj_status tp_create(int nthreads, tp_pool **out) {
  if (!out) return HJ_ERR_INVALID_ARG;
  *out = NULL;
  if (nthreads <= 0) {
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    nthreads = c > 0 ? (int)c : 1;
  }
  tp_pool *p = calloc(1, sizeof *p);
  if (!p) return HJ_ERR_OOM;
  p->nthreads = nthreads;
  pthread_mutex_init(&p->submit, NULL);
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->work, NULL);
  pthread_cond_init(&p->done, NULL);
  p->workers = calloc((size_t)nthreads, sizeof *p->workers);
  if (!p->workers) {
    tp_destroy(p);
    return HJ_ERR_OOM;
  }
  for (int k = 1; k < nthreads; k++) {
    tp_worker_arg *a = malloc(sizeof *a);
    if (!a) { tp_destroy(p); return HJ_ERR_OOM; }
    *a = (tp_worker_arg){ p, k };
    if (pthread_create(&p->workers[k - 1], NULL, tp_worker_main, a) != 0) {
      free(a);
      tp_destroy(p);
      return HJ_ERR_BACKEND;
    }
    p->started++;
  }
  *out = p;
  return HJ_OK;
}

void tp_destroy(tp_pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  p->stop = true;
  pthread_cond_broadcast(&p->work);
  pthread_mutex_unlock(&p->mu);
  for (int k = 0; k < p->started; k++) pthread_join(p->workers[k], NULL);
  free(p->workers);
  pthread_cond_destroy(&p->work);
  pthread_cond_destroy(&p->done);
  pthread_mutex_destroy(&p->mu);
  pthread_mutex_destroy(&p->submit);
  free(p);
}

void tp_parallel_for(tp_pool *p, int64_t n, int64_t grain, tp_fn fn, void *user) {
  if (n <= 0) return;
  int chunks = tp_chunks(p, n, grain);
  if (chunks == 1 || tp_current) {  /* nothing to share, or nested: run inline */
    fn(user, 0, n);
    return;
  }
  pthread_mutex_lock(&p->submit);
  pthread_mutex_lock(&p->mu);
  p->fn = fn;
  p->user = user;
  p->n = n;
  p->chunks = chunks;
  p->pending = chunks - 1;
  p->gen++;
  pthread_cond_broadcast(&p->work);
  pthread_mutex_unlock(&p->mu);

  tp_current = p;
  int64_t b, e;
  tp_chunk_range(n, chunks, 0, &b, &e);
  fn(user, b, e);
  tp_current = NULL;

  pthread_mutex_lock(&p->mu);
  while (p->pending > 0) pthread_cond_wait(&p->done, &p->mu);
  pthread_mutex_unlock(&p->mu);
  pthread_mutex_unlock(&p->submit);
}
