/* fuzz_hlo_gen_window.c — the generator's windowed ops: reduce-window, convolution and
   select-and-scatter (XLA's shape rules for their declared shapes; fuzz_hlo_gen_ops.c has
   the others). Convolutions draw dim_labels as random permutations of each operand's
   roles, feature or batch groups, strides, pads from -1, both dilations and reversal;
   select-and-scatter a GE/GT/LE/LT select and an add/max scatter. */
#include "fuzz_hlo_gen_internal.h"

static bool wn_ge1(const fv *v) { return v->rank >= 1; }

static void wn_ints(fg *g, const char *key, const int64_t *v, int n, bool pairs, const int64_t *v2) {
  fg_sb_add(&g->body, "%s=", key);
  for (int i = 0; i < n; i++) {
    if (pairs) fg_sb_add(&g->body, "%s%lld_%lld", i ? "x" : "", (long long)v[i], (long long)v2[i]);
    else fg_sb_add(&g->body, "%s%lld", i ? "x" : "", (long long)v[i]);
  }
}

void fg_op_reduce_window(fg *g) {
  int a = fg_pick(g, wn_ge1);
  fv v = g->vals[a];
  int64_t sz[4], st[4], lo[4], hi[4], bd[4], wd[4], d[4] = { 0 };
  for (int i = 0; i < v.rank; i++) {
    bd[i] = 1 + (fg_chance(g, 200) ? 1 : 0);
    wd[i] = 1 + (fg_chance(g, 200) ? 1 : 0);
    lo[i] = fg_rn(g, 3);
    hi[i] = fg_rn(g, 3);
    if (fg_chance(g, 100)) {   /* a huge lo cancelled by hi */
      lo[i] = INT64_MAX - fg_rn(g, 3);
      hi[i] = -lo[i] + fg_rn(g, 3);
    }
    __int128 base = (v.d[i] ? (__int128)(v.d[i] - 1) * bd[i] + 1 : 0) + lo[i] + hi[i];
    sz[i] = 1 + fg_rn(g, 3);
    __int128 win = (__int128)(sz[i] - 1) * wd[i] + 1;
    st[i] = fg_chance(g, 100) ? INT64_MAX : 1 + fg_rn(g, 2);
    d[i] = win > base ? 0 : (int64_t)((base - win) / st[i] + 1);
  }
  int kind = fg_reducer_kind(g, v.t);
  if (kind == R_REPLACE) kind = R_MAX;
  int init = fg_identity_init(g, v.t, kind), c = fg_reducer(g, v.t, kind);
  fg_def(g, v.t, v.rank, d, fg_maxl(v.lvl, g->vals[init].lvl));   
  fg_sb_add(&g->body, "reduce-window(v%d, v%d), window={size=", a, init);
  for (int i = 0; i < v.rank; i++) fg_sb_add(&g->body, "%s%lld", i ? "x" : "", (long long)sz[i]);
  fg_sb_add(&g->body, " stride=");
  for (int i = 0; i < v.rank; i++) fg_sb_add(&g->body, "%s%lld", i ? "x" : "", (long long)st[i]);
  fg_sb_add(&g->body, " pad=");
  for (int i = 0; i < v.rank; i++) fg_sb_add(&g->body, "%s%lld_%lld", i ? "x" : "", (long long)lo[i], (long long)hi[i]);
  fg_sb_add(&g->body, " lhs_dilate=");
  for (int i = 0; i < v.rank; i++) fg_sb_add(&g->body, "%s%lld", i ? "x" : "", (long long)bd[i]);
  fg_sb_add(&g->body, " rhs_dilate=");
  for (int i = 0; i < v.rank; i++) fg_sb_add(&g->body, "%s%lld", i ? "x" : "", (long long)wd[i]);
  fg_sb_add(&g->body, "}, to_apply=c%d\n", c);
}

/* A random permutation of 0..n-1 into |p|. */
static void wn_perm(fg *g, int *p, int n) {
  for (int i = 0; i < n; i++) p[i] = i;
  for (int i = n - 1; i > 0; i--) {
    int j = fg_rn(g, i + 1), t = p[i];
    p[i] = p[j], p[j] = t;
  }
}

/* The label string of one operand: position perm[role] holds role's character (roles: the
   two named ones, then the spatial digits). */
static void wn_labels(char *out, const int *perm, int r, char a, char b) {
  for (int role = 0; role < r; role++) out[perm[role]] = role == 0 ? a : role == 1 ? b : (char)('0' + role - 2);
  out[r] = 0;
}

