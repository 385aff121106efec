/* fuzz_hlo.c — the structure-aware HLO fuzzer's driver: generated modules (fuzz_hlo_gen.c)
   through every stage a user's module can reach, under ASan+UBSan, with each outcome
   classified and counted.

   Usage: fuzz_hlo [--count N] [--seed S] [--jobs J] [--timeout SEC] [--no-cpu]
                   [--regress DIR] [--save DIR] [--shrink] [--print SEED] [--verbose]

   Per input (fz_check):
     parse      an exact-size heap copy (ASan sees any read past the end). Rejected: *out
                NULL, a message with `:LINE:COL:` (else a defect); a well-typed module must
                not be rejected (defect "valid-rejected": the generator and the parser
                disagree on XLA's rules, which one of them has wrong).
     print      print -> parse -> print is a fixed point, and the re-parsed module gives
                the same bits on the evaluator.
     interp     hj_compile_module + hj_exec_run on the reference evaluator, on inputs drawn
                from the seed (small values, some at the type's limits, NaN, ±inf, -0).
     opt        hj_module_optimize on a fresh parse: it must succeed (or fail with a message
                that is not HJ_ERR_INTERNAL), the result must verify, print back and give
                the evaluator's bits exactly (hlojit.h promises "bit for bit").
     cpu        the CPU backend: compile (no emitter errors: hj_exec_stats emit_errors == 0)
                and run; each output against the evaluator's at the generator's level
                (fuzz_hlo.h): exact bits (NaN matches NaN), a float tolerance (|a-b| <=
                rtol (|b| + max|b| over the output), rtol 2^-12 for f32/f64, 2^-5 for
                f16/bf16, ±0 equal) or not compared.
     emu        only in the fuzz_hlo_emu build (-DFUZZ_HLO_EMU, no sanitizers: the GPU
                emulator's fibers switch stacks): the module through the CUDA backend's
                emitters on the GPU emulator (tests/unit/cuda_emu.h), each output against
                the evaluator's at the same levels as the CPU's (defect "emu-values").
   Any error must carry a message; HJ_ERR_INTERNAL anywhere is a defect (a bug by
   definition). A crash, sanitizer report or timeout is a defect too.

   Outcomes: ok; clean error (rejected with a positioned message, or a stage that refused
   the module with a message: HJ_ERR_UNSUPPORTED, OOM, shapes...); defects by kind. The
   last lines print the counts; the exit status is 1 when any defect was found.

   Robustness: inputs run in worker processes (--jobs, default 1); a worker that crashes or
   hangs reports the input it was on and a new worker goes on from the next one. The
   generator is a pure function of the seed, so the parent regenerates the failing text,
   saves it (--save, default build/fuzz-hlo-failures/KIND-SEED.hlo) and, with --shrink,
   shrinks it (fuzz_hlo_shrink.c) while the same defect kind reproduces. Shrunk failures
   that were fixed belong in tests/fixtures/fuzz_regress/hlo_gen/ (--regress DIR runs every
   .hlo there first, with the levels of its `// fuzz_hlo: exact=...` line). */
#include "fuzz_hlo_driver.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

const char *const fz_kind_name[FZ_KIND_COUNT] = {
#define X(e, s, d) s,
  FZ_KINDS(X)
#undef X
};

static const char *const fz_kind_what[FZ_KIND_COUNT] = {
#define X(e, s, d) d,
  FZ_KINDS(X)
#undef X
};

