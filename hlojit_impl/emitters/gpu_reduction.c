/* gpu_reduction.c — the GPU reduction emitter. The analysis is the CPU emitter's
   (reduction.c, through reduction_plan.h: heroes, their order, output leaves, overrides), so
   both accept the same fusions; the thread mappings are the GPU's:

   ROW (every hero reduces its minor-most dims, and reassociating is legal — the CPU's lane
   rule: one result, a reducer that is exactly add/multiply/maximum/minimum/and/or, integer or
   pred of any of them, f32/f64 but and/or, f16/bf16 maximum/minimum only). A row (kept
   index) is reduced by W threads: a warp (W = 32, 8 rows per block of 256: multi-row, for
   rows up to 2048 elements) or a whole block (W = 256, one row per block, for longer rows).
   Per hero, in dependency order:
     1. thread l folds elements l, l+W, l+2W, ... of the row in that order (a warp reads 32
        consecutive elements per step: coalesced); side outputs of the input's shape are
        stored as their element is visited (once each);
     2. warp tree: for s = 16, 8, 4, 2, 1: p[l] = reducer(p[l], p[l+s]) through shfl.sync.down
        (each partial carries a valid flag: a row shorter than W leaves lanes empty); lane 0
        has the warp's partial. Block mode: lane 0 of each warp puts it in shared memory,
        bar.sync, warp 0 folds the 8 partials by the same tree, lane 0 adds the init
        (v = reducer(init, tree)), shared memory and bar.sync hand it to every thread;
        warp mode: lane 0 adds the init and shfl.sync.idx broadcasts it;
     3. the value is the hero's override from now on (a later hero reading it, layer norm's
        variance reading the mean, gets the row value, as on the CPU).
   Then lane 0 stores the kept-shape leaves (the reduce, its epilogue), and the row's W
   threads produce every input-shape leaf that reads a hero (softmax's exp(x - max) / sum) at
   elements l, l+W, ...: coalesced again. The tree's shape depends only on W, so every run
   gives the same bits (not the evaluator's order: results differ from it by rounding, as
   the CPU's lanes do). The output pass computes softmax's exp(x - max) again rather than
   using the CPU emitter's stash (reduction.c: the value stored during the reduce pass and
   loaded back): here the recomputation costs a few SFU instructions of a memory-bound
   kernel, the stash an extra global store per element; not changed without a GPU to
   measure it.

   COLUMN (every hero reduces its major dims into minor kept columns, reassociation legal,
   no hero reads another, no input-shape leaf reads one — the CPU's column strategy): blocks
   of 32 columns x 8 row groups; thread (tx, ty) folds rows ty, ty+8, ... of column c0+tx
   (a warp reads 32 consecutive columns of a row: coalesced), the 8 partials go through a
   shared tile [8][33], bar.sync, and the ty = 0 threads fold them in order ty = 0..7 with
   the init first, then store the column's leaves.

   THREAD (everything else: reduced dims in the middle, variadic reducers such as argmax,
   f16 sums, a column fusion with a hero reading another): one thread per kept index visits
   its K elements sequentially in row-major order from the init — the evaluator's order,
   the same bits as the evaluator — then stores its leaves (and input-shape leaves, element
   by element). For columns this is still coalesced (neighbouring threads, neighbouring
   columns).

   Walk-through, softmax over f32[64,768] rows (two heroes: max, then sum of exp(x - max)):
   ROW in warp mode, 8 blocks of 8 warps; warp w of block 3 has row 27: lane l folds
   max over x[27, l + 32i], i < 24; tree; lane 0 max(init, tree) -> shfl to all -> override;
   lane l folds exp(x[27, l + 32i] - m) the same way; override; lane l writes
   out[27, l + 32i] = exp(x - m) / s. */
#include "gpu_internal.h"
#include "reduction_plan.h"
#include <stdlib.h>

enum { GRD_ROW, GRD_COLUMN, GRD_THREAD };

typedef struct grd {
  emit_fn *f;
  const emitp_red_plan *p;
  int mode, W, rows_per_block;          /* ROW: threads per row, rows per block */
  LLVMValueRef lane, warp, r;           /* i64: lane in the row's group, warp in block, row */
  emit_index kidx;                      /* the kept index */
  LLVMValueRef hv[EMITP_RED_MAX_HEROES][EMITP_RED_MAX_N];
} grd;

