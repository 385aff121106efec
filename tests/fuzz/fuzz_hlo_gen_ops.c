/* fuzz_hlo_gen_ops.c — the generator's ops, one function per op family; each picks its
   operands from the pool (fuzz_hlo_gen.c's fg_pick / fg_get make what is missing), writes one
   instruction (plus the computations it calls) with its declared shape, derived here from
   XLA's shape rules, and the exactness level of the result (fuzz_hlo.h): a discontinuous op
   on a FHG_CLOSE value gives FHG_SKIP, an f32-class transcendental, an f32 dot or a float
   sum or max/min reduce gives at least FHG_CLOSE. */
#include "fuzz_hlo_gen_internal.h"
#include "hlojit_impl/ir/ir.h"   /* the opcode table: which ops hlojit approximates */

/* ---- elementwise ops --------------------------------------------------------------------- */

static const char *const fl_unary[] = { "abs", "negate", "exponential", "exponential-minus-one", "log",
  "log-plus-one", "logistic", "tanh", "sqrt", "rsqrt", "cbrt", "sine", "cosine", "tan", "erf", "floor",
  "ceil", "round-nearest-even", "round-nearest-afz", "sign", "is-finite", "copy", "reduce-precision" };

/* The emitters compute it with a polynomial of their own (the opcode table's poly column). */
static bool un_approx(const char *op) {
  hlo_opcode o;
  return hlo_opcode_from_name(op, strlen(op), &o) && hlo_opcode_poly(o);
}

static bool un_disc(const char *op) {
  return !strcmp(op, "floor") || !strcmp(op, "ceil") || !strcmp(op, "round-nearest-even") ||
         !strcmp(op, "round-nearest-afz") || !strcmp(op, "sign") || !strcmp(op, "is-finite") ||
         !strcmp(op, "reduce-precision");
}

void fg_op_unary(fg *g) {
  int a = fg_pick(g, NULL);
  fv v = g->vals[a];
  const char *op;
  if (fg_is_f(v.t)) op = fl_unary[fg_rn(g, sizeof fl_unary / sizeof fl_unary[0])];
  else if (v.t == T_PRED) op = fg_chance(g, 700) ? "not" : "copy";
  else {
    static const char *const si[] = { "abs", "negate", "sign", "not", "popcnt", "count-leading-zeros", "copy" };
    static const char *const ui[] = { "negate", "not", "popcnt", "count-leading-zeros", "copy" };
    op = fg_is_s(v.t) ? si[fg_rn(g, 7)] : ui[fg_rn(g, 5)];
  }
  int lvl = v.lvl;
  if (un_approx(op) && fg_approx_t(v.t)) lvl = fg_maxl(lvl, FHG_CLOSE);
  if (un_disc(op)) lvl = fg_disc(lvl);
  fg_def(g, !strcmp(op, "is-finite") ? T_PRED : v.t, v.rank, v.d, lvl);
  if (!strcmp(op, "reduce-precision"))   /* the f16 and bf16 ranges, or narrower */
    fg_sb_add(&g->body, "%s(v%d), exponent_bits=%d, mantissa_bits=%d\n", op, a, 1 + fg_rn(g, 8),
              fg_rn(g, 11));
  else
    fg_sb_add(&g->body, "%s(v%d)\n", op, a);
}

void fg_op_binary(fg *g) {
  int a = fg_pick(g, NULL);
  fv v = g->vals[a];
  int b = fg_get(g, v.t, v.rank, v.d);
  static const char *const fo[] = { "add", "subtract", "multiply", "divide", "remainder", "power",
                                    "maximum", "minimum", "atan2" };
  static const char *const io[] = { "add", "subtract", "multiply", "divide", "remainder", "power",
                                    "maximum", "minimum", "and", "or", "xor", "shift-left",
                                    "shift-right-arithmetic", "shift-right-logical" };
  static const char *const po[] = { "and", "or", "xor", "maximum", "minimum", "add", "multiply" };
  const char *op = fg_is_f(v.t) ? fo[fg_rn(g, 9)] : v.t == T_PRED ? po[fg_rn(g, 7)] : io[fg_rn(g, 14)];
  int lvl = fg_maxl(v.lvl, g->vals[b].lvl);
  if (!strcmp(op, "remainder") || (fg_is_f(v.t) && !strcmp(op, "power"))) lvl = fg_disc(lvl);
  fg_def(g, v.t, v.rank, v.d, lvl);
  fg_sb_add(&g->body, "%s(v%d, v%d)\n", op, a, b);
}

void fg_op_compare(fg *g) {
  int a = fg_pick(g, NULL);
  fv v = g->vals[a];
  int b = fg_get(g, v.t, v.rank, v.d);
  static const char *const dir[] = { "EQ", "NE", "LT", "LE", "GT", "GE" };
  const char *ty = fg_is_f(v.t) ? fg_cmp_type(g, v.t) : v.t == T_PRED ? (fg_chance(g, 500) ? ", type=UNSIGNED" : "")
                                                                : fg_cmp_type(g, v.t);
  fg_def(g, T_PRED, v.rank, v.d, fg_disc(fg_maxl(v.lvl, g->vals[b].lvl)));
  fg_sb_add(&g->body, "compare(v%d, v%d), direction=%s%s\n", a, b, dir[fg_rn(g, 6)], ty);
}

void fg_op_select_clamp(fg *g) {
  int x = fg_pick(g, NULL);
  fv v = g->vals[x];
  if (fg_chance(g, 500)) {
    int p = fg_chance(g, 300) ? fg_get(g, T_PRED, 0, NULL) : fg_get(g, T_PRED, v.rank, v.d);
    int y = fg_get(g, v.t, v.rank, v.d);
    int lvl = fg_maxl(fg_maxl(v.lvl, g->vals[y].lvl), fg_disc(g->vals[p].lvl));
    fg_def(g, v.t, v.rank, v.d, lvl);
    fg_sb_add(&g->body, "select(v%d, v%d, v%d)\n", p, x, y);
    return;
  }
  bool sc = fg_chance(g, 500);
  int lo = sc ? fg_get(g, v.t, 0, NULL) : fg_get(g, v.t, v.rank, v.d);
  int hi = sc ? fg_get(g, v.t, 0, NULL) : fg_get(g, v.t, v.rank, v.d);
  int lvl = fg_maxl(v.lvl, fg_maxl(g->vals[lo].lvl, g->vals[hi].lvl));
  fg_def(g, v.t, v.rank, v.d, lvl);
  fg_sb_add(&g->body, "clamp(v%d, v%d, v%d)\n", lo, x, hi);
}

