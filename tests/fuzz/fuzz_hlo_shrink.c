/* fuzz_hlo_shrink.c — failing inputs as files, and the shrinker.

   Files: the module text after two `//` lines (the HLO parser skips comments):
     // fuzz_hlo: KIND: detail
     // fuzz_hlo: well_typed=1 exact=0,1,2
   fz_load reads the second line back so that a regression file is checked at the levels
   it was generated with.

   Shrinking works on the text alone, so the parent never parses an input that may crash
   the parser; each candidate runs in a forked child (with the --timeout alarm) and is kept
   when it fails with the same kind. Candidates, tried until none helps (at most 400 runs):
     - the root tuple cut down to one of its elements;
     - an entry instruction replaced by a parameter of its declared shape (its operands may
       then become dead);
     - a line whose value nothing uses deleted (entry parameters are then renumbered);
     - a computation nothing calls deleted.
   Example: `v7 = f32[3] tanh(v2)` becomes `v7 = f32[3] parameter(4)`; when nothing else
   reads v2 afterwards, its line goes too. */
#include "fuzz_hlo_driver.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#define FZ_EXIT_BASE 64

void fz_save(const char *path, const fhg_module *gm, fz_kind k, const char *detail) {
  FILE *f = fopen(path, "w");
  if (!f) return;
  fprintf(f, "// fuzz_hlo: %s: ", fz_kind_name[k]);
  for (const char *p = detail; *p && p - detail < 400; p++) fputc(*p == '\n' ? ' ' : *p, f);
  fprintf(f, "\n// fuzz_hlo: well_typed=%d exact=", gm->well_typed);
  for (int i = 0; i < gm->nout; i++) fprintf(f, "%s%d", i ? "," : "", gm->exact[i]);
  fprintf(f, "\n%s", gm->text);
  fclose(f);
}

int fz_load(const char *path, fhg_module *gm) {
  memset(gm, 0, sizeof *gm);
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  gm->text = malloc((size_t)n + 1);
  if (!gm->text || fread(gm->text, 1, (size_t)n, f) != (size_t)n) {
    fclose(f);
    free(gm->text);
    gm->text = NULL;
    return -1;
  }
  fclose(f);
  gm->text[n] = 0;
  const char *h = strstr(gm->text, "// fuzz_hlo: well_typed=");
  if (h) {
    gm->well_typed = h[24] == '1';
    const char *e = strstr(h, "exact=");
    for (e = e ? e + 6 : NULL; e && *e >= '0' && *e <= '2' && gm->nout < FHG_MAX_OUT; e++) {
      gm->exact[gm->nout++] = *e - '0';
      if (*++e != ',') break;
    }
  }
  gm->has_while = strstr(gm->text, " while(") != NULL;
  return 0;
}

/* ---- text surgery ----------------------------------------------------------------------- */

typedef struct { char **l; int n; } fz_lines;

static fz_lines fz_split(const char *t) {
  fz_lines L = { 0 };
  for (const char *p = t; *p;) {
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    L.l = realloc(L.l, sizeof *L.l * (size_t)(L.n + 1));
    L.l[L.n] = strndup(p, len);
    L.n++;
    p += len + (e ? 1 : 0);
  }
  return L;
}

static char *fz_join(const fz_lines *L) {
  size_t n = 1;
  for (int i = 0; i < L->n; i++) if (L->l[i]) n += strlen(L->l[i]) + 1;
  char *t = malloc(n), *p = t;
  for (int i = 0; i < L->n; i++)
    if (L->l[i]) p += sprintf(p, "%s\n", L->l[i]);
  *p = 0;
  return t;
}

static void fz_lines_free(fz_lines *L) {
  for (int i = 0; i < L->n; i++) free(L->l[i]);
  free(L->l);
}