/* ---- legality ---------------------------------------------------------------------------- */

static bool grd_assoc(const emitp_red_hero *h) {
  bool sw = false;
  if (h->n != 1) return false;
  hlo_opcode op = hlo_binary_reducer(h->ins->calls[0], h->types[0], &sw);
  if (op == HLO_OP_COUNT) return false;
  hlo_type t = h->types[0];
  bool minmax = op == HLO_OP_MAXIMUM || op == HLO_OP_MINIMUM;
  return t == HLO_PRED || hlo_type_is_int(t) ||
         ((t == HLO_F32 || t == HLO_F64) && op != HLO_OP_AND && op != HLO_OP_OR) ||
         ((t == HLO_F16 || t == HLO_BF16) && minmax);
}

/* ---- per-element helpers ------------------------------------------------------------------ */

/* Hero |h|'s input index: kept dims from |kidx|, reduced dims from the row-major linear
   reduced index |rlin|. */
static void grd_in_index(emit_fn *f, const emitp_red_hero *h, const emit_index *kidx, LLVMValueRef rlin,
                         emit_index *out) {
  emitp_red_in_index(f, &h->ins->operands[0]->shape, h->reduced, kidx, rlin, out);
}

/* Hero |hi|'s inputs at |idx| into x[], storing its INPUT side outputs there. */
static void grd_visit(grd *g, int hi, const emit_index *idx, LLVMValueRef *x) {
  emit_fn *f = g->f;
  const emitp_red_hero *h = &g->p->h[hi];
  for (int j = 0; j < h->n; j++) x[j] = emit_elemental(f, h->ins->operands[j], idx);
  for (int i = 0; i < g->p->nleaves; i++) {
    const emitp_red_leaf *l = &g->p->leaf[i];
    if (l->kind != EMITP_LEAF_INPUT || l->hero != hi) continue;
    emit_store_elem(f, l->type, f->outs[i], emit_linear_index(f, &l->shape, idx), emit_elemental(f, l->ins, idx));
  }
}

static void grd_apply(emit_fn *f, const emitp_red_hero *h, LLVMValueRef *acc, const LLVMValueRef *x) {
  LLVMValueRef args[2 * EMITP_RED_MAX_N];
  for (int j = 0; j < h->n; j++) args[j] = acc[j], args[h->n + j] = x[j];
  emit_scalar_call(f, h->ins->calls[0], args, 2 * h->n, acc, h->n);
}

static void grd_inits(emit_fn *f, const emitp_red_hero *h, LLVMValueRef *init) {
  emit_index scalar = { .rank = 0 };
  for (int j = 0; j < h->n; j++) init[j] = emit_elemental(f, h->ins->operands[h->n + j], &scalar);
}

static LLVMValueRef grd_slot(emit_fn *f, LLVMTypeRef t, const char *name) { return emitp_entry_alloca(f, t, name); }

/* Hero |h| overridden with |hv| for every read of it from now on. */
static void grd_override(grd *g, int h) {
  emit_fn *f = g->f;
  const emitp_red_plan *p = g->p;
  for (int i = 0; i < p->nov; i++) {
    if (p->ov_hero[i] != h) continue;
    if (!f->override_ins) {
      f->override_ins = p->ov[i], f->override_val = g->hv[h][p->ov_k[i]];
    } else if (f->noverrides < 8) {
      f->override_ins2[f->noverrides] = p->ov[i];
      f->override_val2[f->noverrides++] = g->hv[h][p->ov_k[i]];
    }
  }
  emit_cache_clear(f);
}

/* DIRECT and KEPT leaves at the kept index (linear |klin|). */
static void grd_kept_leaves(grd *g, LLVMValueRef klin) {
  emit_fn *f = g->f;
  for (int i = 0; i < g->p->nleaves; i++) {
    const emitp_red_leaf *l = &g->p->leaf[i];
    if (l->kind == EMITP_LEAF_DIRECT)
      emit_store_elem(f, l->type, f->outs[i], klin, g->hv[l->hero][l->k]);
    else if (l->kind == EMITP_LEAF_KEPT)
      emit_store_elem(f, l->type, f->outs[i], klin, emit_elemental(f, l->ins, &g->kidx));
  }
}

