/* fusion_fuzz_gen.h — the random HLO graph generator of test_fusion_fuzz.c (issue 4):
   fz_module(seed) writes one module as HLO text; fz_sinks_to_root makes its unused values
   outputs. Include after testutil.h and fusion_testutil.h.

   Generator: a pool of values (name, f32/pred, dims from {1,2,3,4,5,8}, or in 1 graph in
   8 from {1,3,16,17,33,40}: transposes big enough for the transpose kernels, rank <= 3) that
   starts with 1-2 parameters; each op picks operands from the pool and, when no value of
   the needed dims exists, makes one: a broadcast of a lower-rank value or a scalar
   constant, or a new parameter. The root is a tuple of the last 1-3 values.

   Panel-order dots: 1 graph in 16 (a PRNG stream of its own picks them, so the other
   graphs are the ones made before) has the dot hj_linear(x, w, b, HJ_LINEAR_PANELS)
   writes, w [P,Q,kc,nr] with the CPU's nr (read in place; M = 1: the gemv) or, 1 in 4,
   another (dot_canon makes it a plain dot), and its result goes on into the pool
   (fz_panel_dot). (a)-(b) see it as the CPU keeps it; (c) canonicalises with nr 0 (the
   GPU's: every panel dot a plain one, same bits); (d) compiles it as the CPU does. The f64
   probes treat it as any dot (P*kc terms); its weights get few IEEE specials
   (ftu_few_specials) so that most outputs are finite. Made on purpose (2 threads, nr 48),
   a wrong panel base in the gemv (gemvp's group's first panel for all) failed 3 of the
   1,000 graphs, a wrong K-step offset of B in cpu_matmul.c's panel path 11.

   Cache updates: 1 graph in 8 (a stream of its own too) has one or two dynamic-update-
   slices of a pool value into caches (fz_cache_updates): fusion into the update, sibling
   fusion of updates and the dus emitters, in place or not. In 1,000 graphs: 81 dus
   kernels, 78 outputs written in place, 51 fusions holding two or more updates (x is
   mostly made >= 256 bytes: smaller, sibling fusion never merged two updates).

   Windowed ops: 1 graph in 8 (a fourth stream) has a convolution (with a bias-relu
   epilogue half the time), a max pool or a max pool's gradient on an NHWC parameter
   (fz_window_op), whose result goes on into the pool. */
#ifndef HLOJIT_FUSION_FUZZ_GEN_H
#define HLOJIT_FUSION_FUZZ_GEN_H

typedef struct fz_val { int rank; int64_t dims[4]; bool pred; } fz_val;

typedef struct fz_gen {
  uint64_t s;
  char *sb;                 /* entry body */
  fz_val *vals;             /* stb_ds: value k is named vK */
  int nparams;
  int panel_at;             /* the panel dot comes once the pool holds np + panel_at values; -1: none */
  int cache_at;             /* the cache updates likewise (fz_cache_updates) */
  int window_at;            /* the windowed op likewise (fz_window_op) */
  int nstarts;              /* s32 start constants made: tK */
  bool wide;                /* dims from {1,3,16,17,33,40} instead of {1,2,3,4,5,8} */
} fz_gen;

/* The CPU backend's panel width (hj_linear_panels' nr; emit_target.matmul_panel_nr), set
   by main: the width a panel-order dot needs to be read in place. 0: the CPU has none. */
static int64_t fz_panel_nr;

static uint64_t fz_rand(fz_gen *g) {
  g->s ^= g->s << 13;
  g->s ^= g->s >> 7;
  g->s ^= g->s << 17;
  return g->s;
}
static int fz_r(fz_gen *g, int n) { return (int)(fz_rand(g) % (uint64_t)n); }

static void fz_shape(char *buf, size_t n, const fz_val *v) {
  int k = snprintf(buf, n, "%s[", v->pred ? "pred" : "f32");
  for (int i = 0; i < v->rank; i++) k += snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)v->dims[i]);
  snprintf(buf + k, n - k, "]");
}