void fg_op_convert(fg *g) {
  int a = fg_pick(g, NULL);
  fv v = g->vals[a];
  int t = fg_rand_type(g);
  if (fg_chance(g, 500)) {   /* bitcast-convert: same width, or f32[N] <-> u8[N,4] and the like */
    if (v.t == T_PRED) return;
    int same[T_N], ns = 0;
    for (int i = 1; i < T_N; i++) if (tbits[i] == tbits[v.t]) same[ns++] = i;
    int to = same[fg_rn(g, ns)];
    int lvl = fg_is_f(v.t) ? fg_disc(v.lvl) : v.lvl;
    if (fg_chance(g, 300) && v.rank < 4 && tbits[v.t] > 8) {   /* wider -> narrower: a new minor dim */
      int64_t d[4];
      memcpy(d, v.d, sizeof d);
      static const int narrow[] = { T_U8, T_S8, T_S16, T_U16, T_F16, T_BF16, T_S32, T_F32 };
      int n = narrow[fg_rn(g, 8)];
      if (tbits[n] >= tbits[v.t]) n = T_U8;
      d[v.rank] = tbits[v.t] / tbits[n];
      fg_def(g, n, v.rank + 1, d, lvl);
      fg_sb_add(&g->body, "bitcast-convert(v%d)\n", a);
      return;
    }
    fg_def(g, to, v.rank, v.d, lvl);
    fg_sb_add(&g->body, "bitcast-convert(v%d)\n", a);
    return;
  }
  int lvl = fg_is_f(v.t) && !fg_is_f(t) ? fg_disc(v.lvl) : v.lvl;
  fg_def(g, t, v.rank, v.d, lvl);
  fg_sb_add(&g->body, "convert(v%d)\n", a);
}

/* ---- shape ops --------------------------------------------------------------------------- */

static const int64_t huge[] = { INT64_MAX, (int64_t)1 << 31, (int64_t)1 << 53, INT64_MAX - 1 };

void fg_op_iota(fg *g) {
  int rank;
  int64_t d[4];
  fg_rand_dims(g, &rank, d);
  if (rank == 0) rank = 1, d[0] = 3;
  int t = 1 + fg_rn(g, T_N - 1);
  fg_def(g, t, rank, d, FHG_EXACT);
  fg_sb_add(&g->body, "iota(), iota_dimension=%d\n", fg_rn(g, rank));
}

static bool lt4(const fv *v) { return v->rank < 4; }
static bool ge1(const fv *v) { return v->rank >= 1; }

void fg_op_broadcast(fg *g) {
  int a = fg_pick(g, lt4);
  fv v = g->vals[a];
  int add = 1 + fg_rn(g, 4 - v.rank), rank = v.rank + add;
  bool old[4] = { false };
  for (int i = 0, placed = 0; placed < v.rank; i++)   /* operand dims keep their order */
    if (fg_rn(g, rank - i) < v.rank - placed) old[i] = true, placed++;
  int64_t d[4], map[4];
  for (int i = 0, j = 0; i < rank; i++) {
    if (old[i]) map[j] = i, d[i] = v.d[j++];
    else d[i] = fg_rn(g, 4);
  }
  char b[64];
  fg_ints_str(b, sizeof b, map, v.rank);
  fg_def(g, v.t, rank, d, v.lvl);
  fg_sb_add(&g->body, "broadcast(v%d), dimensions=%s\n", a, b);
}

void fg_op_reshape(fg *g) {
  int a = fg_pick(g, NULL);
  fv v = g->vals[a];
  int64_t n = fg_numel(&v), d[4];
  int rank = fg_rn(g, 5);
  if (n == 0) {
    if (rank == 0) rank = 1;
    for (int i = 0; i < rank; i++) d[i] = 1 + fg_rn(g, 3);
    d[fg_rn(g, rank)] = 0;
  } else {
    int64_t left = n;
    for (int i = 0; i < rank - 1; i++) {   /* a random divisor of what is left */
      int64_t f = 1 + fg_rn(g, (int)(left < 6 ? left : 6));
      while (left % f) f--;
      d[i] = f;
      left /= f;
    }
    if (rank == 0 && n != 1) rank = 1;
    if (rank > 0) d[rank - 1] = left;
  }
  fg_def(g, v.t, rank, d, v.lvl);
  fg_sb_add(&g->body, "reshape(v%d)\n", a);
}

void fg_op_transpose(fg *g) {
  int a = fg_pick(g, NULL);
  fv v = g->vals[a];
  int64_t p[4], d[4];
  for (int i = 0; i < v.rank; i++) p[i] = i;
  for (int i = v.rank - 1; i > 0; i--) { int j = fg_rn(g, i + 1); int64_t t = p[i]; p[i] = p[j]; p[j] = t; }
  for (int i = 0; i < v.rank; i++) d[i] = v.d[p[i]];
  char b[64];
  fg_ints_str(b, sizeof b, p, v.rank);
  fg_def(g, v.t, v.rank, d, v.lvl);
  fg_sb_add(&g->body, "transpose(v%d), dimensions=%s\n", a, b);
}

void fg_op_slice(fg *g) {
  int a = fg_pick(g, NULL);
  fv v = g->vals[a];
  int64_t d[4] = { 0 };
  char part[4][96];
  for (int i = 0; i < v.rank; i++) {
    int64_t s = fg_rn(g, (int)v.d[i] + 1), l = s + fg_rn(g, (int)(v.d[i] - s) + 1);
    int64_t st = fg_chance(g, 150) ? huge[fg_rn(g, 4)] : 1 + fg_rn(g, 3);
    d[i] = l <= s ? 0 : (l - s - 1) / st + 1;
    snprintf(part[i], sizeof part[i], "[%lld:%lld:%lld]", (long long)s, (long long)l, (long long)st);
  }
  fg_def(g, v.t, v.rank, d, v.lvl);
  fg_sb_add(&g->body, "slice(v%d), slice={", a);
  for (int i = 0; i < v.rank; i++) fg_sb_add(&g->body, "%s%s", i ? ", " : "", part[i]);
  fg_sb_add(&g->body, "}\n");
}