/* FULL leaves at the row's elements start, start+step, ... < K of each input shape. */
static void grd_full_leaves(grd *g, LLVMValueRef start, int64_t step) {
  emit_fn *f = g->f;
  const emitp_red_plan *p = g->p;
  for (int hi = 0; hi < p->nh; hi++) {
    int first = -1;
    for (int i = 0; i < p->nleaves && first < 0; i++)
      if (p->leaf[i].kind == EMITP_LEAF_FULL && p->leaf[i].hero == hi) first = i;
    if (first < 0) continue;
    const emitp_red_hero *h = &p->h[hi];
    emit_loop l;
    emit_loop_begin(f, &l, start, emit_i64(f, h->K), step, "full");
    emit_index idx;
    grd_in_index(f, h, &g->kidx, l.iv, &idx);
    LLVMValueRef lin = emit_linear_index(f, &h->ins->operands[0]->shape, &idx);
    for (int i = first; i < p->nleaves; i++) {
      const emitp_red_leaf *lf = &p->leaf[i];
      if (lf->kind == EMITP_LEAF_FULL && lf->hero == hi)
        emit_store_elem(f, lf->type, f->outs[i], lin, emit_elemental(f, lf->ins, &idx));
    }
    emit_loop_end(f, &l);
  }
}

/* ---- THREAD: sequential per kept index ----------------------------------------------------- */

static void grd_sequential(grd *g, int hi) {
  emit_fn *f = g->f;
  LLVMBuilderRef b = f->em->b;
  const emitp_red_hero *h = &g->p->h[hi];
  LLVMValueRef init[EMITP_RED_MAX_N], slot[EMITP_RED_MAX_N], acc[EMITP_RED_MAX_N], x[EMITP_RED_MAX_N];
  LLVMTypeRef ct[EMITP_RED_MAX_N];
  grd_inits(f, h, init);
  for (int j = 0; j < h->n; j++) {
    ct[j] = emit_compute_type(f->em, h->types[j]);
    slot[j] = grd_slot(f, ct[j], "seq.acc");
    LLVMBuildStore(b, init[j], slot[j]);
  }
  emit_loop l;
  emit_loop_begin(f, &l, emit_i64(f, 0), emit_i64(f, h->K), 1, "seq");
  emit_index idx;
  grd_in_index(f, h, &g->kidx, l.iv, &idx);
  grd_visit(g, hi, &idx, x);
  for (int j = 0; j < h->n; j++) acc[j] = LLVMBuildLoad2(b, ct[j], slot[j], "acc");
  grd_apply(f, h, acc, x);
  for (int j = 0; j < h->n; j++) LLVMBuildStore(b, acc[j], slot[j]);
  emit_loop_end(f, &l);
  for (int j = 0; j < h->n; j++) g->hv[hi][j] = LLVMBuildLoad2(b, ct[j], slot[j], "v");
}

/* ---- ROW: a warp or a block per row -------------------------------------------------------- */

/* (acc, valid) combined with the partial |off| lanes up: lanes < off keep what matters. */
static void grd_shfl_step(grd *g, const emitp_red_hero *h, LLVMValueRef *acc, LLVMValueRef *valid, int off) {
  emit_fn *f = g->f;
  LLVMBuilderRef b = f->em->b;
  LLVMValueRef o = emitg_shfl_down(f, *acc, off);
  LLVMValueRef ov = emitg_shfl_down(f, *valid, off);
  LLVMValueRef c = *acc;
  grd_apply(f, h, &c, &o);
  LLVMValueRef both = LLVMBuildSelect(b, *valid, c, o, "");
  *acc = LLVMBuildSelect(b, ov, both, *acc, "");
  *valid = LLVMBuildOr(b, *valid, ov, "");
}

static void grd_warp_tree(grd *g, const emitp_red_hero *h, LLVMValueRef *acc, LLVMValueRef *valid) {
  for (int off = EMITG_WARP / 2; off >= 1; off /= 2) grd_shfl_step(g, h, acc, valid, off);
}