static bool fz_same_dims(const fz_val *a, const fz_val *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

/* Appends "vK = SHAPE " and returns K; the caller writes the rest of the line. */
static int fz_def(fz_gen *g, fz_val v) {
  char s[64];
  fz_shape(s, sizeof s, &v);
  int k = (int)arrlen(g->vals);
  arrput(g->vals, v);
  sb_printf(&g->sb, "  v%d = %s ", k, s);
  return k;
}

static int fz_param(fz_gen *g, fz_val v) {
  int k = fz_def(g, v);
  sb_printf(&g->sb, "parameter(%d)\n", g->nparams++);
  return k;
}

static fz_val fz_random_val(fz_gen *g) {
  static const int64_t sizes[] = { 1, 2, 3, 4, 5, 8 }, wide[] = { 1, 3, 16, 17, 33, 40 };
  fz_val v = { .rank = 1 + fz_r(g, 3) };
  for (int i = 0; i < v.rank; i++) v.dims[i] = (g->wide ? wide : sizes)[fz_r(g, 6)];
  return v;
}

static int fz_pick_f32(fz_gen *g) {
  for (int tries = 0; tries < 16; tries++) {
    int n = (int)arrlen(g->vals);
    int k = fz_r(g, 2) ? n - 1 - fz_r(g, n < 4 ? n : 4) : fz_r(g, n);   /* recent values first */
    if (!g->vals[k].pred && g->vals[k].rank > 0 && g->vals[k].rank <= 3) return k;   /* not a panel w */
  }
  return fz_param(g, fz_random_val(g));
}

/* A value with exactly |want|'s dims (f32 or pred), made if needed. */
static int fz_get(fz_gen *g, const fz_val *want) {
  int n = (int)arrlen(g->vals), start = fz_r(g, n > 0 ? n : 1);
  if (fz_r(g, 4)) {
    for (int i = 0; i < n; i++) {
      int k = (start + i) % n;
      if (g->vals[k].pred == want->pred && fz_same_dims(&g->vals[k], want)) return k;
    }
  }
  if (want->pred || fz_r(g, 3) == 0) return fz_param(g, *want);
  /* broadcast of a value whose dims are a subsequence of want's, or of a constant */
  for (int i = 0; i < n && fz_r(g, 3); i++) {
    int k = (start + i) % n;
    const fz_val *v = &g->vals[k];
    if (v->pred || v->rank >= want->rank) continue;
    int map[4], j = 0;
    for (int d = 0; d < want->rank && j < v->rank; d++)
      if (want->dims[d] == v->dims[j]) map[j++] = d;
    if (j < v->rank) continue;
    int r = fz_def(g, *want);
    sb_printf(&g->sb, "broadcast(v%d), dimensions={", k);
    for (int q = 0; q < j; q++) sb_printf(&g->sb, "%s%d", q ? "," : "", map[q]);
    sb_printf(&g->sb, "}\n");
    return r;
  }
  static const char *cs[] = { "0", "1", "-1", "0.5", "2", "-0", "3" };
  fz_val sc = { .rank = 0 };
  int c = fz_def(g, sc);
  sb_printf(&g->sb, "constant(%s)\n", cs[fz_r(g, 7)]);
  int r = fz_def(g, *want);
  sb_printf(&g->sb, "broadcast(v%d), dimensions={}\n", c);
  return r;
}

/* One op on |a| (< 0: a value picked from the pool). */
static void fz_op(fz_gen *g, int a) {
  static const char *un[] = { "negate", "abs", "exponential", "tanh", "log", "sqrt", "sine",
                              "floor", "logistic", "rsqrt", "cosine", "sign" };
  static const char *bin[] = { "add", "subtract", "multiply", "divide", "maximum", "minimum",
                               "power", "add", "multiply" };
  static const char *dirs[] = { "LT", "GT", "EQ", "NE", "GE", "LE" };
  if (a < 0) a = fz_pick_f32(g);
  fz_val va = g->vals[a];
  switch (fz_r(g, 12)) {
  case 11: {          /* row normalisation: a - broadcast(reduce(a) over trailing dims) */
    int nd = 1 + fz_r(g, va.rank), kept = va.rank - nd;
    bool mx = fz_r(g, 2);
    fz_val sc = { .rank = 0 }, vr = { .rank = kept };
    for (int i = 0; i < kept; i++) vr.dims[i] = va.dims[i];
    int z = fz_def(g, sc);
    sb_printf(&g->sb, "constant(%s)\n", mx ? "-inf" : "0");
    int r = fz_def(g, vr);
    sb_printf(&g->sb, "reduce(v%d, v%d), dimensions={", a, z);
    for (int i = kept; i < va.rank; i++) sb_printf(&g->sb, "%s%d", i > kept ? "," : "", i);
    sb_printf(&g->sb, "}, to_apply=%s\n", mx ? "fz_max" : "fz_sum");
    int b = fz_def(g, va);
    sb_printf(&g->sb, "broadcast(v%d), dimensions={", r);
    for (int i = 0; i < kept; i++) sb_printf(&g->sb, "%s%d", i ? "," : "", i);
    sb_printf(&g->sb, "}\n");
    fz_def(g, va);
    sb_printf(&g->sb, "%s(v%d, v%d)\n", fz_r(g, 2) ? "subtract" : "divide", a, b);
    break;
  }
  case 0: case 1: {   /* unary */
    int r = fz_def(g, va);
    sb_printf(&g->sb, "%s(v%d)\n", un[fz_r(g, 12)], a);
    (void)r;
    break;
  }
  case 2: case 3: {   /* binary */
    int b = fz_get(g, &va);
    fz_def(g, va);
    sb_printf(&g->sb, "%s(v%d, v%d)\n", bin[fz_r(g, 9)], a, b);
    break;
  }
  case 4: {           /* compare + select */
    int b = fz_get(g, &va), c = fz_get(g, &va);
    fz_val vp = va;
    vp.pred = true;
    int p = fz_def(g, vp);
    sb_printf(&g->sb, "compare(v%d, v%d), direction=%s\n", a, b, dirs[fz_r(g, 6)]);
    fz_def(g, va);
    sb_printf(&g->sb, "select(v%d, v%d, v%d)\n", p, b, c);
    break;
  }
  case 5: {           /* broadcast: one new dim */
    if (va.rank >= 3) break;
    fz_val v = va;
    int at = fz_r(g, va.rank + 1);
    for (int i = v.rank; i > at; i--) v.dims[i] = v.dims[i - 1];
    v.dims[at] = 2 + fz_r(g, 3);
    v.rank++;
    fz_def(g, v);
    sb_printf(&g->sb, "broadcast(v%d), dimensions={", a);
    for (int i = 0, j = 0; i < v.rank; i++)
      if (i != at) sb_printf(&g->sb, "%s%d", j++ ? "," : "", i);
    sb_printf(&g->sb, "}\n");
    break;
  }
  case 6: {           /* reduce over a non-empty subset of dims */
    int mask = 1 + fz_r(g, (1 << va.rank) - 1);
    fz_val v = { .rank = 0 };
    for (int i = 0; i < va.rank; i++)
      if (!(mask & (1 << i))) v.dims[v.rank++] = va.dims[i];
    bool mx = fz_r(g, 2);
    fz_val sc = { .rank = 0 };
    int z = fz_def(g, sc);
    sb_printf(&g->sb, "constant(%s)\n", mx ? "-inf" : "0");
    fz_def(g, v);
    sb_printf(&g->sb, "reduce(v%d, v%d), dimensions={", a, z);
    for (int i = 0, j = 0; i < va.rank; i++)
      if (mask & (1 << i)) sb_printf(&g->sb, "%s%d", j++ ? "," : "", i);
    sb_printf(&g->sb, "}, to_apply=%s\n", mx ? "fz_max" : "fz_sum");
    break;
  }
  case 7: {           /* dot: [M,K]x[K,N], [M,K]x[N,K] or [B,M,K]x[B,K,N] */
    if (va.rank < 2) break;
    int64_t n = 1 + fz_r(g, 5);
    if (va.rank == 2) {
      bool tr = fz_r(g, 2);
      fz_val vb = { .rank = 2, .dims = { tr ? n : va.dims[1], tr ? va.dims[1] : n } };
      int b = fz_get(g, &vb);
      fz_val v = { .rank = 2, .dims = { va.dims[0], n } };
      fz_def(g, v);
      sb_printf(&g->sb, "dot(v%d, v%d), lhs_contracting_dims={1}, rhs_contracting_dims={%d}\n",
                a, b, tr ? 1 : 0);
    } else {
      fz_val vb = { .rank = 3, .dims = { va.dims[0], va.dims[2], n } };
      int b = fz_get(g, &vb);
      fz_val v = { .rank = 3, .dims = { va.dims[0], va.dims[1], n } };
      fz_def(g, v);
      sb_printf(&g->sb, "dot(v%d, v%d), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
                "rhs_batch_dims={0}, rhs_contracting_dims={1}\n", a, b);
    }
    break;
  }
  case 8: {           /* transpose */
    if (va.rank < 2) break;
    int perm[3] = { 0, 1, 2 };
    for (int i = va.rank - 1; i > 0; i--) {
      int j = fz_r(g, i + 1), t = perm[i];
      perm[i] = perm[j];
      perm[j] = t;
    }
    fz_val v = va;
    for (int i = 0; i < va.rank; i++) v.dims[i] = va.dims[perm[i]];
    fz_def(g, v);
    sb_printf(&g->sb, "transpose(v%d), dimensions={", a);
    for (int i = 0; i < va.rank; i++) sb_printf(&g->sb, "%s%d", i ? "," : "", perm[i]);
    sb_printf(&g->sb, "}\n");
    break;
  }
  case 9: {           /* slice */
    fz_val v = va;
    int64_t lo[4], hi[4], st[4];
    for (int i = 0; i < va.rank; i++) {
      lo[i] = fz_r(g, (int)va.dims[i]);
      hi[i] = lo[i] + 1 + fz_r(g, (int)(va.dims[i] - lo[i]));
      st[i] = 1 + fz_r(g, 2);
      v.dims[i] = (hi[i] - lo[i] + st[i] - 1) / st[i];
    }
    fz_def(g, v);
    sb_printf(&g->sb, "slice(v%d), slice={", a);
    for (int i = 0; i < va.rank; i++)
      sb_printf(&g->sb, "%s[%lld:%lld:%lld]", i ? ", " : "", (long long)lo[i], (long long)hi[i],
                (long long)st[i]);
    sb_printf(&g->sb, "}\n");
    break;
  }
  default: {          /* concatenate with a value of the same dims, or reshape */
    if (fz_r(g, 2) && va.rank >= 2) {
      fz_val v = va;
      v.rank--;
      v.dims[v.rank - 1] = va.dims[va.rank - 2] * va.dims[va.rank - 1];
      fz_def(g, v);
      sb_printf(&g->sb, "reshape(v%d)\n", a);
      break;
    }
    int b = fz_get(g, &va), d = fz_r(g, va.rank);
    fz_val v = va;
    v.dims[d] *= 2;
    fz_def(g, v);
    sb_printf(&g->sb, "concatenate(v%d, v%d), dimensions={%d}\n", a, b, d);
    break;
  }
  }
}

/* A panel-order dot as hj_linear(x, w, b, HJ_LINEAR_PANELS) writes it (api/composites.c):
     vL = f32[M,P,kc] reshape(x)            x: a pool value of M*P*kc elements (half the
                                            time select(is-finite(x), x, 0) instead)
     vW = f32[P,Q,kc,nr] parameter(k)       (1 in 4: negate(parameter(k)))
     vD = f32[M,Q,nr] dot(vL, vW), lhs_contracting_dims={1,2}, rhs_contracting_dims={0,2}
     vY = f32[M,N] reshape(vD)              N = Q*nr (3 in 4; else consumers take vD)
     vZ = f32[M,N] add(vY, broadcast(bias f32[N]), dimensions={1})   (1 in 2)
   then, 3 times in 4, one op on the result (the matmul fusion's epilogue). M in {1,2,3,5,8},
   P in {1,2,3}, Q in {1,2,3,5}, kc in {4,8,16}; nr fz_panel_nr or, 1 in 4, 4, 8 or 16. */
static void fz_panel_dot(fz_gen *g) {
  static const int64_t Ms[] = { 1, 2, 3, 5, 8 }, kcs[] = { 4, 8, 16 }, others[] = { 4, 8, 16 };
  int64_t M = Ms[fz_r(g, 5)], P = 1 + fz_r(g, 3), kc = kcs[fz_r(g, 3)];
  int n = (int)arrlen(g->vals), start = fz_r(g, n), x = -1;
  for (int i = 0; i < n && x < 0; i++) {   /* a pool value whose size fits some (M, P, kc) */
    const fz_val *v = &g->vals[(start + i) % n];
    if (v->pred || v->rank < 1 || v->rank > 3) continue;
    int64_t numel = 1, fit[45][3];
    int nfit = 0;
    for (int d = 0; d < v->rank; d++) numel *= v->dims[d];
    for (int a = 0; a < 5; a++)
      for (int p = 1; p <= 3; p++)
        for (int c = 0; c < 3; c++)
          if (Ms[a] * p * kcs[c] == numel) fit[nfit][0] = Ms[a], fit[nfit][1] = p, fit[nfit++][2] = kcs[c];
    if (!nfit) continue;
    int f = fz_r(g, nfit);
    M = fit[f][0], P = fit[f][1], kc = fit[f][2], x = (start + i) % n;
  }
  if (x < 0) {
    fz_val vx = { .rank = 2, .dims = { M, P * kc } };
    x = fz_get(g, &vx);
  }
  if (fz_r(g, 2)) {   /* a finite x: one NaN or inf in a row of x makes all that row of y so */
    fz_val vx = g->vals[x], vp = vx, sc = { .rank = 0 };
    vp.pred = true;
    int f = fz_def(g, vp);
    sb_printf(&g->sb, "is-finite(v%d)\n", x);
    int c = fz_def(g, sc);
    sb_printf(&g->sb, "constant(0)\n");
    int z = fz_def(g, vx);
    sb_printf(&g->sb, "broadcast(v%d), dimensions={}\n", c);
    int s = fz_def(g, vx);
    sb_printf(&g->sb, "select(v%d, v%d, v%d)\n", f, x, z);
    x = s;
  }
  static const int64_t Qs[] = { 1, 2, 3, 5 };   /* 5: several panels per thread's part */
  int64_t nr = fz_panel_nr, Q = Qs[fz_r(g, 4)];
  if (!nr || fz_r(g, 4) == 0)
    do nr = others[fz_r(g, 3)]; while (nr == fz_panel_nr);
  fz_val vl = { .rank = 3, .dims = { M, P, kc } }, vw = { .rank = 4, .dims = { P, Q, kc, nr } };
  int l = x;
  if (!fz_same_dims(&g->vals[x], &vl)) {
    l = fz_def(g, vl);
    sb_printf(&g->sb, "reshape(v%d)\n", x);
  }
  int w = fz_param(g, vw);
  if (fz_r(g, 4) == 0) {
    int p = w;
    w = fz_def(g, vw);
    sb_printf(&g->sb, "negate(v%d)\n", p);
  }
  fz_val vd = { .rank = 3, .dims = { M, Q, nr } }, vy = { .rank = 2, .dims = { M, Q * nr } };
  int y = fz_def(g, vd);
  sb_printf(&g->sb, "dot(v%d, v%d), lhs_contracting_dims={1,2}, rhs_contracting_dims={0,2}\n", l, w);
  if (fz_r(g, 4)) {
    int d = y;
    y = fz_def(g, vy);
    sb_printf(&g->sb, "reshape(v%d)\n", d);
    if (fz_r(g, 2)) {
      fz_val vb = { .rank = 1, .dims = { Q * nr } };
      int b = fz_param(g, vb), bb = fz_def(g, vy);
      sb_printf(&g->sb, "broadcast(v%d), dimensions={1}\n", b);
      int z = fz_def(g, vy);
      sb_printf(&g->sb, "add(v%d, v%d)\n", y, bb);
      y = z;
    }
  }
  if (fz_r(g, 4)) fz_op(g, y);
}

/* Cache updates, as a decode step writes its k and v (ir/inplace.c, emitters/dus.c): for a
   pool value x (rank 1-3) and one or, 2 in 3, two caches:
     vC = f32[cache] parameter(k)     x's dims with one dim d times m (m in 2..4);
                                      1 in 2 negate(parameter(k)): an arena value that dies
                                      at the update, which is then written in place
     vU = x, or 1 in 3 negate(x)
     vD = f32[cache] dynamic-update-slice(vC, vU, tK...)   tK = s32[] constant(s): 0 for
                                      the other dims; for d one of 0, 1, the last valid
                                      start, or one past it, -2 and 99 (clamped)
   the updates go into the pool (read later, they cannot be in place; left alone, the
   sinks make them outputs), and two updates of one x may merge as siblings. */
static void fz_cache_updates(fz_gen *g) {
  int x = fz_pick_f32(g);
  int64_t numel = 1;
  for (int i = 0; i < g->vals[x].rank; i++) numel *= g->vals[x].dims[i];
  if (numel < 64 && fz_r(g, 4)) {   /* mostly >= 256 bytes: what sibling fusion merges */
    static const fz_val big[] = { { 2, { 8, 8 } }, { 3, { 4, 2, 8 } }, { 1, { 96 } }, { 3, { 1, 8, 8 } } };
    x = fz_param(g, big[fz_r(g, 4)]);
  }
  fz_val vx = g->vals[x];
  int nc = fz_r(g, 3) ? 2 : 1;
  for (int c = 0; c < nc; c++) {
    int d = fz_r(g, vx.rank);
    int64_t m = 2 + fz_r(g, 3);
    fz_val vc = vx;
    vc.dims[d] *= m;
    int cache = fz_param(g, vc);
    if (fz_r(g, 2)) {
      int p = cache;
      cache = fz_def(g, vc);
      sb_printf(&g->sb, "negate(v%d)\n", p);
    }
    int u = x;
    if (fz_r(g, 3) == 0) {
      u = fz_def(g, vx);
      sb_printf(&g->sb, "negate(v%d)\n", x);
    }
    const int64_t last = vc.dims[d] - vx.dims[d], picks[] = { 0, 1, last, last + 1, -2, 99 };
    int t0 = g->nstarts;
    for (int i = 0; i < vx.rank; i++)
      sb_printf(&g->sb, "  t%d = s32[] constant(%lld)\n", g->nstarts++,
                (long long)(i == d ? picks[fz_r(g, 6)] : 0));
    fz_def(g, vc);
    sb_printf(&g->sb, "dynamic-update-slice(v%d, v%d", cache, u);
    for (int i = 0; i < vx.rank; i++) sb_printf(&g->sb, ", t%d", t0 + i);
    sb_printf(&g->sb, ")\n");
  }
}

/* A windowed op on an NHWC value, then its result reshaped into the pool (rank 3):
     vX = f32[N,H,W,C] parameter(k), 1 in 2 then negate(vX) (a producer to fuse)
     one of: a convolution with a kxk f32[k,k,C,O] kernel (k 1 to 3), stride 1 or 2, pads
             (k-1)/2 and k/2, 1 in 2 then add(broadcast(bias [O])) and maximum(.., 0): the
             im2col dot (conv-lower) with a bias-relu epilogue;
             a max pool (reduce-window with fz_max, window 2 or 3, stride 1 or 2, pads 0_1);
             max-pool's gradient (select-and-scatter, select fz_ge, scatter fz_sum, of a
             source parameter of the pool's output shape): sas-lower's two kernels
     vY = f32[N*Ho, Wo, O] reshape(..)
   N in {1, 2}, H and W 3 to 9, C 1 to 4, O 1 to 5. */
static void fz_window_op(fz_gen *g) {
  fz_val vx = { .rank = 4, .dims = { 1 + fz_r(g, 2), 3 + fz_r(g, 7), 3 + fz_r(g, 7), 1 + fz_r(g, 4) } };
  int x = fz_param(g, vx);
  if (fz_r(g, 2)) {
    int p = x;
    x = fz_def(g, vx);
    sb_printf(&g->sb, "negate(v%d)\n", p);
  }
  int kind = fz_r(g, 3), k = kind == 0 ? 1 + fz_r(g, 3) : 2 + fz_r(g, 2), st = 1 + fz_r(g, 2);
  int lo = kind == 0 ? (k - 1) / 2 : 0, hi = kind == 0 ? k / 2 : 1;
  int64_t ho = (vx.dims[1] + lo + hi - k) / st + 1, wo = (vx.dims[2] + lo + hi - k) / st + 1;
  int64_t o = kind == 0 ? 1 + fz_r(g, 5) : vx.dims[3];
  fz_val vy = { .rank = 4, .dims = { vx.dims[0], ho, wo, o } };
  int y;
  if (kind == 0) {
    fz_val vw = { .rank = 4, .dims = { k, k, vx.dims[3], o } };
    int w = fz_param(g, vw);
    y = fz_def(g, vy);
    sb_printf(&g->sb, "convolution(v%d, v%d), window={size=%dx%d stride=%dx%d pad=%d_%dx%d_%d}, "
              "dim_labels=b01f_01io->b01f\n", x, w, k, k, st, st, lo, hi, lo, hi);
    if (fz_r(g, 2)) {
      fz_val vb = { .rank = 1, .dims = { o } }, sc = { .rank = 0 };
      int b = fz_param(g, vb), bb = fz_def(g, vy);
      sb_printf(&g->sb, "broadcast(v%d), dimensions={3}\n", b);
      int a = fz_def(g, vy);
      sb_printf(&g->sb, "add(v%d, v%d)\n", y, bb);
      int z = fz_def(g, sc);
      sb_printf(&g->sb, "constant(0)\n");
      int zb = fz_def(g, vy);
      sb_printf(&g->sb, "broadcast(v%d), dimensions={}\n", z);
      y = fz_def(g, vy);
      sb_printf(&g->sb, "maximum(v%d, v%d)\n", a, zb);
    }
  } else {
    fz_val sc = { .rank = 0 };
    int z = fz_def(g, sc);
    sb_printf(&g->sb, "constant(%s)\n", kind == 1 ? "-inf" : "0");
    if (kind == 1) {
      y = fz_def(g, vy);
      sb_printf(&g->sb, "reduce-window(v%d, v%d), window={size=1x%dx%dx1 stride=1x%dx%dx1 pad=0_0x%d_%dx%d_%dx0_0}, "
                "to_apply=fz_max\n", x, z, k, k, st, st, lo, hi, lo, hi);
    } else {
      int src = fz_param(g, vy);
      y = fz_def(g, vx);
      sb_printf(&g->sb, "select-and-scatter(v%d, v%d, v%d), window={size=1x%dx%dx1 stride=1x%dx%dx1 "
                "pad=0_0x%d_%dx%d_%dx0_0}, select=fz_ge, scatter=fz_sum\n", x, src, z, k, k, st, st, lo, hi, lo, hi);
      vy = vx;
    }
  }
  fz_val v3 = { .rank = 3, .dims = { vy.dims[0] * vy.dims[1], vy.dims[2], vy.dims[3] } };
  fz_def(g, v3);
  sb_printf(&g->sb, "reshape(v%d)\n", y);
}

/* A random module of seed |seed| (malloc'd text). */
static char *fz_module(uint64_t seed) {
  fz_gen g = { .s = seed * 0x9e3779b97f4a7c15ull + 0x1234567 };
  for (int i = 0; i < 8; i++) fz_rand(&g);
  /* 1 graph in 8 is wide, from a stream of its own (the others keep their graphs): the
     same ops on dims up to 40, where the transpose kernels (both minor dims >= 16) and
     tiles with ragged edges come in */
  uint64_t ws = seed * 0xd6e8feb86659fd93ull + 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < 4; i++) ws ^= ws << 13, ws ^= ws >> 7, ws ^= ws << 17;
  g.wide = ws % 8 == 0;
  int np = 1 + fz_r(&g, 2);
  for (int i = 0; i < np; i++) fz_param(&g, fz_random_val(&g));
  int nops = 1 + fz_r(&g, 30);
  /* 1 graph in 16 has a panel dot, decided by a stream of its own so that the other
     graphs are the ones the generator made before it had panel dots */
  uint64_t ps = seed * 0xbf58476d1ce4e5b9ull + 0x94d049bb133111ebull;
  for (int i = 0; i < 4; i++) ps ^= ps << 13, ps ^= ps >> 7, ps ^= ps << 17;
  g.panel_at = ps % 16 == 0 ? (int)((ps >> 8) % (uint64_t)nops) : -1;
  /* 1 in 8 has cache updates, from a third stream (the graphs without keep their ops) */
  uint64_t cs = seed * 0x94d049bb133111ebull + 0x2545f4914f6cdd1dull;
  for (int i = 0; i < 4; i++) cs ^= cs << 13, cs ^= cs >> 7, cs ^= cs << 17;
  g.cache_at = cs % 8 == 0 ? (int)((cs >> 8) % (uint64_t)nops) : -1;
  /* 1 in 8 has a windowed op (convolution, max pool or its gradient), from a fourth */
  uint64_t xs = seed * 0x2545f4914f6cdd1dull + 0xbf58476d1ce4e5b9ull;
  for (int i = 0; i < 4; i++) xs ^= xs << 13, xs ^= xs >> 7, xs ^= xs << 17;
  g.window_at = xs % 8 == 0 ? (int)((xs >> 8) % (uint64_t)nops) : -1;
  while ((int)arrlen(g.vals) < np + nops) {
    if (g.panel_at >= 0 && (int)arrlen(g.vals) >= np + g.panel_at) {
      fz_panel_dot(&g);
      g.panel_at = -1;
    } else if (g.cache_at >= 0 && (int)arrlen(g.vals) >= np + g.cache_at) {
      fz_cache_updates(&g);
      g.cache_at = -1;
    } else if (g.window_at >= 0 && (int)arrlen(g.vals) >= np + g.window_at) {
      fz_window_op(&g);
      g.window_at = -1;
    } else {
      fz_op(&g, -1);
    }
  }
  int n = (int)arrlen(g.vals), nr = 1 + fz_r(&g, 3);
  char *text = NULL;
  sb_printf(&text, "HloModule fuzz_%llu\n\nfz_sum {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
            "  ROOT c = f32[] add(a, b)\n}\n\nfz_max {\n  a = f32[] parameter(0)\n"
            "  b = f32[] parameter(1)\n  ROOT c = f32[] maximum(a, b)\n}\n\nfz_ge {\n  a = f32[] parameter(0)\n"
            "  b = f32[] parameter(1)\n  ROOT c = pred[] compare(a, b), direction=GE\n}\n\nENTRY main {\n%s",
            (unsigned long long)seed, g.sb);
  sb_printf(&text, "  ROOT out = (");
  for (int i = 0; i < nr && i < n; i++) {
    char s[64];
    fz_shape(s, sizeof s, &g.vals[n - 1 - i]);
    sb_printf(&text, "%s%s", i ? ", " : "", s);
  }
  sb_printf(&text, ") tuple(");
  for (int i = 0; i < nr && i < n; i++) sb_printf(&text, "%sv%d", i ? ", " : "", n - 1 - i);
  sb_printf(&text, ")\n}\n");
  char *out = strdup(text);
  arrfree(text);
  arrfree(g.sb);
  arrfree(g.vals);
  return out;
}

