/* threadpool.h — a small persistent pthread pool with a blocking parallel-for over fixed
   chunks (CPU backend; kernels take (user, begin, end)).

   tp_parallel_for(p, n, grain, fn, user) splits [0, n) into c = min(threads, max(1, n/grain))
   contiguous chunks of sizes differing by at most one; chunk k runs on thread k, the caller
   being thread 0, unless thread k has not come for it by the time another thread is out of
   work, which then runs it (a thread waiting for a core does not hold up the job). The
   split depends only on (n, grain, thread count), never on timing, so a kernel that writes
   each output from one chunk, and keeps any per-chunk state by chunk (tp_chunk_range), not
   by thread, gives the same bits on every run.
   Idle workers, and the caller waiting for them, spin for up to 0.2 ms before sleeping on a
   condition variable (no spinning when the pool has more threads than cores). */
#ifndef HLOJIT_THREADPOOL_H
#define HLOJIT_THREADPOOL_H

#include "../../hlojit.h"
#include <stdint.h>

typedef struct tp_pool tp_pool;
typedef void (*tp_fn)(void *user, int64_t begin, int64_t end);

/* The cores this process may run on: its CPU affinity mask (taskset, a container's
   cpuset), else the online cores. */
int tp_cores(void);

/* Starts a pool of |nthreads| threads counting the caller (nthreads - 1 workers);
   0 or less: tp_cores(). *out is NULL on failure
   (HJ_ERR_OOM, or HJ_ERR_BACKEND when pthread_create fails). Free with tp_destroy. */
hj_status tp_create(int nthreads, tp_pool **out);
void tp_destroy(tp_pool *p); /* joins the workers; NULL is fine */

/* Threads of |p|, the caller included. */
int tp_size(const tp_pool *p);

/* Runs fn(user, b, e) over [0, |n|) in chunks of at least |grain| items (grain < 1 counts
   as 1), blocking until every chunk is done. n <= 0 does nothing. A call from inside a
   pool task (nested) runs the whole range on the calling thread in one chunk instead of
   deadlocking; calls from several outside threads take turns. */
void tp_parallel_for(tp_pool *p, int64_t n, int64_t grain, tp_fn fn, void *user);

/* The chunk count and the bounds of chunk |k| tp_parallel_for uses (for tests and for
   kernels that keep per-chunk partial results). */
int tp_chunks(const tp_pool *p, int64_t n, int64_t grain);
void tp_chunk_range(int64_t n, int chunks, int k, int64_t *begin, int64_t *end);

#endif