/* v = valid ? reducer(init, acc) : init */
static LLVMValueRef grd_with_init(grd *g, const emitp_red_hero *h, LLVMValueRef acc, LLVMValueRef valid) {
  emit_fn *f = g->f;
  LLVMValueRef init = NULL;
  grd_inits(f, h, &init);
  LLVMValueRef v = init;
  grd_apply(f, h, &v, &acc);
  return LLVMBuildSelect(f->em->b, valid, v, init, "rowv");
}

static void grd_row_hero(grd *g, int hi) {
  emit_fn *f = g->f;
  emit_module *em = f->em;
  LLVMBuilderRef b = em->b;
  const emitp_red_hero *h = &g->p->h[hi];
  LLVMTypeRef ct = emit_compute_type(em, h->types[0]);
  LLVMValueRef acc_s = grd_slot(f, ct, "acc"), valid_s = grd_slot(f, em->t_i1, "valid"), x;
  LLVMBuildStore(b, LLVMGetUndef(ct), acc_s);
  LLVMBuildStore(b, LLVMConstInt(em->t_i1, 0, 0), valid_s);
  /* 1. the thread's elements lane, lane + W, ... in order */
  emit_loop l;
  emit_loop_begin(f, &l, g->lane, emit_i64(f, h->K), g->W, "row");
  emit_index idx;
  grd_in_index(f, h, &g->kidx, l.iv, &idx);
  grd_visit(g, hi, &idx, &x);
  LLVMValueRef a = LLVMBuildLoad2(b, ct, acc_s, "a"), v = LLVMBuildLoad2(b, em->t_i1, valid_s, "v");
  LLVMValueRef c = a;
  grd_apply(f, h, &c, &x);
  LLVMBuildStore(b, LLVMBuildSelect(b, v, c, x, ""), acc_s);
  LLVMBuildStore(b, LLVMConstInt(em->t_i1, 1, 0), valid_s);
  emit_loop_end(f, &l);
  LLVMValueRef acc = LLVMBuildLoad2(b, ct, acc_s, "a"), valid = LLVMBuildLoad2(b, em->t_i1, valid_s, "v");
  /* 2. the warp's tree */
  grd_warp_tree(g, h, &acc, &valid);
  LLVMValueRef lane32 = LLVMBuildTrunc(b, LLVMBuildURem(b, g->lane, emit_i64(f, EMITG_WARP), ""), em->t_i32, "");
  if (g->W == EMITG_WARP) {
    LLVMValueRef rv = grd_with_init(g, h, acc, valid);
    g->hv[hi][0] = emitg_shfl_idx(f, rv, emit_i32(f, 0));
    (void)lane32;
    return;
  }
  /* block: warp partials through shared memory, folded by warp 0 */
  int nw = g->W / EMITG_WARP;
  bool bit = ct == em->t_i1;
  LLVMTypeRef mt = bit ? em->t_i8 : ct;
  char nm[32];
  snprintf(nm, sizeof nm, "part%d", hi);
  LLVMValueRef part = emitg_shared(f, mt, (uint64_t)nw + 1, nm);
  snprintf(nm, sizeof nm, "pvalid%d", hi);
  LLVMValueRef pval = emitg_shared(f, em->t_i8, (uint64_t)nw, nm);
  emitg_region rg;
  emitg_if_begin(f, &rg, LLVMBuildICmp(b, LLVMIntEQ, lane32, emit_i32(f, 0), ""), "wlead");
  LLVMBuildStore(b, bit ? LLVMBuildZExt(b, acc, mt, "") : acc, emitg_shared_ptr(f, mt, part, g->warp));
  LLVMBuildStore(b, LLVMBuildZExt(b, valid, em->t_i8, ""), emitg_shared_ptr(f, em->t_i8, pval, g->warp));
  emitg_if_end(f, &rg);
  emitg_barrier(f);
  emitg_if_begin(f, &rg, LLVMBuildICmp(b, LLVMIntEQ, g->warp, emit_i64(f, 0), ""), "w0");
  LLVMValueRef li = LLVMBuildZExt(b, lane32, em->t_i64, "");
  LLVMValueRef inw = LLVMBuildICmp(b, LLVMIntULT, li, emit_i64(f, nw), "");
  LLVMValueRef lc = LLVMBuildSelect(b, inw, li, emit_i64(f, 0), "");
  LLVMValueRef pa = LLVMBuildLoad2(b, mt, emitg_shared_ptr(f, mt, part, lc), "pa");
  LLVMValueRef pv = LLVMBuildLoad2(b, em->t_i8, emitg_shared_ptr(f, em->t_i8, pval, lc), "pv");
  LLVMValueRef a2 = bit ? LLVMBuildTrunc(b, pa, em->t_i1, "") : pa;
  LLVMValueRef v2 = LLVMBuildAnd(b, inw, LLVMBuildICmp(b, LLVMIntNE, pv, LLVMConstInt(em->t_i8, 0, 0), ""), "");
  grd_warp_tree(g, h, &a2, &v2);
  LLVMValueRef rv = grd_with_init(g, h, a2, v2);
  emitg_region r0;
  emitg_if_begin(f, &r0, LLVMBuildICmp(b, LLVMIntEQ, lane32, emit_i32(f, 0), ""), "bcast");
  LLVMBuildStore(b, bit ? LLVMBuildZExt(b, rv, mt, "") : rv, emitg_shared_ptr(f, mt, part, emit_i64(f, nw)));
  emitg_if_end(f, &r0);
  emitg_if_end(f, &rg);
  emitg_barrier(f);
  LLVMValueRef res = LLVMBuildLoad2(b, mt, emitg_shared_ptr(f, mt, part, emit_i64(f, nw)), "rowv");
  g->hv[hi][0] = bit ? LLVMBuildTrunc(b, res, em->t_i1, "") : res;
}