/* ---- the worker side --------------------------------------------------------------------- */

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define FZ_LSAN 1
/* A report aborts, so that the parent sees a signal and the shrinker a crash; leaks are
   checked by each worker at the end of its range (fz_worker), not at _exit. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "abort_on_error=1:detect_leaks=1"; }
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void) { return "print_stacktrace=1:abort_on_error=1"; }
#endif

static int fz_out_fd = 1;
static uint64_t fz_current_seed;

static void fz_on_alarm(int sig) {
  (void)sig;
  char line[64];
  int n = snprintf(line, sizeof line, "T %llu\n", (unsigned long long)fz_current_seed);
  if (write(fz_out_fd, line, (size_t)n) < 0) _exit(4);
  _exit(3);
}

/* Checks the inputs of seeds first, first + stride, ... below end; one result line each. */
static void fz_worker(const fz_opts *o, uint64_t first, uint64_t end, uint64_t stride) {
  fz_stage_ctx sc;
  if (fz_stage_init(&sc, o->cpu) != 0) _exit(5);
  signal(SIGALRM, fz_on_alarm);
  for (uint64_t s = first; s < end; s += stride) {
    fhg_module gm;
    fhg_generate(s, &gm);
    char line[1200];
    int n = snprintf(line, sizeof line, "S %llu\n", (unsigned long long)s);
    fz_current_seed = s;
    if (write(fz_out_fd, line, (size_t)n) < 0) _exit(4);
    alarm((unsigned)o->timeout);
    fz_result r = fz_check(&sc, &gm, s);
    alarm(0);
    n = snprintf(line, sizeof line, "R %llu %d %s\n", (unsigned long long)s, (int)r.kind,
                 r.detail[0] ? r.detail : "-");
    for (char *p = line + 2; *p && p < line + n - 1; p++) if (*p == '\n') *p = ' ';
    if (write(fz_out_fd, line, (size_t)n) < 0) _exit(4);
    fhg_free(&gm);
  }
  fz_stage_free(&sc);
#ifdef FZ_LSAN
  if (__lsan_do_recoverable_leak_check()) {
    char line[64];
    int n = snprintf(line, sizeof line, "L %llu\n", (unsigned long long)first);
    if (write(fz_out_fd, line, (size_t)n) < 0) _exit(4);
  }
#endif
  _exit(0);
}

/* ---- the parent ---------------------------------------------------------------------------- */

typedef struct {
  pid_t pid;
  int fd;
  uint64_t next, end, stride;       /* the seeds this worker still owes */
  uint64_t current;                 /* the seed it started last */
  bool started, busy;
  char buf[8192];
  size_t len;
} fz_worker_t;

static long fz_count[FZ_KIND_COUNT], fz_inputs;
static char fz_first_detail[FZ_KIND_COUNT][300];

static void fz_mkdirs(const char *dir) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s", dir);
  for (char *p = tmp + 1; *p; p++)
    if (*p == '/') { *p = 0; mkdir(tmp, 0777); *p = '/'; }
  mkdir(tmp, 0777);
}

static void fz_record(const fz_opts *o, uint64_t seed, fz_kind k, const char *detail) {
  fz_inputs++;
  fz_count[k]++;
  if (fz_is_defect(k) && !fz_first_detail[k][0])
    snprintf(fz_first_detail[k], sizeof fz_first_detail[k], "seed %llu: %s", (unsigned long long)seed, detail);
  if (o->verbose || (fz_is_defect(k) && fz_count[k] <= 3))
    fprintf(stderr, "fuzz_hlo: seed %llu: %s: %.400s\n", (unsigned long long)seed, fz_kind_name[k], detail);
  if (!fz_is_defect(k)) return;
  fhg_module gm;
  fhg_generate(seed, &gm);
  fz_mkdirs(o->save);
  char path[4200];
  snprintf(path, sizeof path, "%s/%s-%llu.hlo", o->save, fz_kind_name[k], (unsigned long long)seed);
  fz_save(path, &gm, k, detail);
  if (o->shrink) fz_shrink_and_save(o, &gm, k, seed);
  fhg_free(&gm);
}

static void fz_spawn(const fz_opts *o, fz_worker_t *w) {
  int p[2];
  w->busy = false;
  if (w->next >= w->end || pipe(p) != 0) return;
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) { close(p[0]); close(p[1]); return; }
  if (pid == 0) {
    close(p[0]);
    fz_out_fd = p[1];
    fz_worker(o, w->next, w->end, w->stride);
  }
  close(p[1]);
  w->pid = pid;
  w->fd = p[0];
  w->len = 0;
  w->started = false;
  w->busy = true;
}