void fg_op_reverse(fg *g) {
  int a = fg_pick(g, NULL);
  fv v = g->vals[a];
  int64_t dd[4];
  int n = 0;
  for (int i = 0; i < v.rank; i++) if (fg_chance(g, 500)) dd[n++] = i;
  char b[64];
  fg_ints_str(b, sizeof b, dd, n);
  fg_def(g, v.t, v.rank, v.d, v.lvl);
  fg_sb_add(&g->body, "reverse(v%d), dimensions=%s\n", a, b);
}

/* pad edges: small ones, or a huge lo (INT64_MIN, -INT64_MAX, INT64_MAX) cancelled by hi so
   that the padded size stays small. */
void fg_op_pad(fg *g) {
  int a = fg_pick(g, ge1);
  fv v = g->vals[a];
  int pv = fg_get(g, v.t, 0, NULL);
  int64_t d[4] = { 0 }, lo[4], hi[4], in[4];
  for (int i = 0; i < v.rank; i++) {
    int64_t n = v.d[i];
    in[i] = n <= 1 && fg_chance(g, 200) ? huge[fg_rn(g, 4)] : fg_rn(g, 3);
    __int128 grown = (__int128)(n > 0 ? n - 1 : 0) * (n > 1 ? in[i] : 0) + n;
    int64_t target = fg_rn(g, 6);
    if (fg_chance(g, 150)) {
      static const int64_t big[] = { INT64_MIN, -INT64_MAX, INT64_MAX, -((int64_t)1 << 53) };
      lo[i] = big[fg_rn(g, 4)];
      __int128 h = (__int128)target - grown - lo[i];
      if (h > INT64_MAX || h < INT64_MIN) { lo[i] = 0; h = (__int128)target - grown; }
      hi[i] = (int64_t)h;
      if (fg_chance(g, 500)) { int64_t t = lo[i]; lo[i] = hi[i]; hi[i] = t; }
    } else {
      lo[i] = fg_rn(g, 5) - 2;
      hi[i] = fg_rn(g, 5) - 2;
      if (grown + lo[i] + hi[i] < 0) hi[i] = -(int64_t)grown - lo[i];
    }
    d[i] = (int64_t)(grown + lo[i] + hi[i]);
  }
  fg_def(g, v.t, v.rank, d, fg_maxl(v.lvl, g->vals[pv].lvl));
  fg_sb_add(&g->body, "pad(v%d, v%d), padding=", a, pv);
  for (int i = 0; i < v.rank; i++)
    fg_sb_add(&g->body, "%s%lld_%lld_%lld", i ? "x" : "", (long long)lo[i], (long long)hi[i], (long long)in[i]);
  fg_sb_add(&g->body, "\n");
}

void fg_op_concat(fg *g) {
  int a = fg_pick(g, ge1);
  fv v = g->vals[a];
  int axis = fg_rn(g, v.rank), n = 2 + fg_rn(g, 2), ops[3] = { a };
  int64_t d[4];
  memcpy(d, v.d, sizeof d);
  int lvl = v.lvl;
  for (int k = 1; k < n; k++) {
    int64_t e[4];
    memcpy(e, v.d, sizeof e);
    e[axis] = fg_rn(g, 4);
    ops[k] = fg_get(g, v.t, v.rank, e);
    d[axis] += e[axis];
    lvl = fg_maxl(lvl, g->vals[ops[k]].lvl);
  }
  fg_def(g, v.t, v.rank, d, lvl);
  fg_sb_add(&g->body, "concatenate(v%d, v%d", ops[0], ops[1]);
  if (n == 3) fg_sb_add(&g->body, ", v%d", ops[2]);
  fg_sb_add(&g->body, "), dimensions={%d}\n", axis);
}

/* ---- indexing ops ------------------------------------------------------------------------ */

/* A scalar start index of integer type |it|: a parameter (inputs are small, some negative)
   or a constant that is often far out of range (clamped). */
static int start_index(fg *g, int it) {
  if (g->nparams < 6 && fg_chance(g, 400)) return fg_param(g, it, 0, NULL);
  return fg_make_const(g, it, 0, NULL);
}

static int int_type(fg *g) { return 1 + fg_rn(g, 8); }

void fg_op_dynamic_slice(fg *g) {
  int a = fg_pick(g, ge1);
  fv v = g->vals[a];
  int it = int_type(g), st[4];
  int64_t sz[4];
  int lvl = v.lvl;
  for (int i = 0; i < v.rank; i++) {
    st[i] = start_index(g, it);
    sz[i] = fg_rn(g, (int)v.d[i] + 1);
    lvl = fg_maxl(lvl, fg_disc(g->vals[st[i]].lvl));
  }
  bool dus = fg_chance(g, 400);
  int u = dus ? fg_get(g, v.t, v.rank, sz) : -1;
  char b[64];
  fg_ints_str(b, sizeof b, sz, v.rank);
  if (dus) {
    fg_def(g, v.t, v.rank, v.d, fg_maxl(lvl, g->vals[u].lvl));
    fg_sb_add(&g->body, "dynamic-update-slice(v%d, v%d", a, u);
  } else {
    fg_def(g, v.t, v.rank, sz, lvl);
    fg_sb_add(&g->body, "dynamic-slice(v%d", a);
  }
  for (int i = 0; i < v.rank; i++) fg_sb_add(&g->body, ", v%d", st[i]);
  if (dus) fg_sb_add(&g->body, ")\n");
  else fg_sb_add(&g->body, "), dynamic_slice_sizes=%s\n", b);
}