/* ---- COLUMN: 32 columns x 8 row groups per block --------------------------------------------- */

#define GRD_CW 32
#define GRD_CR 8

static void grd_column(grd *g, LLVMValueRef c, LLVMValueRef cin, LLVMValueRef ty, LLVMValueRef tx) {
  emit_fn *f = g->f;
  emit_module *em = f->em;
  LLVMBuilderRef b = em->b;
  const emitp_red_plan *p = g->p;
  for (int hi = 0; hi < p->nh; hi++) {
    const emitp_red_hero *h = &p->h[hi];
    LLVMTypeRef ct = emit_compute_type(em, h->types[0]);
    bool bit = ct == em->t_i1;
    LLVMTypeRef mt = bit ? em->t_i8 : ct;
    char nm[32];
    snprintf(nm, sizeof nm, "ctile%d", hi);
    LLVMValueRef tile = emitg_shared(f, mt, GRD_CR * (GRD_CW + 1), nm);
    snprintf(nm, sizeof nm, "cvalid%d", hi);
    LLVMValueRef tval = emitg_shared(f, em->t_i8, GRD_CR * (GRD_CW + 1), nm);
    LLVMValueRef acc_s = grd_slot(f, ct, "cacc"), valid_s = grd_slot(f, em->t_i1, "cvalid"), x;
    LLVMBuildStore(b, LLVMGetUndef(ct), acc_s);
    LLVMBuildStore(b, LLVMConstInt(em->t_i1, 0, 0), valid_s);
    emitg_region rg;
    emitg_if_begin(f, &rg, cin, "col");
    emit_loop l;
    emit_loop_begin(f, &l, ty, emit_i64(f, h->K), GRD_CR, "colk");
    emit_index idx;
    grd_in_index(f, h, &g->kidx, l.iv, &idx);
    grd_visit(g, hi, &idx, &x);
    LLVMValueRef a = LLVMBuildLoad2(b, ct, acc_s, "a"), v = LLVMBuildLoad2(b, em->t_i1, valid_s, "v");
    LLVMValueRef cc = a;
    grd_apply(f, h, &cc, &x);
    LLVMBuildStore(b, LLVMBuildSelect(b, v, cc, x, ""), acc_s);
    LLVMBuildStore(b, LLVMConstInt(em->t_i1, 1, 0), valid_s);
    emit_loop_end(f, &l);
    emitg_if_end(f, &rg);
    LLVMValueRef slot = LLVMBuildAdd(b, LLVMBuildMul(b, ty, emit_i64(f, GRD_CW + 1), ""), tx, "slot");
    LLVMValueRef acc = LLVMBuildLoad2(b, ct, acc_s, "a");
    LLVMBuildStore(b, bit ? LLVMBuildZExt(b, acc, mt, "") : acc, emitg_shared_ptr(f, mt, tile, slot));
    LLVMBuildStore(b, LLVMBuildZExt(b, LLVMBuildLoad2(b, em->t_i1, valid_s, "v"), em->t_i8, ""),
                   emitg_shared_ptr(f, em->t_i8, tval, slot));
    emitg_barrier(f);
    /* row group 0 folds the 8 partials of its column, in order, the init first */
    LLVMValueRef init = NULL;
    grd_inits(f, h, &init);
    LLVMValueRef fold = init;
    for (int r = 0; r < GRD_CR; r++) {
      LLVMValueRef sr = LLVMBuildAdd(b, emit_i64(f, r * (GRD_CW + 1)), tx, "");
      LLVMValueRef pa = LLVMBuildLoad2(b, mt, emitg_shared_ptr(f, mt, tile, sr), "pa");
      LLVMValueRef pv = LLVMBuildLoad2(b, em->t_i8, emitg_shared_ptr(f, em->t_i8, tval, sr), "pv");
      LLVMValueRef px = bit ? LLVMBuildTrunc(b, pa, em->t_i1, "") : pa, nv = fold;
      grd_apply(f, h, &nv, &px);
      fold = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntNE, pv, LLVMConstInt(em->t_i8, 0, 0), ""), nv, fold, "");
    }
    g->hv[hi][0] = fold;
  }
  for (int hi = 0; hi < p->nh; hi++) grd_override(g, hi);
  emitg_region out;
  emitg_if_begin(f, &out, LLVMBuildAnd(b, cin, LLVMBuildICmp(b, LLVMIntEQ, ty, emit_i64(f, 0), ""), ""), "cstore");
  /* the override values were made before this block: still dominate */
  grd_kept_leaves(g, c);
  emitg_if_end(f, &out);
}