/* One line from a worker: "S seed" (started), "R seed kind detail" or "T seed" (timeout). */
static void fz_line(const fz_opts *o, fz_worker_t *w, char *line) {
  unsigned long long s = 0;
  int kind = 0, off = 0;
  if (line[0] == 'S' && sscanf(line, "S %llu", &s) == 1) {
    w->current = s;
    w->started = true;
  } else if (line[0] == 'R' && sscanf(line, "R %llu %d %n", &s, &kind, &off) == 2) {
    w->started = false;
    w->next = s + w->stride;
    if (kind < 0 || kind >= FZ_KIND_COUNT) kind = FZ_D_INTERNAL;
    fz_record(o, s, (fz_kind)kind, line + off);
  } else if (line[0] == 'L' && sscanf(line, "L %llu", &s) == 1) {
    fz_count[FZ_D_LEAK]++;   /* not an input of its own: the range from seed s */
    if (!fz_first_detail[FZ_D_LEAK][0])
      snprintf(fz_first_detail[FZ_D_LEAK], sizeof fz_first_detail[0],
               "a worker from seed %llu (LeakSanitizer's report is on stderr)", s);
  } else if (line[0] == 'T' && sscanf(line, "T %llu", &s) == 1) {
    w->started = false;
    w->next = s + w->stride;
    char d[64];
    snprintf(d, sizeof d, "no result after %d s", o->timeout);
    fz_record(o, s, FZ_D_TIMEOUT, d);
  }
}

static void fz_reap(const fz_opts *o, fz_worker_t *w) {
  int status = 0;
  waitpid(w->pid, &status, 0);
  close(w->fd);
  w->busy = false;
  if (w->started) {   /* died on w->current: a crash (sanitizer report, signal) */
    char d[128];
    if (WIFSIGNALED(status)) snprintf(d, sizeof d, "killed by signal %d", WTERMSIG(status));
    else snprintf(d, sizeof d, "exit status %d (a sanitizer report is on stderr)", WEXITSTATUS(status));
    w->next = w->current + w->stride;
    fz_record(o, w->current, FZ_D_CRASH, d);
    w->started = false;
  }
  fz_spawn(o, w);
}

static void fz_run_parallel(const fz_opts *o) {
  int nj = o->jobs < 1 ? 1 : o->jobs > 16 ? 16 : o->jobs;
  fz_worker_t ws[16];
  memset(ws, 0, sizeof ws);
  for (int j = 0; j < nj; j++) {
    ws[j].next = o->seed + (uint64_t)j;
    ws[j].end = o->seed + (uint64_t)o->count;
    ws[j].stride = (uint64_t)nj;
    fz_spawn(o, &ws[j]);
  }
  for (;;) {
    struct pollfd pf[16];
    int map[16], np = 0;
    for (int j = 0; j < nj; j++)
      if (ws[j].busy) pf[np] = (struct pollfd){ .fd = ws[j].fd, .events = POLLIN }, map[np++] = j;
    if (!np) break;
    if (poll(pf, (nfds_t)np, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < np; i++) {
      if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      fz_worker_t *w = &ws[map[i]];
      ssize_t got = read(w->fd, w->buf + w->len, sizeof w->buf - w->len - 1);
      if (got <= 0) { fz_reap(o, w); continue; }
      w->len += (size_t)got;
      w->buf[w->len] = 0;
      char *start = w->buf, *nl;
      while ((nl = strchr(start, '\n'))) {
        *nl = 0;
        fz_line(o, w, start);
        start = nl + 1;
      }
      w->len = strlen(start);
      memmove(w->buf, start, w->len + 1);
    }
  }
}

/* Every .hlo of |dir| (sorted) through fz_check in this process (they are known not to
   crash: fixed regressions); levels from the file's `// fuzz_hlo: exact=a,b,c` line. */
static int fz_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void fz_run_regressions(const fz_opts *o) {
  DIR *d = opendir(o->regress);
  if (!d) {
    fprintf(stderr, "fuzz_hlo: no regression folder %s\n", o->regress);
    return;
  }
  char *names[4096];
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) && n < 4096;) {
    size_t len = strlen(e->d_name);
    if (len > 4 && !strcmp(e->d_name + len - 4, ".hlo")) names[n++] = strdup(e->d_name);
  }
  closedir(d);
  qsort(names, (size_t)n, sizeof *names, fz_cmp);
  fz_stage_ctx sc;
  if (fz_stage_init(&sc, o->cpu) != 0) return;
  for (int i = 0; i < n; i++) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", o->regress, names[i]);
    fhg_module gm;
    if (fz_load(path, &gm) == 0) {
      fz_result r = fz_check(&sc, &gm, 1);
      fz_record(o, 0, r.kind, r.detail);
      if (o->verbose || fz_is_defect(r.kind))
        fprintf(stderr, "fuzz_hlo: regression %s: %s\n", names[i], fz_kind_name[r.kind]);
      fhg_free(&gm);
    }
    free(names[i]);
  }
  fz_stage_free(&sc);
}