/* The name an instruction line defines ("  [ROOT ]name = ..."), into |buf|. */
static bool fz_defname(const char *line, char *buf, size_t n) {
  const char *p = line;
  while (*p == ' ') p++;
  if (!strncmp(p, "ROOT ", 5)) p += 5;
  const char *eq = strstr(p, " = ");
  if (!eq || eq - p >= (long)n || eq == p) return false;
  memcpy(buf, p, (size_t)(eq - p));
  buf[eq - p] = 0;
  return strspn(buf, "abcdefghijklmnopqrstuvwxyz0123456789_.") == strlen(buf);
}

static bool fz_ident(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.'; }

/* |name| occurs as a whole word in a line other than |skip|. */
static bool fz_used(const fz_lines *L, int skip, const char *name) {
  size_t n = strlen(name);
  for (int i = 0; i < L->n; i++) {
    if (i == skip || !L->l[i] || !strncmp(L->l[i], "//", 2)) continue;
    for (const char *p = L->l[i]; (p = strstr(p, name)); p += n)
      if ((p == L->l[i] || !fz_ident(p[-1])) && !fz_ident(p[n])) {
        const char *eq = strstr(L->l[i], " = ");
        if (!eq || p > eq) return true;   /* a use, not the definition */
      }
  }
  return false;
}

static int fz_entry_line(const fz_lines *L) {
  for (int i = 0; i < L->n; i++) if (L->l[i] && !strncmp(L->l[i], "ENTRY ", 6)) return i;
  return -1;
}

/* Entry parameters numbered 0, 1, ... in order. */
static void fz_renumber(fz_lines *L) {
  int e = fz_entry_line(L), k = 0;
  for (int i = e + 1; e >= 0 && i < L->n && (!L->l[i] || L->l[i][0] != '}'); i++) {
    char *p = L->l[i] ? strstr(L->l[i], " parameter(") : NULL;
    if (!p) continue;
    char *q = strchr(p, ')');
    if (!q) continue;
    char head[4096];
    snprintf(head, sizeof head, "%.*s parameter(%d)%s", (int)(p - L->l[i]), L->l[i], k++, q + 1);
    free(L->l[i]);
    L->l[i] = strdup(head);
  }
}

/* ---- candidates and the loop ---------------------------------------------------------------- */

static fz_kind fz_try(const fz_opts *o, const fhg_module *gm, uint64_t seed) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    /* the child: its stderr would repeat the sanitizer report for every candidate */
    if (!o->verbose) { FILE *nul = freopen("/dev/null", "w", stderr); (void)nul; }
    fz_stage_ctx sc;
    if (fz_stage_init(&sc, o->cpu) != 0) _exit(100);
    alarm((unsigned)o->timeout);
    fz_result r = fz_check(&sc, gm, seed);
    _exit(FZ_EXIT_BASE + (int)r.kind);
  }
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) < 0) return FZ_OK;
  if (WIFSIGNALED(st)) return WTERMSIG(st) == SIGALRM ? FZ_D_TIMEOUT : FZ_D_CRASH;
  int code = WEXITSTATUS(st) - FZ_EXIT_BASE;   /* ASan and UBSan exit with small codes */
  return code >= 0 && code < FZ_KIND_COUNT ? (fz_kind)code : FZ_D_CRASH;
}

