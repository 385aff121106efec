/* threadpool.c — persistent pthread pool with a parallel-for over fixed chunks, each thread
   running its own and then any left unclaimed (interface and guarantees in threadpool.h).

   Protocol: one job at a time (|submit| held by the caller for the whole call). The caller
   writes the job under |mu| (every chunk unclaimed, |pending| = the chunk count), bumps
   |gen| and broadcasts |work|, then runs chunks itself. Every thread, the caller included,
   claims chunks under |mu| until none is left: first its own (chunk k for thread k), then,
   from the last one down, any that no thread has claimed yet. So a thread that is slow
   to wake (its core busy with another process, or more threads than cores) does not hold
   up the job: the others run its chunk. Which thread runs a chunk never changes the
   chunk's bounds, so results stay the same bits (threadpool.h). The thread that finishes
   the last chunk signals |done|. A worker reads the job's fields in the same critical
   section as its claim, and the next job cannot start before |pending| reaches 0, so a
   claim always belongs to the job whose fields it read.

   Waiting: a worker between jobs, and the caller waiting for the chunks, first spin for up
   to TP_SPIN_NS on the atomic |gen| / |pending| and only then sleep on the condition
   variable. Jobs come in bursts (one per matmul or kernel of an executable), and waking a
   sleeping thread costs tens of microseconds (more in a VM): as much as a whole 2 MB gemv
   takes. Spinning is off when the pool has more threads than cores, where a spinning
   thread would only steal the core a chunk runner needs; such a pool also wakes only as
   many workers per job as there are other cores (waking all 63 workers of a 64-thread
   pool on 2 cores for every kernel cost more than the kernels), and the threads that are
   running claim the chunks of those asleep; a worker that sleeps through jobs misses
   nothing, it takes part in the first job that wakes it. The decrement of |pending|
   happens outside |mu|, but the last runner takes |mu| before signalling, so a caller that
   saw pending > 0 under |mu| is already waiting when the signal comes.

   Example: n = 10, grain = 1, 4 threads -> chunks [0,3) [3,6) [6,8) [8,10); the caller runs
   [0,3), workers 1..3 the others (one that has not woken by the time the caller is done
   finds its chunk run). n = 10, grain = 4 -> 2 chunks [0,5) [5,10). */
#include "threadpool.h"
#include <pthread.h>
#include <sys/syscall.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef __SSE2__
#include <emmintrin.h>
#define TP_PAUSE() _mm_pause()
#else
#define TP_PAUSE() ((void)0)
#endif

#define TP_SPIN_NS 200000   /* 0.2 ms: well above a wake-up, well below a time slice */

struct tp_pool {
  int nthreads;            /* the caller counts as thread 0 */
  pthread_t *workers;      /* nthreads - 1 */
  int started;             /* workers actually created */
  pthread_mutex_t submit;  /* one job at a time */
  pthread_mutex_t mu;      /* guards everything below */
  pthread_cond_t work, done;
  _Atomic uint64_t gen;    /* written under |mu|; read without it while spinning */
  atomic_bool stop;
  tp_fn fn;                /* the current job */
  void *user;
  int64_t n;
  int chunks;
  unsigned char *claimed;  /* [nthreads]: chunk k of the current job taken by a thread */
  int unclaimed;           /* chunks of the current job nobody has taken */
  atomic_int pending;      /* chunks of the current job not finished yet */
  int64_t spin_ns;         /* TP_SPIN_NS, or 0 when oversubscribed */
  int wake;                /* workers a job wakes: all, or cores - 1 when oversubscribed */
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

static int64_t tp_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Spins while |done|(p, arg) is false, for at most p->spin_ns; true if it became true. */
static bool tp_spin(tp_pool *p, bool (*done)(tp_pool *, uint64_t), uint64_t arg) {
  if (p->spin_ns <= 0) return false;
  int64_t until = 0;
  for (unsigned i = 0;; i++) {
    if (done(p, arg)) return true;
    TP_PAUSE();
    if ((i & 255) == 0) {   /* read the clock now and then: it costs ~20 ns */
      int64_t now = tp_now_ns();
      if (!until) until = now + p->spin_ns;
      else if (now >= until) return false;
    }
  }
}

static bool tp_new_job(tp_pool *p, uint64_t seen) {
  return atomic_load_explicit(&p->gen, memory_order_relaxed) != seen ||
         atomic_load_explicit(&p->stop, memory_order_relaxed);
}

static bool tp_all_done(tp_pool *p, uint64_t unused) {
  (void)unused;
  return atomic_load_explicit(&p->pending, memory_order_acquire) == 0;
}

/* Under |mu|: a chunk of the current job for thread |self| to run (its own if still free,
   else the highest free one), marked taken; -1 when every chunk is taken. */
static int tp_claim(tp_pool *p, int self) {
  if (p->unclaimed == 0) return -1;
  int k = self < p->chunks && !p->claimed[self] ? self : p->chunks - 1;
  while (p->claimed[k]) k--;
  p->claimed[k] = 1;
  p->unclaimed--;
  return k;
}

/* Runs chunk |k| of the job (fn, user, n) read under |mu|, which is held on entry and on
   return (released while the chunk runs). */
static void tp_run_chunk(tp_pool *p, int k) {
  tp_fn fn = p->fn;
  void *user = p->user;
  int64_t b, e;
  tp_chunk_range(p->n, p->chunks, k, &b, &e);
  pthread_mutex_unlock(&p->mu);
  fn(user, b, e);
  bool last = atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel) == 1;
  pthread_mutex_lock(&p->mu);
  if (last) pthread_cond_signal(&p->done);
}

