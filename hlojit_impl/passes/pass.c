/* passes/pass.c — the pass framework: run one pass, check the module after it, dump it.

   Every pass of pipeline.c goes through hlo_pass_run, so that "which pass broke the
   module" is always answered by the verifier message naming the pass, and so that
   HLOJIT_DUMP_TO=DIR leaves one HLO text file per pass, numbered in run order:
     DIR/000.input.txt, DIR/001.inline-calls.txt, DIR/002.tuple-simplify.txt, ...
   (diff two neighbours to see what a pass did). The verifier runs after every pass that
   changed the module in debug builds (NDEBUG not defined), and after every pass whenever
   pc->verify_each is set. The text comes
   from the pc->print hook (the runtime gives the printer): passes do not know text/. */
#include "passes.h"
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

static double pas_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Adds |ms| to pass |name|'s entry (names are few: a linear search). */
static void pas_time(hlo_pass_ctx *pc, const char *name, double ms) {
  for (ptrdiff_t i = 0; i < arrlen(pc->times); i++)
    if (pc->times[i].name == name || strcmp(pc->times[i].name, name) == 0) {
      pc->times[i].ms += ms;
      pc->times[i].runs++;
      return;
    }
  hj_pass_time_t t = { name, ms, 1 };
  arrput(pc->times, t);
}

void hlo_pass_ctx_free(hlo_pass_ctx *pc) {
  arrfree(pc->times);
  pc->times = NULL;
}

void hlo_pass_ctx_init(hlo_pass_ctx *pc, hj_ctx_t *ctx) {
  memset(pc, 0, sizeof *pc);
  pc->ctx = ctx;
  const char *d = ctx ? ctx->opt.dump_dir : NULL;
  if (!d || !*d) d = getenv("HLOJIT_DUMP_TO");
  pc->dump_dir = d && *d ? d : NULL;
}

/* mkdir -p |dir| (the last component included). */
static bool pas_mkdirs(const char *dir) {
  char buf[4096];
  size_t n = strlen(dir);
  if (n == 0 || n >= sizeof buf) return false;
  memcpy(buf, dir, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (buf[i] != '/' && buf[i] != 0) continue;
    char c = buf[i];
    buf[i] = 0;
    if (mkdir(buf, 0777) != 0 && errno != EEXIST) return false;
    buf[i] = c;
  }
  return true;
}

hj_status hlo_pass_dump(hlo_pass_ctx *pc, const char *name, const hlo_module *m) {
  if (!pc->dump_dir || !pc->print) return HJ_OK;
  int seq = pc->dump_seq++;
  if (!pas_mkdirs(pc->dump_dir))
    return hj__err(pc->ctx, HJ_ERR_IO, "dump after pass '%s': cannot create directory '%s'",
                   name, pc->dump_dir);
  char path[4200];
  snprintf(path, sizeof path, "%s/%03d.%s.txt", pc->dump_dir, seq, name);
  char *text = NULL;
  hj_status st = pc->print(m, &text);
  if (st != HJ_OK) return st;
  FILE *f = fopen(path, "wb");
  if (!f) {
    free(text);
    return hj__err(pc->ctx, HJ_ERR_IO, "dump after pass '%s': cannot write '%s'", name, path);
  }
  size_t len = strlen(text);
  bool ok = fwrite(text, 1, len, f) == len;
  ok &= fclose(f) == 0;
  free(text);
  return ok ? HJ_OK : hj__err(pc->ctx, HJ_ERR_IO, "dump after pass '%s': short write to '%s'",
                              name, path);
}

hj_status hlo_pass_run(hlo_pass_ctx *pc, const char *name, hlo_pass_fn fn, hlo_module *m,
                       bool *changed) {
  bool ch = false;
  double t0 = pas_now_ms();
  hj_status st = fn(pc, m, &ch);
  if (changed) *changed = ch;
  if (st != HJ_OK) return st;
  bool verify = pc->verify_each;
#ifndef NDEBUG
  verify = ch;   /* a pass that changed nothing left the module as the last check saw it */
#endif
  double t1 = pas_now_ms();
  if (pc->time_passes) pas_time(pc, name, t1 - t0);
  if (verify) st = hlo_verify_module(m);
  if (verify && pc->time_passes) pas_time(pc, "verify-after-each-pass", pas_now_ms() - t1);
  if (st == HJ_ERR_OOM) return st;   /* the verifier ran out of memory: no bug in the pass */
  if (st != HJ_OK) {
    char msg[HJ__ERR_MAX];
    snprintf(msg, sizeof msg, "%s", m->ctx ? hj__ctx_err(m->ctx) : "");
    hj__err(m->ctx, HJ_ERR_INTERNAL, "after pass '%s': %s", name, msg);
    hlo_pass_dump(pc, name, m);        /* the broken module, for the bug report */
    return HJ_ERR_INTERNAL;
  }
  return hlo_pass_dump(pc, name, m);
}