static void fz_usage(void) {
  fprintf(stderr, "usage: fuzz_hlo [--count N] [--seed S] [--jobs J] [--timeout SEC] [--no-cpu]\n"
                  "                [--regress DIR] [--save DIR] [--shrink] [--print SEED] [--verbose]\n");
}

int main(int argc, char **argv) {
  fz_opts o = { .count = 1000, .seed = 1, .jobs = 1, .timeout = 60, .cpu = true,
                .save = "build/fuzz-hlo-failures" };
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--count") && v) o.count = atol(v), i++;
    else if (!strcmp(a, "--seed") && v) o.seed = strtoull(v, NULL, 10), i++;
    else if (!strcmp(a, "--jobs") && v) o.jobs = atoi(v), i++;
    else if (!strcmp(a, "--timeout") && v) o.timeout = atoi(v), i++;
    else if (!strcmp(a, "--regress") && v) o.regress = v, i++;
    else if (!strcmp(a, "--save") && v) o.save = v, i++;
    else if (!strcmp(a, "--print") && v) {
      fhg_module gm;
      fhg_generate(strtoull(v, NULL, 10), &gm);
      fputs(gm.text, stdout);
      printf("// well_typed=%d mutation=%s exact=", gm.well_typed, gm.mutation ? gm.mutation : "-");
      for (int k = 0; k < gm.nout; k++) printf("%s%d", k ? "," : "", gm.exact[k]);
      printf("\n");
      fhg_free(&gm);
      return 0;
    }
    else if (!strcmp(a, "--no-cpu")) o.cpu = false;
    else if (!strcmp(a, "--shrink")) o.shrink = true;
    else if (!strcmp(a, "--verbose")) o.verbose = true;
    else { fz_usage(); return 2; }
  }
  if (!fz_compare_bites()) {
    printf("fuzz_hlo: the output comparison does not catch planted differences\nfuzz_hlo: inputs 0, defects 1\n");
    return 1;
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if (o.regress) fz_run_regressions(&o);
  long regress = fz_inputs;
  fz_run_parallel(&o);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  long defects = 0, clean = 0, ok = fz_count[FZ_OK] + fz_count[FZ_MUTANT_OK];
  for (int k = 0; k < FZ_KIND_COUNT; k++) {
    if (fz_is_defect((fz_kind)k)) defects += fz_count[k];
    else if (k != FZ_OK && k != FZ_MUTANT_OK) clean += fz_count[k];
  }
  double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  printf("fuzz_hlo: seeds %llu..%llu, %d job(s), %.1f s\n", (unsigned long long)o.seed,
         (unsigned long long)(o.seed + (uint64_t)o.count - 1), o.jobs, secs);
  for (int k = 0; k < FZ_KIND_COUNT; k++)
    if (fz_count[k] || !fz_is_defect((fz_kind)k))
      printf("fuzz_hlo:   %-22s %7ld  %s%s%s\n", fz_kind_name[k], fz_count[k], fz_kind_what[k],
             fz_first_detail[k][0] ? "; first: " : "", fz_first_detail[k]);
  printf("fuzz_hlo: inputs %ld (%ld regression files), ok %ld, clean error %ld, defects %ld\n", fz_inputs,
         regress, ok, clean, defects);
  return defects ? 1 : 0;
}