/* The index operand of gather/scatter: |nb| batch dims |bd| and a vector of |k| components
   at index_vector_dim |ivd| (ivd == nb with k == 1: implicit). */
static int indices(fg *g, int nb, const int64_t *bd, int k, int ivd, bool implicit) {
  int64_t d[4];
  int rank = 0;
  for (int i = 0, j = 0; i < nb + (implicit ? 0 : 1); i++) d[rank++] = i == ivd && !implicit ? k : bd[j++];
  int it = int_type(g);
  if (g->nparams < 6 && fg_chance(g, 600)) return fg_param(g, it, rank, d);
  return fg_make_const(g, it, rank, d);
}

static void shuffle(fg *g, int64_t *v, int n) {
  for (int i = n - 1; i > 0; i--) { int j = fg_rn(g, i + 1); int64_t t = v[i]; v[i] = v[j]; v[j] = t; }
}

/* The dimension numbers both gather and scatter draw: |k| operand dims indexed (map, in a
   random order), the collapsed (inserted) ones among them, and the batch dims. */
typedef struct {
  int k, nc, nb, ivd, nw;
  bool implicit;
  int64_t map[4], coll[4], bd[4], w[4];   /* w: the window (non-collapsed) operand dims */
} fg_idx;

static bool idx_dims(fg *g, const fv *v, fg_idx *x) {
  memset(x, 0, sizeof *x);
  x->k = 1 + fg_rn(g, v->rank < 2 ? v->rank : 2);
  int64_t all[4];
  for (int i = 0; i < v->rank; i++) all[i] = i;
  shuffle(g, all, v->rank);
  for (int i = 0; i < x->k; i++) x->map[i] = all[i];
  for (int i = 0; i < v->rank; i++) {
    bool in_map = false;
    for (int j = 0; j < x->k; j++) in_map |= x->map[j] == i;
    if (in_map && v->d[i] == 1 && fg_chance(g, 600)) x->coll[x->nc++] = i;   /* size 1: see sii_gather */
    else x->w[x->nw++] = i;
  }
  x->nb = fg_rn(g, 3);
  for (int i = 0; i < x->nb; i++) x->bd[i] = fg_chance(g, 80) ? 0 : 1 + fg_rn(g, 3);
  x->implicit = x->k == 1 && fg_chance(g, 400);
  x->ivd = x->implicit ? x->nb : fg_rn(g, x->nb + 1);
  return x->nb + x->nw <= 4;
}

/* |nw| sorted positions among |rank| result (or update) dims for the window dims. */
static void window_pos(fg *g, int rank, int nw, int64_t *pos) {
  bool at[4] = { false };
  for (int i = 0, placed = 0; placed < nw; i++)
    if (fg_rn(g, rank - i) < nw - placed) at[i] = true, placed++;
  for (int i = 0, j = 0; i < rank; i++) if (at[i]) pos[j++] = i;
}

void fg_op_gather(fg *g) {
  int a = fg_pick(g, ge1);
  fv v = g->vals[a];
  fg_idx x;
  if (!idx_dims(g, &v, &x)) return;
  int ix = indices(g, x.nb, x.bd, x.k, x.ivd, x.implicit);
  int64_t ss[4], od[4], d[4];
  for (int i = 0; i < v.rank; i++) ss[i] = fg_rn(g, (int)v.d[i] + 1);
  for (int i = 0; i < x.nc; i++) ss[x.coll[i]] = v.d[x.coll[i]] ? 1 : 0;
  int rank = x.nb + x.nw;
  window_pos(g, rank, x.nw, od);
  for (int i = 0, wi = 0, bi = 0; i < rank; i++) {
    bool is_w = wi < x.nw && od[wi] == i;
    d[i] = is_w ? ss[x.w[wi++]] : x.bd[bi++];
  }
  char o1[64], o2[64], o3[64], o4[64];
  fg_ints_str(o1, sizeof o1, od, x.nw);
  fg_ints_str(o2, sizeof o2, x.coll, x.nc);
  fg_ints_str(o3, sizeof o3, x.map, x.k);
  fg_ints_str(o4, sizeof o4, ss, v.rank);
  fg_def(g, v.t, rank, d, fg_maxl(v.lvl, fg_disc(g->vals[ix].lvl)));
  fg_sb_add(&g->body, "gather(v%d, v%d), offset_dims=%s, collapsed_slice_dims=%s, start_index_map=%s, "
         "index_vector_dim=%d, slice_sizes=%s%s\n", a, ix, o1, o2, o3, x.ivd, o4,
         fg_chance(g, 200) ? ", indices_are_sorted=true" : "");
}

void fg_op_scatter(fg *g) {
  int a = fg_pick(g, ge1);
  fv v = g->vals[a];
  fg_idx x;
  if (!idx_dims(g, &v, &x)) return;
  int ix = indices(g, x.nb, x.bd, x.k, x.ivd, x.implicit);
  int rank = x.nb + x.nw;
  int64_t uw[4], ud[4];
  window_pos(g, rank, x.nw, uw);
  for (int i = 0, wi = 0, bi = 0; i < rank; i++) {
    bool is_w = wi < x.nw && uw[wi] == i;
    ud[i] = is_w ? fg_rn(g, (int)v.d[x.w[wi++]] + 1) : x.bd[bi++];
  }
  int u = fg_get(g, v.t, rank, ud);
  int c = fg_reducer(g, v.t, fg_reducer_kind(g, v.t));
  char o1[64], o2[64], o3[64];
  fg_ints_str(o1, sizeof o1, uw, x.nw);
  fg_ints_str(o2, sizeof o2, x.coll, x.nc);
  fg_ints_str(o3, sizeof o3, x.map, x.k);
  fg_def(g, v.t, v.rank, v.d, fg_maxl(fg_maxl(v.lvl, g->vals[u].lvl), fg_disc(g->vals[ix].lvl)));
  fg_sb_add(&g->body, "scatter(v%d, v%d, v%d), update_window_dims=%s, inserted_window_dims=%s, "
         "scatter_dims_to_operand_dims=%s, index_vector_dim=%d, to_apply=c%d%s\n", a, ix, u, o1, o2,
         o3, x.ivd, c, fg_chance(g, 200) ? ", unique_indices=true" : "");
}