void fg_op_convolution(fg *g) {
  static const int types[] = { T_F32, T_F32, T_F32, T_BF16, T_F16, T_F64, T_S32, T_S8, T_U16 };
  int t = types[fg_rn(g, (int)(sizeof types / sizeof types[0]))];
  int ns = 1 + fg_rn(g, 2), r = ns + 2;
  int64_t G = 1, BG = 1;
  if (fg_chance(g, 250)) G = 2 + fg_rn(g, 2);
  else if (fg_chance(g, 150)) BG = 2;
  int64_t Bo = 1 + fg_rn(g, 2), Ci = 1 + fg_rn(g, 4), O = G * BG * (1 + fg_rn(g, 2));
  int64_t sz[2], st[2], lo[2], hi[2], ld[2], rd[2], rv[2], in[2], out[2];
  bool any_rev = false;
  for (int i = 0; i < ns; i++) {
    in[i] = 1 + fg_rn(g, 6);
    sz[i] = 1 + fg_rn(g, 3);
    st[i] = 1 + fg_rn(g, 2);
    ld[i] = fg_chance(g, 150) ? 2 : 1;
    rd[i] = fg_chance(g, 150) ? 2 : 1;
    rv[i] = fg_chance(g, 150);
    any_rev |= rv[i];
    lo[i] = fg_rn(g, 4) - 1, hi[i] = fg_rn(g, 4) - 1;
    int64_t base = (in[i] - 1) * ld[i] + 1 + lo[i] + hi[i], win = (sz[i] - 1) * rd[i] + 1;
    if (base < 0) lo[i] = hi[i] = 0, base = (in[i] - 1) * ld[i] + 1;
    out[i] = win > base ? 0 : (base - win) / st[i] + 1;
  }
  int lp[4], kp[4], op[4];
  wn_perm(g, lp, r), wn_perm(g, kp, r), wn_perm(g, op, r);
  if (fg_chance(g, 400)) /* the common NHWC / HWIO / NHWC */
    for (int i = 0; i < r; i++) lp[i] = op[i] = i == 0 ? 0 : i == 1 ? r - 1 : i - 1, kp[i] = i < 2 ? ns + i : i - 2;
  int64_t la[4], ka[4], oa[4];
  int64_t lsz[4] = { Bo * BG, Ci * G, 0, 0 }, ksz[4] = { Ci, O, 0, 0 }, osz[4] = { Bo, O, 0, 0 };
  for (int i = 0; i < ns; i++) lsz[2 + i] = in[i], ksz[2 + i] = sz[i], osz[2 + i] = out[i];
  for (int role = 0; role < r; role++) la[lp[role]] = lsz[role], ka[kp[role]] = ksz[role], oa[op[role]] = osz[role];
  int a = fg_get(g, t, r, la), b = fg_get(g, t, r, ka);
  int lvl = fg_maxl(g->vals[a].lvl, g->vals[b].lvl);
  if (fg_is_f(t) && Ci * sz[0] * (ns > 1 ? sz[1] : 1) > 1) lvl = fg_maxl(lvl, FHG_CLOSE);
  fg_def(g, t, r, oa, lvl);
  char l1[8], l2[8], l3[8];
  wn_labels(l1, lp, r, 'b', 'f'), wn_labels(l2, kp, r, 'i', 'o'), wn_labels(l3, op, r, 'b', 'f');
  fg_sb_add(&g->body, "convolution(v%d, v%d), window={", a, b);
  wn_ints(g, "size", sz, ns, false, NULL);
  wn_ints(g, " stride", st, ns, false, NULL);
  wn_ints(g, " pad", lo, ns, true, hi);
  wn_ints(g, " lhs_dilate", ld, ns, false, NULL);
  wn_ints(g, " rhs_dilate", rd, ns, false, NULL);
  if (any_rev) wn_ints(g, " rhs_reversal", rv, ns, false, NULL);
  fg_sb_add(&g->body, "}, dim_labels=%s_%s->%s", l1, l2, l3);
  if (G > 1) fg_sb_add(&g->body, ", feature_group_count=%lld", (long long)G);
  if (BG > 1) fg_sb_add(&g->body, ", batch_group_count=%lld", (long long)BG);
  fg_sb_add(&g->body, "\n");
}

void fg_op_select_and_scatter(fg *g) {
  static const int types[] = { T_F32, T_F32, T_BF16, T_S32, T_U8, T_F64 };
  static const char *const dirs[] = { "GE", "GT", "LE", "LT" };
  int t = types[fg_rn(g, (int)(sizeof types / sizeof types[0]))];
  int rank = 1 + fg_rn(g, 3);
  int64_t xd[4], sd[4], sz[4], st[4], lo[4], hi[4];
  for (int i = 0; i < rank; i++) {
    xd[i] = 1 + fg_rn(g, 6);
    sz[i] = 1 + fg_rn(g, 3);
    st[i] = 1 + fg_rn(g, 2);
    lo[i] = fg_rn(g, 2), hi[i] = fg_rn(g, 2);
    int64_t base = xd[i] + lo[i] + hi[i];
    if (sz[i] > base) sz[i] = base;
    sd[i] = (base - sz[i]) / st[i] + 1;
  }
  int x = fg_get(g, t, rank, xd), s = fg_get(g, t, rank, sd);
  int init = fg_identity_init(g, t, R_ADD);
  int c = g->ncomp++, d = g->ncomp++;
  const char *tn = tname[t];
  bool add = fg_chance(g, 700);
  fg_sb_add(&g->comps, "c%d {\n  c%d_a = %s[] parameter(0)\n  c%d_b = %s[] parameter(1)\n"
            "  ROOT c%d_r = pred[] compare(c%d_a, c%d_b), direction=%s%s\n}\n\n", c, c, tn, c, tn, c, c, c,
            dirs[fg_rn(g, 4)], fg_cmp_type(g, t));
  fg_sb_add(&g->comps, "c%d {\n  c%d_a = %s[] parameter(0)\n  c%d_b = %s[] parameter(1)\n"
            "  ROOT c%d_r = %s[] %s(c%d_a, c%d_b)\n}\n\n", d, d, tn, d, tn, d, tn, add ? "add" : "maximum", d, d);
  /* which element a window picks jumps with its values: discontinuous */
  int lvl = fg_disc(fg_maxl(g->vals[x].lvl, g->vals[s].lvl));
  if (fg_is_f(t) && add) lvl = fg_maxl(lvl, FHG_CLOSE);
  fg_def(g, t, rank, xd, fg_maxl(lvl, g->vals[init].lvl));
  fg_sb_add(&g->body, "select-and-scatter(v%d, v%d, v%d), window={", x, s, init);
  wn_ints(g, "size", sz, rank, false, NULL);
  wn_ints(g, " stride", st, rank, false, NULL);
  wn_ints(g, " pad", lo, rank, true, hi);
  fg_sb_add(&g->body, "}, select=c%d, scatter=c%d\n", c, d);
}
