/* api/exec_profile.c — what an executable says about itself: its compile statistics
   (hj_exec_stats) and its run-time profiles (hlojit.h: hj_exec_profile,
   hj_exec_profile_text, hj_exec_set_profiling, hj_exec_profile_reset).

   A backend with the profile slots (backend.h; the CPU backend: runtime/profile.c) gives
   one entry per thunk; any other gives one "module" entry, the wall time of whole runs,
   which exec.c measures for every run anyway. Entries are sorted by total time, largest
   first (qsort is not stable: ties broken by instruction name, so reports are
   reproducible).

   The text report, one line per thunk that ran:
       ms/run  share  calls/run  GB/s  GFLOP/s  kind  instruction [kernel]
   share = the entry's time over the sum of the depth-0 entries (nested entries are inside
   their while/conditional's time, so their shares do not add up with it); GB/s and
   GFLOP/s = the entry's bytes and FLOPs per call times its calls over its time. Then the
   run count and wall time, and where the compile time went. */
#include "api.h"
#include "../backend.h"
#include <stdatomic.h>
#include <stdlib.h>

hj_status hj_exec_stats(const hj_exec_t *e, hj_exec_stats_t *out) {
  if (!e || !out) return HJ_ERR_INVALID_ARG;
  memset(out, 0, sizeof *out);
  if (e->be->stats) e->be->stats(e->x, out);
  out->backend = e->be->kind;
  out->compile_ms = e->compile_ms;
  out->note = e->note;
  return HJ_OK;
}

hj_status hj_exec_set_profiling(hj_exec_t *e, bool on) {
  if (!e) return HJ_ERR_INVALID_ARG;
  e->profiling = on;
  if (e->be && e->be->set_profiling) e->be->set_profiling(e->x, on);
  return HJ_OK;
}

static int epr_cmp(const void *a, const void *b) {
  const hj_profile_entry_t *x = a, *y = b;
  if (x->ms != y->ms) return x->ms < y->ms ? 1 : -1;
  return strcmp(x->instr, y->instr);
}

hj_status hj_exec_profile(const hj_exec_t *e, hj_profile_entry_t **entries, int *n, int64_t *runs,
                          double *run_ms) {
  if (!e || !entries || !n) return HJ_ERR_INVALID_ARG;
  *entries = NULL;
  *n = 0;
  int64_t r = atomic_load(&e->runs);
  double wall = (double)atomic_load(&e->run_ns) / 1e6;
  if (runs) *runs = r;
  if (run_ms) *run_ms = wall;
  hj_profile_entry_t *v = NULL;
  hj_status st = HJ_OK;
  if (e->be->profile) {
    st = e->be->profile(e->x, &v);
  } else {
    hj_profile_entry_t one = { .instr = e->m->name, .kernel = "", .kind = "module", .calls = r, .ms = wall };
    arrput(v, one);
  }
  size_t cnt = (size_t)arrlen(v);
  hj_profile_entry_t *out = st == HJ_OK ? malloc(sizeof *out * (cnt + 1)) : NULL;
  if (st == HJ_OK && !out) st = hj__err(e->ctx, HJ_ERR_OOM, "hj_exec_profile: out of memory");
  if (out) {
    if (cnt) memcpy(out, v, sizeof *out * cnt);
    qsort(out, cnt, sizeof *out, epr_cmp);
    *entries = out;
    *n = (int)cnt;
  }
  arrfree(v);
  return st;
}

void hj_exec_profile_reset(hj_exec_t *e) {
  if (!e) return;
  atomic_store(&e->runs, 0);
  atomic_store(&e->run_ns, 0);
  if (e->be && e->be->profile_reset) e->be->profile_reset(e->x);
}

/* "12.3 MB" / "4.0 kB" / "12 B" into |buf|. */
static const char *epr_bytes(double v, char *buf, size_t n) {
  const char *u[] = { "B", "kB", "MB", "GB", "TB" };
  int k = 0;
  while (v >= 1000 && k < 4) v /= 1000, k++;
  snprintf(buf, n, k ? "%.1f %s" : "%.0f %s", v, u[k]);
  return buf;
}

hj_status hj_exec_profile_text(const hj_exec_t *e, char **text) {
  if (!text) return HJ_ERR_INVALID_ARG;
  *text = NULL;
  if (!e) return HJ_ERR_INVALID_ARG;
  hj_profile_entry_t *v;
  int n;
  int64_t runs;
  double wall;
  hj_status st = hj_exec_profile(e, &v, &n, &runs, &wall);
  if (st != HJ_OK) return st;
  double top = 0, rr = runs > 0 ? (double)runs : 1;
  for (int i = 0; i < n; i++) top += v[i].depth == 0 ? v[i].ms : 0;
  char *sb = NULL;
  sb_printf(&sb, "profile of '%s' (%s backend): %lld runs, %.3f ms per run (wall), %.3f ms per run in "
            "thunks%s\n", e->m->name, e->be->name, (long long)runs, wall / rr, top / rr,
            e->profiling || !e->be->profile ? "" : " (profiling is off: hj_exec_set_profiling)");
  sb_printf(&sb, "  %9s %6s %9s %8s %8s %10s %10s  %-9s %s\n", "ms/run", "share", "calls/run", "GB/s",
            "GFLOP/s", "bytes", "flops", "kind", "instruction [kernel]");
  for (int i = 0; i < n; i++) {
    const hj_profile_entry_t *p = &v[i];
    if (p->calls == 0) continue;
    double s = p->ms / 1e3, moved = (double)p->bytes * (double)p->calls, fl = (double)p->flops * (double)p->calls;
    char b0[32], b1[32];
    epr_bytes((double)p->bytes, b0, sizeof b0);
    snprintf(b1, sizeof b1, "%.3g", (double)p->flops);
    sb_printf(&sb, "  %9.4f %5.1f%% %9.2f %8.2f %8.2f %10s %10s  %-9s %*s%s%s%s%s\n", p->ms / rr,
              top > 0 ? 100 * p->ms / top : 0, (double)p->calls / rr, s > 0 ? moved / s / 1e9 : 0,
              s > 0 ? fl / s / 1e9 : 0, b0, p->flops ? b1 : "-", p->kind, 2 * p->depth, "", p->instr,
              *p->kernel ? " [" : "", p->kernel, *p->kernel ? "]" : "");
  }
  hj_exec_stats_t es;
  if (hj_exec_stats(e, &es) == HJ_OK) {
    sb_printf(&sb, "compile: %.2f ms (clone, passes, buffer assignment and thunks %.2f; LLVM IR %.2f; "
              "LLVM O3 %.2f; machine code %.2f)\n", es.compile_ms, es.passes_ms, es.emit_ms, es.optimize_ms,
              es.codegen_ms);
    for (int i = 0; i < es.npass_times; i++)   /* pipeline order */
      sb_printf(&sb, "  pass %-26s %9.2f ms %4d runs\n", es.pass_times[i].name, es.pass_times[i].ms,
                es.pass_times[i].runs);
  }
  free(v);
  size_t len = sb ? strlen(sb) : 0;
  char *s = malloc(len + 1);
  if (s) {
    if (len) memcpy(s, sb, len);
    s[len] = 0;
  }
  arrfree(sb);
  if (!s) return hj__err(e->ctx, HJ_ERR_OOM, "hj_exec_profile_text: out of memory");
  *text = s;
  return HJ_OK;
}