/* ---- reductions, dot, sort, map ---------------------------------------------------------- */

int fg_identity_init(fg *g, int t, int kind) {
  if (fg_chance(g, 400)) return fg_get(g, t, 0, NULL);
  int k = fg_def(g, t, 0, NULL, FHG_EXACT);
  const char *v = "0";
  if (kind == R_MUL) v = t == T_PRED ? "true" : "1";
  else if (kind == R_MAX) v = fg_is_f(t) ? "-inf" : t == T_PRED ? "false" : "0";
  else if (kind == R_MIN) v = fg_is_f(t) ? "inf" : t == T_PRED ? "true" : "0";
  else if (kind == R_AND) v = t == T_PRED ? "true" : fg_is_s(t) ? "-1" : "0";
  else if (t == T_PRED) v = "false";
  fg_sb_add(&g->body, "constant(%s)\n", v);
  return k;
}

void fg_op_reduce(fg *g) {
  int a = fg_pick(g, NULL);
  fv v = g->vals[a];
  int64_t dims[4], d[4];
  int nd = 0, rank = 0;
  for (int i = 0; i < v.rank; i++) {
    if (fg_chance(g, 500)) dims[nd++] = i;
    else d[rank++] = v.d[i];
  }
  char b[64];
  fg_ints_str(b, sizeof b, dims, nd);
  if (fg_chance(g, 200)) {   /* variadic: (sum of a, max of b) over the same dims */
    int t2 = fg_rand_type(g);
    int b2 = fg_get(g, t2, v.rank, v.d);
    int i1 = fg_identity_init(g, v.t, R_ADD), i2 = fg_identity_init(g, t2, R_MAX);
    int c = g->ncomp++;
    const char *t1n = tname[v.t], *t2n = tname[t2];
    const char *op1 = v.t == T_PRED ? "or" : "add";
    fg_sb_add(&g->comps, "c%d {\n  c%d_a = %s[] parameter(0)\n  c%d_b = %s[] parameter(1)\n"
           "  c%d_x = %s[] parameter(2)\n  c%d_y = %s[] parameter(3)\n  c%d_s = %s[] %s(c%d_a, c%d_x)\n"
           "  c%d_m = %s[] maximum(c%d_b, c%d_y)\n  ROOT c%d_r = (%s[], %s[]) tuple(c%d_s, c%d_m)\n}\n\n",
           c, c, t1n, c, t2n, c, t1n, c, t2n, c, t1n, op1, c, c, c, t2n, c, c, c, t1n, t2n, c, c);
    char s1[128], s2[128];
    fg_shape_str(s1, sizeof s1, v.t, rank, d);
    fg_shape_str(s2, sizeof s2, t2, rank, d);
    int lvl1 = fg_is_f(v.t) && nd ? fg_maxl(v.lvl, FHG_CLOSE) : v.lvl;
    int lvl2 = fg_is_f(t2) && nd ? fg_maxl(g->vals[b2].lvl, FHG_CLOSE) : g->vals[b2].lvl;
    fg_sb_add(&g->body, "  t%d = (%s, %s) reduce(v%d, v%d, v%d, v%d), dimensions=%s, to_apply=c%d\n", g->nv,
           s1, s2, a, b2, i1, i2, b, c);
    int tn = g->nv;
    int k1 = fg_def(g, v.t, rank, d, lvl1);
    fg_sb_add(&g->body, "get-tuple-element(t%d), index=0\n", tn);
    fg_def(g, t2, rank, d, lvl2);
    fg_sb_add(&g->body, "get-tuple-element(t%d), index=1\n", tn);
    (void)k1;
    return;
  }
  int kind = fg_reducer_kind(g, v.t);
  if (kind == R_REPLACE) kind = R_ADD;
  int init = fg_identity_init(g, v.t, kind), c = fg_reducer(g, v.t, kind);
  /* float sums and products: the CPU may reassociate; max/min: +-0 either way */
  int lvl = fg_maxl(v.lvl, g->vals[init].lvl);
  if (fg_is_f(v.t) && nd) lvl = fg_maxl(lvl, FHG_CLOSE);
  /* a float product in another order overflows (or hits 0) at another step: inf * 0 = NaN on
     one side, 0 on the other (a GPU tree reduce against the evaluator's sequence) */
  if (fg_is_f(v.t) && nd && kind == R_MUL) lvl = FHG_SKIP;
  fg_def(g, v.t, rank, d, lvl);
  fg_sb_add(&g->body, "reduce(v%d, v%d), dimensions=%s, to_apply=c%d\n", a, init, b, c);
}

void fg_op_dot(fg *g) {
  int t = fg_chance(g, 600) ? T_F32 : fg_rand_type(g);
  int nb = fg_rn(g, 2);
  int64_t B = 1 + fg_rn(g, 2), M = fg_rn(g, 4), K = fg_rn(g, 4), N = fg_rn(g, 4);
  bool hasm = fg_chance(g, 800), hasn = fg_chance(g, 800);
  int64_t ld[4], rd[4], od[4];
  int lr = 0, rr = 0, orank = 0;
  if (nb) ld[lr++] = B, rd[rr++] = B, od[orank++] = B;
  bool kfirst = fg_chance(g, 300);   /* lhs [B, K, M] instead of [B, M, K] */
  if (kfirst) { ld[lr++] = K; if (hasm) ld[lr++] = M; }
  else { if (hasm) ld[lr++] = M; ld[lr++] = K; }
  rd[rr++] = K;
  if (hasn) rd[rr++] = N;
  if (hasm) od[orank++] = M;
  if (hasn) od[orank++] = N;
  int a = fg_get(g, t, lr, ld), b = fg_get(g, t, rr, rd);
  int lc = kfirst ? nb : lr - 1;
  int lvl = fg_maxl(g->vals[a].lvl, g->vals[b].lvl);
  if (t == T_F32 && K > 1) lvl = fg_maxl(lvl, FHG_CLOSE);   /* f32 matmul: its own summation order */
  fg_def(g, t, orank, od, lvl);
  fg_sb_add(&g->body, "dot(v%d, v%d), lhs_contracting_dims={%d}, rhs_contracting_dims={%d}", a, b, lc, nb);
  if (nb) fg_sb_add(&g->body, ", lhs_batch_dims={0}, rhs_batch_dims={0}");
  fg_sb_add(&g->body, "\n");
}

