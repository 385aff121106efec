/* bench_util.h — what every benchmark program shares: a monotonic clock and a report of
   how busy the machine was (other processes' share of the CPU time during the run), so a
   reader can tell when absolute figures (and 2-thread ones above all) are unreliable.
   Header-only (static functions); each benchmark is one program. */
#ifndef HLOJIT_BENCH_UTIL_H
#define HLOJIT_BENCH_UTIL_H
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <unistd.h>

static double bench_now(void) {   /* seconds */
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct bench_load { double busy, self, wall; } bench_load;

/* The machine's busy CPU seconds (/proc/stat), this process's, and the wall clock. */
static bench_load bench_load_now(void) {
  bench_load l = { 0, 0, 0 };
  unsigned long long v[8] = { 0 };
  FILE *f = fopen("/proc/stat", "r");
  if (f) {
    if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
               &v[5], &v[6], &v[7]) != 8)
      memset(v, 0, sizeof v);
    fclose(f);
  }
  l.busy = (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)sysconf(_SC_CLK_TCK);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  l.self = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec +
           1e-6 * (double)ru.ru_stime.tv_usec;
  l.wall = bench_now();
  return l;
}

/* One line: the share of the machine's CPU time other processes used since |a|. */
static void bench_load_report(bench_load a) {
  bench_load b = bench_load_now();
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  double other = (b.busy - a.busy - (b.self - a.self)) / ((b.wall - a.wall) * (double)(ncpu > 0 ? ncpu : 1));
  if (other < 0) other = 0;
  printf("machine: %ld CPUs; other processes used %.0f%% of its CPU time during this run%s\n", ncpu,
         100.0 * other, other > 0.1 ? " (BUSY: absolute numbers are low, 2-thread figures unreliable)" : "");
}
#endif