/* ---- entry point ------------------------------------------------------------------------------ */

hj_status emitg_reduction(emit_module *em, const hlo_instr *fusion, const hlo_instr *hero,
                          const char *name, emit_kernel *out) {
  (void)hero;
  memset(out, 0, sizeof *out);
  emitp_red_plan *p = calloc(1, sizeof *p);
  if (!p) return hj__err(em->ctx, HJ_ERR_OOM, "GPU reduction emitter: out of memory");
  hj_status st = emitp_red_plan_make(em, fusion, p);
  if (st) {
    free(p);
    return st;
  }
  grd g = { .p = p, .mode = GRD_ROW };
  bool assoc = true, row = true;
  int64_t maxK = 0;
  for (int h = 0; h < p->nh; h++) {
    assoc &= grd_assoc(&p->h[h]);
    row &= p->h[h].row;
    if (p->h[h].K > maxK) maxK = p->h[h].K;
  }
  int64_t R = hlo_shape_numel(&p->kept);
  if (!assoc || maxK == 0) g.mode = GRD_THREAD;
  else if (p->column) g.mode = GRD_COLUMN;
  else if (!row) g.mode = GRD_THREAD;
  if (g.mode == GRD_ROW) {
    g.W = maxK > 2048 ? 256 : EMITG_WARP;
    g.rows_per_block = g.W == EMITG_WARP ? 8 : 1;
  }
  int block = 256;
  int64_t blocks;
  if (g.mode == GRD_ROW) blocks = (R + g.rows_per_block - 1) / g.rows_per_block;
  else if (g.mode == GRD_COLUMN) blocks = (R + GRD_CW - 1) / GRD_CW;
  else {
    block = R >= 256 ? 256 : (int)((R + 31) / 32 * 32);
    if (block < 32) block = 32;
    blocks = (R + block - 1) / block;
  }
  emit_fn f;
  st = emitg_kernel_begin(&f, em, name, fusion, -1, block);
  if (st) {
    free(p);
    return st;
  }
  g.f = &f;
  LLVMBuilderRef b = em->b;
  if (f.nouts != p->nleaves) emit_fail(&f, HJ_ERR_INTERNAL, "%d output buffers, %d output leaves", f.nouts, p->nleaves);
  if (R > 0 && f.status == HJ_OK) {
    LLVMValueRef tid = emitg_sreg64(&f, "tid.x"), blk = emitg_sreg64(&f, "ctaid.x");
    if (g.mode == GRD_ROW) {
      g.warp = LLVMBuildUDiv(b, tid, emit_i64(&f, EMITG_WARP), "warp");
      g.lane = g.W == EMITG_WARP ? LLVMBuildURem(b, tid, emit_i64(&f, EMITG_WARP), "lane") : tid;
      g.r = g.W == EMITG_WARP ? LLVMBuildNUWAdd(b, LLVMBuildNUWMul(b, blk, emit_i64(&f, 8), ""), g.warp, "r") : blk;
      /* whole warps (warp mode) or whole blocks (block mode) share a row: the shuffles and
         barriers inside see every thread of their group */
      emitg_region rr;
      bool guard = g.W == EMITG_WARP && R % 8 != 0;
      if (guard) emitg_if_begin(&f, &rr, LLVMBuildICmp(b, LLVMIntULT, g.r, emit_i64(&f, R), ""), "rowin");
      emit_delinearize(&f, &p->kept, g.r, &g.kidx);
      for (int o = 0; o < p->nh; o++) {
        int h = p->order[o];
        grd_row_hero(&g, h);
        grd_override(&g, h);
      }
      emitg_region r0;
      emitg_if_begin(&f, &r0, LLVMBuildICmp(b, LLVMIntEQ, g.lane, emit_i64(&f, 0), ""), "lead");
      grd_kept_leaves(&g, g.r);
      emitg_if_end(&f, &r0);
      if (p->full) grd_full_leaves(&g, g.lane, g.W);
      if (guard) emitg_if_end(&f, &rr);
    } else if (g.mode == GRD_COLUMN) {
      LLVMValueRef tx = LLVMBuildURem(b, tid, emit_i64(&f, GRD_CW), "tx");
      LLVMValueRef ty = LLVMBuildUDiv(b, tid, emit_i64(&f, GRD_CW), "ty");
      LLVMValueRef c = LLVMBuildNUWAdd(b, LLVMBuildNUWMul(b, blk, emit_i64(&f, GRD_CW), ""), tx, "c");
      LLVMValueRef cin = LLVMBuildICmp(b, LLVMIntULT, c, emit_i64(&f, R), "cin");
      LLVMValueRef cc = LLVMBuildSelect(b, cin, c, emit_i64(&f, 0), "cc");   /* a valid index */
      emit_delinearize(&f, &p->kept, cc, &g.kidx);
      grd_column(&g, cc, cin, ty, tx);
    } else {
      LLVMValueRef r = LLVMBuildNUWAdd(b, LLVMBuildNUWMul(b, blk, emit_i64(&f, block), ""), tid, "r");
      emitg_region rr;
      emitg_if_begin(&f, &rr, LLVMBuildICmp(b, LLVMIntULT, r, emit_i64(&f, R), ""), "kin");
      emit_delinearize(&f, &p->kept, r, &g.kidx);
      for (int o = 0; o < p->nh; o++) {
        int h = p->order[o];
        grd_sequential(&g, h);
        grd_override(&g, h);
      }
      grd_kept_leaves(&g, r);
      if (p->full) grd_full_leaves(&g, emit_i64(&f, 0), 1);
      emitg_if_end(&f, &rr);
    }
    f.override_ins = NULL;
    f.noverrides = 0;
  }
  st = emit_kernel_end(&f);
  free(p);
  if (st) return st;
  snprintf(out->name, sizeof out->name, "%s", name);
  out->kind = EMIT_KIND_REDUCTION;
  out->parallel_n = R;
  out->grain = 1;
  emitg_launch_1d(out, (blocks > 0 ? blocks : 1) * block, block);
  return HJ_OK;
}

#undef GRD_CW
#undef GRD_CR