/* topk of |a| along its last dim: one element of (values, s32 indices) taken out. */
static void fg_topk(fg *g, int a) {
  fv v = g->vals[a];
  int64_t d[4];
  for (int i = 0; i < v.rank; i++) d[i] = v.d[i];
  int64_t k = fg_rn(g, (int)v.d[v.rank - 1] + 1);
  d[v.rank - 1] = k;
  char s1[128], s2[128];
  fg_shape_str(s1, sizeof s1, v.t, v.rank, d);
  fg_shape_str(s2, sizeof s2, T_S32, v.rank, d);
  const char *dir = fg_chance(g, 250) ? ", largest=false" : "";
  int tn = g->nv, e = fg_rn(g, 2);
  fg_sb_add(&g->body, "  t%d = (%s, %s) topk(v%d), k=%lld%s\n", tn, s1, s2, a, (long long)k, dir);
  fg_def(g, e ? T_S32 : v.t, v.rank, d, fg_disc(v.lvl));
  fg_sb_add(&g->body, "get-tuple-element(t%d), index=%d\n", tn, e);
}

void fg_op_sort(fg *g) {
  int a = fg_pick(g, ge1);
  fv v = g->vals[a];
  if (v.t != T_PRED && fg_chance(g, 250)) {   /* 1 in 4: topk instead */
    fg_topk(g, a);
    return;
  }
  int n = 1 + fg_rn(g, 2), types[2] = { v.t, fg_rand_type(g) }, ops[2] = { a, -1 };
  if (n == 2) ops[1] = fg_get(g, types[1], v.rank, v.d);
  int c = fg_comparator(g, types, n), dim = fg_rn(g, v.rank);
  const char *stable = fg_chance(g, 500) ? ", is_stable=true" : "";
  int lvl = fg_disc(v.lvl);
  if (n == 1) {
    fg_def(g, v.t, v.rank, v.d, lvl);
    fg_sb_add(&g->body, "sort(v%d), dimensions={%d}%s, to_apply=c%d\n", a, dim, stable, c);
    return;
  }
  char s1[128], s2[128];
  fg_shape_str(s1, sizeof s1, v.t, v.rank, v.d);
  fg_shape_str(s2, sizeof s2, types[1], v.rank, v.d);
  int tn = g->nv;
  fg_sb_add(&g->body, "  t%d = (%s, %s) sort(v%d, v%d), dimensions={%d}%s, to_apply=c%d\n", tn, s1, s2, a,
         ops[1], dim, stable, c);
  int e = fg_rn(g, 2);
  fg_def(g, types[e], v.rank, v.d, fg_maxl(lvl, fg_disc(g->vals[ops[1]].lvl)));
  fg_sb_add(&g->body, "get-tuple-element(t%d), index=%d\n", tn, e);
}

/* rng-bit-generator of a u64[2] state (three-fry, philox or the default) into an unsigned
   or signed integer array of 1 to 3 dims: the new state or the bits taken out. */
void fg_op_rng(fg *g) {
  static const int types[] = { T_U8, T_U16, T_U32, T_U64, T_S32, T_S64 };
  static const char *const alg[] = { "rng_default", "rng_three_fry", "rng_philox" };
  int64_t two = 2, d[3];
  int st = fg_get(g, T_U64, 1, &two), rank = 1 + fg_rn(g, 3), t = types[fg_rn(g, 6)];
  for (int i = 0; i < rank; i++) d[i] = 1 + fg_rn(g, 7);
  char s1[128], s2[128];
  fg_shape_str(s1, sizeof s1, T_U64, 1, &two);
  fg_shape_str(s2, sizeof s2, t, rank, d);
  int tn = g->nv, e = fg_rn(g, 4) ? 1 : 0;
  fg_sb_add(&g->body, "  t%d = (%s, %s) rng-bit-generator(v%d), algorithm=%s\n", tn, s1, s2, st, alg[fg_rn(g, 3)]);
  if (e) fg_def(g, t, rank, d, fg_disc(g->vals[st].lvl));
  else fg_def(g, T_U64, 1, &two, fg_disc(g->vals[st].lvl));
  fg_sb_add(&g->body, "get-tuple-element(t%d), index=%d\n", tn, e);
}

void fg_op_map(fg *g) {
  int a = fg_pick(g, NULL);
  fv v = g->vals[a];
  int n = 1 + fg_rn(g, 2), types[2] = { v.t, fg_rand_type(g) }, ops[2] = { a, -1 };
  if (n == 2) ops[1] = fg_get(g, types[1], v.rank, v.d);
  int rt = fg_chance(g, 700) ? v.t : fg_rand_type(g);
  int c = fg_elementwise_comp(g, types, n, 0, NULL, rt);
  int64_t dd[4];
  for (int i = 0; i < v.rank; i++) dd[i] = i;
  char b[64];
  fg_ints_str(b, sizeof b, dd, v.rank);
  int lvl = n == 2 ? fg_maxl(v.lvl, g->vals[ops[1]].lvl) : v.lvl;
  if (lvl && (!fg_is_f(rt) || n == 2)) lvl = fg_disc(lvl);   /* converts inside */
  fg_def(g, rt, v.rank, v.d, lvl);
  fg_sb_add(&g->body, "map(v%d", a);
  if (n == 2) fg_sb_add(&g->body, ", v%d", ops[1]);
  fg_sb_add(&g->body, "), dimensions=%s, to_apply=c%d\n", b, c);
}

/* ---- control flow ------------------------------------------------------------------------ */