/* Makes the root a tuple of every value nobody uses (the most recent 8), so that little
   of the graph is dead. */
static void fz_sinks_to_root(hlo_module *m) {
  hlo_comp *e = m->entry;
  hlo_instr **sinks = NULL;
  for (ptrdiff_t i = arrlen(e->instrs) - 1; i >= 0 && arrlen(sinks) < 8; i--) {
    hlo_instr *x = e->instrs[i];
    if (x->op == HLO_OP_PARAMETER || x->op == HLO_OP_CONSTANT || x == e->root) continue;
    if (hlo_user_count(e, x) == 0) arrput(sinks, x);
  }
  hlo_instr *old = e->root;
  for (int k = 0; k < old->noperands; k++) {
    bool have = false;
    for (ptrdiff_t i = 0; i < arrlen(sinks); i++) have |= sinks[i] == old->operands[k];
    if (!have && arrlen(sinks) < 8) arrput(sinks, old->operands[k]);
  }
  int n = (int)arrlen(sinks);
  hlo_shape *leaves = hlo_alloc(m, sizeof(hlo_shape) * (size_t)n);
  for (int i = 0; i < n; i++) leaves[i] = sinks[i]->shape;
  hlo_shape ts = { .type = HLO_TUPLE, .ntuple = n, .tuple = leaves };
  hlo_instr *t = hlo_instr_new(e, HLO_OP_TUPLE, "out.sinks", &ts, sinks, n);
  hlo_comp_set_root(e, t);
  bool ch;
  hlo_remove_instr(e, old);
  hlo_comp_dce(e, &ch);
  arrfree(sinks);
}

/* The rank-4 parameters (panel weights; the windowed ops' inputs, kernels and sources) get
   few IEEE specials (fusion_testutil.h). */
static bool fz_few_specials(const hlo_instr *param) { return param->shape.rank == 4; }

#endif