static void *tp_worker_main(void *arg) {
  tp_worker_arg a = *(tp_worker_arg *)arg;
  free(arg);
  tp_pool *p = a.pool;
  tp_current = p;
  uint64_t seen = 0;
  for (;;) {
    tp_spin(p, tp_new_job, seen);
    pthread_mutex_lock(&p->mu);   /* the job's fields are read under |mu| */
    while (atomic_load(&p->gen) == seen && !atomic_load(&p->stop))
      pthread_cond_wait(&p->work, &p->mu);
    if (atomic_load(&p->stop)) {
      pthread_mutex_unlock(&p->mu);
      break;
    }
    seen = atomic_load(&p->gen);
    /* a new job may start while a chunk runs: its chunks are claimed on the next turn */
    for (int k; atomic_load(&p->gen) == seen && (k = tp_claim(p, a.index)) >= 0;)
      tp_run_chunk(p, k);
    pthread_mutex_unlock(&p->mu);
  }
  return NULL;
}

/* The raw system call rather than glibc's sched_getaffinity: that one needs _GNU_SOURCE
   before the first system header, which the single-header build cannot promise. It
   returns the bytes of the mask it wrote (a kernel with more than 4096 CPUs: EINVAL, and
   the online count stands in). */
int tp_cores(void) {
#ifdef SYS_sched_getaffinity
  unsigned long mask[4096 / (8 * sizeof(unsigned long))];
  long bytes = syscall(SYS_sched_getaffinity, 0, sizeof mask, mask);
  if (bytes > 0) {
    int n = 0;
    for (size_t i = 0; i < (size_t)bytes / sizeof mask[0]; i++) n += __builtin_popcountl(mask[i]);
    if (n > 0) return n;
  }
#endif
  long c = sysconf(_SC_NPROCESSORS_ONLN);
  return c > 0 ? (int)c : 1;
}

hj_status tp_create(int nthreads, tp_pool **out) {
  if (!out) return HJ_ERR_INVALID_ARG;
  *out = NULL;
  int cores = tp_cores();
  if (nthreads <= 0) nthreads = cores;
  tp_pool *p = calloc(1, sizeof *p);
  if (!p) return HJ_ERR_OOM;
  p->nthreads = nthreads;
  p->spin_ns = nthreads > cores ? 0 : TP_SPIN_NS;
  p->wake = nthreads > cores ? cores - 1 : nthreads - 1;
  pthread_mutex_init(&p->submit, NULL);
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->work, NULL);
  pthread_cond_init(&p->done, NULL);
  p->workers = calloc((size_t)nthreads, sizeof *p->workers);
  p->claimed = calloc((size_t)nthreads, 1);
  if (!p->workers || !p->claimed) {
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
  atomic_store(&p->stop, true);
  pthread_cond_broadcast(&p->work);
  pthread_mutex_unlock(&p->mu);
  for (int k = 0; k < p->started; k++) pthread_join(p->workers[k], NULL);
  free(p->workers);
  free(p->claimed);
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
  memset(p->claimed, 0, (size_t)chunks);
  p->unclaimed = chunks;
  atomic_store(&p->pending, chunks);
  atomic_fetch_add(&p->gen, 1);
  if (p->wake >= p->nthreads - 1) {
    pthread_cond_broadcast(&p->work);
  } else {   /* oversubscribed: as many as can run beside the caller, who run the rest */
    int wake = chunks - 1 < p->wake ? chunks - 1 : p->wake;
    for (int i = 0; i < wake; i++) pthread_cond_signal(&p->work);
  }
  tp_current = p;   /* a parallel-for inside a chunk runs inline */
  for (int k; (k = tp_claim(p, 0)) >= 0;) tp_run_chunk(p, k);
  tp_current = NULL;
  pthread_mutex_unlock(&p->mu);

  if (!tp_spin(p, tp_all_done, 0)) {
    pthread_mutex_lock(&p->mu);
    while (atomic_load(&p->pending) > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
  }
  pthread_mutex_unlock(&p->submit);
}