void fg_op_call(fg *g) {
  int a = fg_pick(g, NULL);
  fv v = g->vals[a];
  int n = 1 + fg_rn(g, 2), types[2] = { v.t, fg_rand_type(g) }, ops[2] = { a, -1 };
  if (n == 2) ops[1] = fg_get(g, types[1], v.rank, v.d);
  int rt = fg_chance(g, 700) ? v.t : fg_rand_type(g);
  int c = fg_elementwise_comp(g, types, n, v.rank, v.d, rt);
  int lvl = n == 2 ? fg_maxl(v.lvl, g->vals[ops[1]].lvl) : v.lvl;
  if (lvl && (!fg_is_f(rt) || n == 2)) lvl = fg_disc(lvl);
  bool fusion = fg_chance(g, 300);
  fg_def(g, rt, v.rank, v.d, lvl);
  fg_sb_add(&g->body, "%s(v%d", fusion ? "fusion" : "call", a);
  if (n == 2) fg_sb_add(&g->body, ", v%d", ops[1]);
  if (fusion) fg_sb_add(&g->body, "), kind=kLoop, calls=c%d\n", c);
  else fg_sb_add(&g->body, "), to_apply=c%d\n", c);
}

/* An explicit fusion with two outputs, the first a dynamic-update-slice of its operand 0
   (the in-place candidate of ir/inplace.c; 7 in 10 times a value made for it that dies
   at the fusion, so that buffer assignment may update it in place), 3 in 10 times through
   a bitcast to its flat shape. The second output, by kind: 0 an elementwise op of a view
   of the same buffer (its reshape as operand 1), 1 of the same buffer passed twice, 2 of
   fused parameter 0 itself, 3 a dynamic-update-slice of a second value (two in-place
   candidates). Every output must read the buffers as they were before the updates. */
static const char *exact_unary(int t) { return fg_is_f(t) ? "negate" : "not"; }

void fg_op_fusion_update(fg *g) {
  int kind = fg_rn(g, 4), a = fg_pick(g, ge1), b = kind == 3 ? fg_pick(g, ge1) : a;
  const fv x[2] = { g->vals[a], g->vals[b] };
  int nup = kind == 3 ? 2 : 1, u[2], st[2][4], it[2] = { int_type(g), int_type(g) }, lvl[2];
  int64_t sz[4], n = fg_numel(&x[0]);
  char s[2][128], us[2][128], sf[128];
  for (int k = 0; k < nup; k++) {                 /* the updates and their starts */
    lvl[k] = x[k].lvl;
    for (int i = 0; i < x[k].rank; i++) {
      sz[i] = fg_rn(g, (int)x[k].d[i] + 1);
      st[k][i] = start_index(g, it[k]);
      lvl[k] = fg_maxl(lvl[k], fg_disc(g->vals[st[k][i]].lvl));
    }
    u[k] = fg_get(g, x[k].t, x[k].rank, sz);
    lvl[k] = fg_maxl(lvl[k], g->vals[u[k]].lvl);
    fg_shape_str(s[k], sizeof s[k], x[k].t, x[k].rank, x[k].d);
    fg_shape_str(us[k], sizeof us[k], x[k].t, x[k].rank, sz);
  }
  fg_shape_str(sf, sizeof sf, x[0].t, 1, &n);
  const char *s1 = kind == 0 ? sf : kind == 3 ? s[1] : s[0];   /* operand 1 and output 1 */
  int c = g->ncomp++;
  char buf[2][32];                                /* the entry's operands 0 and 1 */
  for (int k = 0; k < 2; k++) {
    int src = k ? b : a;
    if (k && kind != 3) continue;
    if (fg_chance(g, 700)) {
      fg_sb_add(&g->body, "  fb%d_%d = %s %s(v%d)\n", c, k, s[k], exact_unary(x[k].t), src);
      snprintf(buf[k], sizeof buf[k], "fb%d_%d", c, k);
    } else {
      snprintf(buf[k], sizeof buf[k], "v%d", src);
    }
  }
  if (kind == 0) {
    fg_sb_add(&g->body, "  fr%d = %s reshape(%s)\n", c, sf, buf[0]);
    snprintf(buf[1], sizeof buf[1], "fr%d", c);
  } else if (kind == 1) {
    snprintf(buf[1], sizeof buf[1], "%s", buf[0]);
  }
  fg_sb_add(&g->comps, "c%d {\n  c%d_p0 = %s parameter(0)\n", c, c, s[0]);
  if (kind != 2) fg_sb_add(&g->comps, "  c%d_p1 = %s parameter(1)\n", c, s1);
  int pn = kind == 2 ? 1 : 2;
  for (int k = 0; k < nup; k++) {
    fg_sb_add(&g->comps, "  c%d_u%d = %s parameter(%d)\n", c, k, us[k], pn++);
    for (int i = 0; i < x[k].rank; i++) fg_sb_add(&g->comps, "  c%d_s%d_%d = %s[] parameter(%d)\n", c, k, i, tname[it[k]], pn++);
    fg_sb_add(&g->comps, "  c%d_d%d = %s dynamic-update-slice(c%d_p%d, c%d_u%d", c, k, s[k], c, k, c, k);
    for (int i = 0; i < x[k].rank; i++) fg_sb_add(&g->comps, ", c%d_s%d_%d", c, k, i);
    fg_sb_add(&g->comps, ")\n");
  }
  bool flat = fg_chance(g, 300);
  if (flat) fg_sb_add(&g->comps, "  c%d_b = %s bitcast(c%d_d0)\n", c, sf, c);
  if (kind != 3) fg_sb_add(&g->comps, "  c%d_d1 = %s %s(c%d_p%d)\n", c, s1, exact_unary(x[0].t), c, kind == 2 ? 0 : 1);
  fg_sb_add(&g->comps, "  ROOT c%d_r = (%s, %s) tuple(c%d_%s, c%d_d1)\n}\n\n", c, flat ? sf : s[0], s1, c,
            flat ? "b" : "d0", c);
  fg_sb_add(&g->body, "  fu%d = (%s, %s) fusion(%s", c, flat ? sf : s[0], s1, buf[0]);
  if (kind != 2) fg_sb_add(&g->body, ", %s", buf[1]);
  for (int k = 0; k < nup; k++) {
    fg_sb_add(&g->body, ", v%d", u[k]);
    for (int i = 0; i < x[k].rank; i++) fg_sb_add(&g->body, ", v%d", st[k][i]);
  }
  fg_sb_add(&g->body, "), kind=kLoop, calls=c%d\n", c);
  fg_def(g, x[0].t, flat ? 1 : x[0].rank, flat ? &n : x[0].d, lvl[0]);
  fg_sb_add(&g->body, "get-tuple-element(fu%d), index=0\n", c);
  if (kind == 0) fg_def(g, x[0].t, 1, &n, x[0].lvl);
  else fg_def(g, x[kind == 3].t, x[kind == 3].rank, x[kind == 3].d, kind == 3 ? lvl[1] : x[0].lvl);
  fg_sb_add(&g->body, "get-tuple-element(fu%d), index=1\n", c);
  if (!g->nkeep) {   /* the root returns both: the fusion is not dead code */
    g->keep[g->nkeep++] = g->nv - 2;
    g->keep[g->nkeep++] = g->nv - 1;
  }
}