/* Candidate |c| of text |t| into *out (malloc'd); false when there is no candidate |c|. */
static bool fz_candidate(const fhg_module *gm, int c, fhg_module *out) {
  fz_lines L = fz_split(gm->text);
  int e = fz_entry_line(&L), end = e;
  while (e >= 0 && end + 1 < L.n && L.l[end + 1][0] != '}') end++;
  bool made = false;
  *out = *gm;
  int root = end;   /* the ROOT line is the entry's last */
  if (e < 0) goto done;
  if (c < gm->nout && gm->nout > 1) {   /* root tuple -> element c */
    char *open = strchr(L.l[root], '('), *tup = strstr(L.l[root], ") tuple(");
    if (!open || !tup) goto done;
    char shapes[FHG_MAX_OUT][256], names[FHG_MAX_OUT][64];
    int ns = 0, depth = 0;
    const char *s = open + 1;
    for (const char *p = s; p <= tup; p++) {
      if (*p == '[' || *p == '{' || *p == '(') depth++;
      if (*p == ']' || *p == '}') depth--;
      if ((p == tup || (*p == ',' && depth == 0)) && ns < FHG_MAX_OUT) {
        snprintf(shapes[ns++], 256, "%.*s", (int)(p - s), s);
        s = p + 2;
      }
    }
    int nn = 0;
    for (char *q = strtok(tup + 8, ", )"); q && nn < FHG_MAX_OUT; q = strtok(NULL, ", )")) snprintf(names[nn++], 64, "%s", q);
    if (ns != gm->nout || nn != gm->nout) goto done;
    char line[512];
    snprintf(line, sizeof line, "  ROOT out = (%s) tuple(%s)", shapes[c], names[c]);
    free(L.l[root]);
    L.l[root] = strdup(line);
    out->nout = 1;
    out->exact[0] = gm->exact[c];
    made = true;
    goto done;
  }
  c -= gm->nout > 1 ? gm->nout : 0;
  int nent = end - e - 1;   /* entry lines before the root */
  if (c < nent) {   /* instruction -> parameter */
    int i = e + 1 + c;
    char *eq = strstr(L.l[i], " = ");
    if (!eq || strstr(L.l[i], " parameter(")) goto done;
    char *sp = strchr(eq + 3, ' ');
    if (!sp || eq[3] == '(') goto done;   /* keep tuple-shaped ones */
    char line[512];
    snprintf(line, sizeof line, "%.*s parameter(9999)", (int)(sp - L.l[i]), L.l[i]);
    free(L.l[i]);
    L.l[i] = strdup(line);
    fz_renumber(&L);
    made = true;
    goto done;
  }
  c -= nent;
  if (c < nent) {   /* unused line deleted */
    int i = e + 1 + c;
    char name[128];
    if (!fz_defname(L.l[i], name, sizeof name) || fz_used(&L, i, name)) goto done;
    free(L.l[i]);
    L.l[i] = NULL;
    fz_renumber(&L);
    made = true;
    goto done;
  }
  c -= nent;
  for (int i = 0, k = 0; i < e; i++) {   /* uncalled computation deleted */
    if (!L.l[i] || L.l[i][0] != 'c' || !strstr(L.l[i], " {")) continue;
    if (k++ != c) continue;
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)(strchr(L.l[i], ' ') - L.l[i]), L.l[i]);
    if (fz_used(&L, i, name)) goto done;
    int j = i;
    while (j < e && L.l[j] && L.l[j][0] != '}') free(L.l[j]), L.l[j++] = NULL;
    if (j < e) free(L.l[j]), L.l[j] = NULL;
    made = true;
    break;
  }
done:
  if (made) out->text = fz_join(&L);
  fz_lines_free(&L);
  return made;
}

void fz_shrink_and_save(const fz_opts *o, const fhg_module *gm, fz_kind k, uint64_t seed) {
  fhg_module cur = *gm;
  cur.text = strdup(gm->text);
  int runs = 0;
  for (bool progress = true; progress && runs < 400;) {
    progress = false;
    for (int c = 0; runs < 400; c++) {
      fhg_module cand;
      if (!fz_candidate(&cur, c, &cand)) {
        if (c > 4 * 512) break;   /* past every line */
        continue;
      }
      runs++;
      if (fz_try(o, &cand, seed) == k) {
        free(cur.text);
        cur = cand;
        progress = true;
        c = -1;   /* start over on the smaller text */
      } else {
        free(cand.text);
      }
    }
  }
  char path[4200];
  snprintf(path, sizeof path, "%s/%s-%llu.min.hlo", o->save, fz_kind_name[k], (unsigned long long)seed);
  fz_save(path, &cur, k, "shrunk");
  fprintf(stderr, "fuzz_hlo: seed %llu shrunk in %d runs (%zu -> %zu bytes): %s\n", (unsigned long long)seed,
          runs, strlen(gm->text), strlen(cur.text), path);
  free(cur.text);
}