/* while (i < trips) { i += 1; x = x op x } on the state (s32[], x), 0 to 4 trips. */
void fg_op_while(fg *g) {
  int a = fg_pick(g, NULL);
  fv v = g->vals[a];
  char s[128];
  fg_shape_str(s, sizeof s, v.t, v.rank, v.d);
  int cc = g->ncomp++, bc = g->ncomp++, trips = fg_rn(g, 5);
  const char *op = v.t == T_PRED ? "xor" : fg_is_f(v.t) ? (fg_chance(g, 500) ? "add" : "multiply") : "add";
  fg_sb_add(&g->comps, "c%d {\n  c%d_s = (s32[], %s) parameter(0)\n  c%d_i = s32[] get-tuple-element(c%d_s), index=0\n"
         "  c%d_n = s32[] constant(%d)\n  ROOT c%d_r = pred[] compare(c%d_i, c%d_n), direction=LT\n}\n\n",
         cc, cc, s, cc, cc, cc, trips, cc, cc, cc);
  fg_sb_add(&g->comps, "c%d {\n  c%d_s = (s32[], %s) parameter(0)\n  c%d_i = s32[] get-tuple-element(c%d_s), index=0\n"
         "  c%d_x = %s get-tuple-element(c%d_s), index=1\n  c%d_one = s32[] constant(1)\n"
         "  c%d_i1 = s32[] add(c%d_i, c%d_one)\n  c%d_y = %s %s(c%d_x, c%d_x)\n"
         "  ROOT c%d_r = (s32[], %s) tuple(c%d_i1, c%d_y)\n}\n\n",
         bc, bc, s, bc, bc, bc, s, bc, bc, bc, bc, bc, bc, s, op, bc, bc, bc, s, bc, bc);
  int z = fg_def(g, T_S32, 0, NULL, FHG_EXACT);
  fg_sb_add(&g->body, "constant(0)\n");
  int tn = g->nv;
  fg_sb_add(&g->body, "  t%d = (s32[], %s) tuple(v%d, v%d)\n", tn, s, z, a);
  fg_sb_add(&g->body, "  w%d = (s32[], %s) while(t%d), condition=c%d, body=c%d\n", tn, s, tn, cc, bc);
  fg_def(g, v.t, v.rank, v.d, v.lvl);
  fg_sb_add(&g->body, "get-tuple-element(w%d), index=1\n", tn);
  g->has_while = true;
}

void fg_op_conditional(fg *g) {
  int a = fg_pick(g, NULL);
  fv v = g->vals[a];
  int nb = fg_chance(g, 500) ? 2 : 2 + fg_rn(g, 2);
  bool pred = nb == 2 && fg_chance(g, 500);
  int sel = pred ? fg_get(g, T_PRED, 0, NULL) : start_index(g, T_S32);
  int ops[3], br[3], types[1] = { v.t };
  int lvl = fg_disc(g->vals[sel].lvl);
  for (int i = 0; i < nb; i++) {
    ops[i] = i == 0 ? a : fg_get(g, v.t, v.rank, v.d);
    br[i] = fg_elementwise_comp(g, types, 1, v.rank, v.d, v.t);
    lvl = fg_maxl(lvl, g->vals[ops[i]].lvl);
  }
  fg_def(g, v.t, v.rank, v.d, lvl);
  fg_sb_add(&g->body, "conditional(v%d", sel);
  for (int i = 0; i < nb; i++) fg_sb_add(&g->body, ", v%d", ops[i]);
  if (pred) fg_sb_add(&g->body, "), true_computation=c%d, false_computation=c%d\n", br[0], br[1]);
  else {
    fg_sb_add(&g->body, "), branch_computations={");
    for (int i = 0; i < nb; i++) fg_sb_add(&g->body, "%sc%d", i ? ", " : "", br[i]);
    fg_sb_add(&g->body, "}\n");
  }
}

void fg_op_tuple_misc(fg *g) {
  int a = fg_pick(g, NULL), b = fg_pick(g, NULL);
  fv v = g->vals[a], w = g->vals[b];
  char s1[128], s2[128];
  fg_shape_str(s1, sizeof s1, v.t, v.rank, v.d);
  fg_shape_str(s2, sizeof s2, w.t, w.rank, w.d);
  int tn = g->nv, e = fg_rn(g, 2);
  fg_sb_add(&g->body, "  t%d = (%s, %s) tuple(v%d, v%d)\n", tn, s1, s2, a, b);
  if (fg_chance(g, 500)) {
    fg_sb_add(&g->body, "  o%d = (%s, %s) opt-barrier(t%d)\n", tn, s1, s2, tn);
    fg_def(g, e ? w.t : v.t, e ? w.rank : v.rank, e ? w.d : v.d, e ? w.lvl : v.lvl);
    fg_sb_add(&g->body, "get-tuple-element(o%d), index=%d\n", tn, e);
    return;
  }
  fg_def(g, e ? w.t : v.t, e ? w.rank : v.rank, e ? w.d : v.d, e ? w.lvl : v.lvl);
  fg_sb_add(&g->body, "get-tuple-element(t%d), index=%d\n", tn, e);
}
