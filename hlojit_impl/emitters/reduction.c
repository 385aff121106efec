/* reduction.c — the reduction emitter: a fusion whose heroes are reduces (several, with one
   kept shape, possibly variadic, possibly one reading another), with elementwise epilogues,
   side outputs and row normalisations (softmax, layer norm), as one kernel
   `void NAME(void **bufs, i64 begin, i64 end)`.

   Vocabulary: the *kept* dims of a reduce are the input dims that survive (the result's
   dims), the *reduced* dims are dimensions={...}; K = product of the reduced dims. A *row*
   is one kept index; the reduce *input shape* holds K elements per row.

   Two strategies, chosen for the whole fusion:
   - per kept index ("row" and "general"): parallel over the kept linear index r. For each r
     the heroes are computed in dependency order (a reduce whose input reads another
     reduce comes after it), each over its K reduced elements; from then on the elemental
     emitter takes the hero's row value for every read of it (emit_fn.override_ins/_val and
     override_ins2/_val2: every reduce, every get-tuple-element of a variadic one). Then
     every kept-shape output leaf is produced at r (log(reduce(..)) fuses), and every
     input-shape leaf that reads a hero is produced at each of the row's K elements.
     Walk-through, f32[1000,4099] reduce dims={1} add, AVX-512 (W = 64/4 = 16 lanes):
       parallel_n = 1000 (kept rows); the runtime gives kernel(bufs, 0, 500) and (500, 1000).
       row r: acc[l] = x[r, l] for l < 16                      (first chunk, no init)
              for j0 = 16, 32, ..., 4080: acc[l] = acc[l] + x[r, j0 + l]   (16 chains;
                acc is one <16 x float> value and the update one vector op, emitted
                directly with the reducer's per-lane semantics: red_vec_op; the 16 inputs
                come from a loop over the lanes that LLVM vectorises: red_vec_inputs)
              tree: acc[l] += acc[l + 8] (l < 8), += acc[l + 4], += acc[l + 2], += acc[l + 1]
              v = init + acc[0]; then v = v + x[r, 4096], x[r, 4097], x[r, 4098]  (remainder)
              out[r] = epilogue(v)
     Walk-through, layer norm of x: f32[64,768] (mean = s/768, s = sum(x); q = sum((x -
     bcast(mean))^2); y = (x - bcast(mean)) * bcast(rsqrt(q/768 + eps)) * bcast(g) + bcast(b)):
       parallel_n = 64; row r: s = lanes sum of x[r, :]; override s := that value;
       q = lanes sum of (x[r, j] - s/768)^2 (its input reads s: the override gives the row
       value, no nested reduction); override q; then for j = 0..767:
       y[r, j] = root at (r, j) with s and q overridden (a plain loop LLVM vectorises).
       Two passes over the row for the reduces and one for the output: 3 * 768 element
       evaluations per row, where the loop emitter re-reduced per element (768 x 768 x 2).
     The override ignores the index it is read at, so every read of a hero must be at the
     row's own kept index: red_check_reads proves it symbolically (through elementwise ops,
     broadcasts, transposes and size-1 reshapes) or the fusion is refused.
     The order depends only on K and W (compile-time constants), never on [begin, end), so
     every thread count gives the same bits. The lanes are used only when reassociating is
     legal: a reducer that is exactly add/multiply/maximum/minimum/and/or of its two
     parameters (hlo_binary_reducer), reduced dims the minor-most ones, K >= W, and the
     type an integer or pred (exact: wrap-around arithmetic is associative), or f32/f64
     (add/multiply: results differ from the evaluator's sequential order by rounding, about
     eps * sqrt(K) relative to the sum of |x|; maximum/minimum: exact except possibly the
     sign of a zero result), or f16/bf16 for maximum/minimum only (16-bit sums round at every
     step, so they keep the evaluator's order exactly). Otherwise ("general": reduced dims in
     the middle, variadic reducers such as argmax, any other reducer) the reduced elements
     are visited sequentially in row-major order from the init: the evaluator's order, the
     same bits as the evaluator.
   - column (every hero's reduced dims are major and its kept dims minor, e.g. f32[4096,512]
     dims={0}; no reduce reads another, no input-shape leaf reads one): parallel over blocks
     of CB kept columns (per outer kept index; CB = 512, halved down to 64 while there are
     fewer than 16 blocks, so small outputs still split). A block keeps acc[c] (a stack array)
     and walks the reduced rows k = 0..K-1, updating acc[c] = f(acc[c], x[k, c]) for its
     columns: a unit-stride inner loop that LLVM vectorises, and per column exactly the
     evaluator's sequential order (same bits).
   Reduce to a scalar runs as one kept index: single-threaded (a deterministic parallel
   split needs scratch for per-block partials, which the kernel ABI has not got).

   Output leaves (the fusion's root, tuples flattened depth first), each one of:
   DIRECT  a hero's result (or get-tuple-element of a variadic hero);
   KEPT    kept shape, any function of the heroes' row values (or of none);
   INPUT   a hero's input shape, reading no hero (a side output such as exp(x) next to
           reduce(x): stored while the reduction visits that input element, once each);
   FULL    a hero's input shape, reading heroes (softmax's exp(x - max) / sum): produced in a
           loop over the row's elements after the heroes.
   Anything else is HJ_ERR_UNSUPPORTED (the runtime then runs the loop emitter or the
   evaluator on this fusion).

   The stash (red_find_stashes): softmax's fusion reads e = exp(x - max) twice, for the sum
   and for e / sum, and the FULL loop would compute it again. A costly value S (exp, log,
   tanh, power, ...) that a FULL leaf and its hero's input both read at the element itself
   is stored into that leaf's buffer while the hero visits the element, and the FULL loop
   loads it back (an override, just before the leaf overwrites the same element) instead
   of recomputing it: the same code at the same index, so the same bits. Valid when every
   path from the leaf to S goes through elementwise ops of the leaf's dims (the override
   ignores the index it is read at), S has the leaf's dims, and its type is f32/f64 (a
   16-bit buffer would round what the recomputation does not); a fusion's output buffer is
   never one of its inputs' here (buffer_assign.c shares memory only for in-place loop and
   dus kernels). GPT-2's masked attention softmax at T = 256 (f32[12,256,256], 2 threads,
   `hlojit run --profile`): 0.90 ms without the stash, 0.58-0.68 ms with it. */
#include "reduction_internal.h"
#include "reduction_plan.h"
#include <stdlib.h>

/* ---- emission helpers ----------------------------------------------------------------- */

/* An alloca of |n| values of |t| in the entry block (so mem2reg/SROA can promote it). */
static LLVMValueRef red_alloca(emit_fn *f, LLVMTypeRef t, int64_t n, const char *name) {
  LLVMBuilderRef b = f->em->b;
  LLVMBasicBlockRef cur = LLVMGetInsertBlock(b), entry = LLVMGetEntryBasicBlock(f->fn);
  LLVMValueRef first = LLVMGetFirstInstruction(entry);
  if (first) LLVMPositionBuilderBefore(b, first);
  else LLVMPositionBuilderAtEnd(b, entry);
  LLVMValueRef a = LLVMBuildAlloca(b, n == 1 ? t : LLVMArrayType2(t, (uint64_t)n), name);
  LLVMPositionBuilderAtEnd(b, cur);
  return a;
}

static LLVMValueRef red_slot(emit_fn *f, LLVMTypeRef t, LLVMValueRef arr, LLVMValueRef i) {
  return LLVMBuildGEP2(f->em->b, t, arr, &i, 1, "acc.p");
}

static LLVMValueRef red_ld(emit_fn *f, LLVMTypeRef t, LLVMValueRef arr, LLVMValueRef i) {
  return LLVMBuildLoad2(f->em->b, t, red_slot(f, t, arr, i), "acc");
}

static void red_st(emit_fn *f, LLVMTypeRef t, LLVMValueRef arr, LLVMValueRef i, LLVMValueRef v) {
  LLVMBuildStore(f->em->b, v, red_slot(f, t, arr, i));
}

/* Input index of a reduce over |in| (reduced dims |reduced|): kept dims from |kidx|, reduced
   dims from the row-major linear reduced index |rlin| (0 <= rlin < K). The GPU emitter's
   too (reduction_plan.h). */
void emitp_red_in_index(emit_fn *f, const hlo_shape *in, const bool *reduced, const emit_index *kidx,
                        LLVMValueRef rlin, emit_index *out) {
  LLVMBuilderRef b = f->em->b;
  out->rank = in->rank;
  int kk = kidx->rank;
  int first_red = -1;
  for (int d = 0; d < in->rank; d++)
    if (reduced[d] && first_red < 0) first_red = d;
  for (int d = in->rank - 1; d >= 0; d--) {
    if (!reduced[d]) { out->v[d] = kidx->v[--kk]; continue; }
    if (in->dims[d] == 1) { out->v[d] = emit_i64(f, 0); continue; }
    if (d == first_red) { out->v[d] = rlin; continue; }
    LLVMValueRef dim = emit_i64(f, in->dims[d]);
    out->v[d] = LLVMBuildURem(b, rlin, dim, "ri");
    rlin = LLVMBuildUDiv(b, rlin, dim, "rq");
  }
}

static void red_in_index(emit_fn *f, const red_hero *h, const emit_index *kidx, LLVMValueRef rlin,
                         emit_index *out) {
  emitp_red_in_index(f, &h->ins->operands[0]->shape, h->reduced, kidx, rlin, out);
}

/* Loads hero |h|'s inputs at input index |idx| into x[] and stores the hero's input-shaped
   side outputs there. */
static void red_visit(emit_fn *f, const red_plan *p, int hi, const emit_index *idx, LLVMValueRef *x) {
  const red_hero *h = &p->h[hi];
  for (int j = 0; j < h->n; j++) x[j] = emit_elemental(f, h->ins->operands[j], idx);
  for (int i = 0; i < p->nleaves; i++) {
    const red_leaf *l = &p->leaf[i];
    if (l->kind != RED_LEAF_INPUT || l->hero != hi) continue;
    LLVMValueRef v = emit_elemental(f, l->ins, idx);
    emit_store_elem(f, l->type, f->outs[i], emit_linear_index(f, &l->shape, idx), v);
  }
  for (int s = 0; s < p->nstash; s++) {   /* S into its leaf's buffer at this element */
    if (p->stash[s].hero != hi) continue;
    const red_leaf *l = &p->leaf[p->stash[s].leaf];
    LLVMValueRef v = emit_elemental(f, p->stash[s].ins, idx);
    emit_store_elem(f, l->type, f->outs[p->stash[s].leaf], emit_linear_index(f, &l->shape, idx), v);
  }
}

/* acc[] = reducer(acc[], x[]) for |n| results. */
static void red_apply(emit_fn *f, const red_hero *h, LLVMValueRef *acc, const LLVMValueRef *x) {
  LLVMValueRef args[2 * RED_MAX_N];
  for (int j = 0; j < h->n; j++) args[j] = acc[j], args[h->n + j] = x[j];
  emit_scalar_call(f, h->ins->calls[0], args, 2 * h->n, acc, h->n);
}

static void red_inits(emit_fn *f, const red_hero *h, LLVMValueRef *init) {
  emit_index scalar = { .rank = 0 };
  for (int j = 0; j < h->n; j++) init[j] = emit_elemental(f, h->ins->operands[h->n + j], &scalar);
}

/* ---- per kept index: lanes or sequential ------------------------------------------------ */

/* The hero's values at kept index |kidx| into v[] (sequential order, from the init). */
static void red_sequential(emit_fn *f, const red_plan *p, int hi, const emit_index *kidx, LLVMValueRef *v) {
  const red_hero *h = &p->h[hi];
  LLVMValueRef init[RED_MAX_N], slot[RED_MAX_N], acc[RED_MAX_N], x[RED_MAX_N];
  LLVMTypeRef ct[RED_MAX_N];
  red_inits(f, h, init);
  for (int j = 0; j < h->n; j++) {
    ct[j] = emit_compute_type(f->em, h->types[j]);
    slot[j] = red_alloca(f, ct[j], 1, "seq.acc");
    red_st(f, ct[j], slot[j], emit_i64(f, 0), init[j]);
  }
  emit_loop l;
  emit_loop_begin(f, &l, emit_i64(f, 0), emit_i64(f, h->K), 1, "red.seq");
  emit_index idx;
  red_in_index(f, h, kidx, l.iv, &idx);
  red_visit(f, p, hi, &idx, x);
  for (int j = 0; j < h->n; j++) acc[j] = red_ld(f, ct[j], slot[j], emit_i64(f, 0));
  red_apply(f, h, acc, x);
  for (int j = 0; j < h->n; j++) red_st(f, ct[j], slot[j], emit_i64(f, 0), acc[j]);
  emit_loop_end(f, &l);
  for (int j = 0; j < h->n; j++) v[j] = red_ld(f, ct[j], slot[j], emit_i64(f, 0));
}

/* The reducer's op on W-lane vectors, with the elemental emitter's semantics for each lane
   (elemental.c: float maximum/minimum pick a NaN operand, lhs first, else the lhs on ties;
   pred add/maximum are or, multiply/minimum are and). |acc| is the reducer's parameter 0
   (the running value), |x| parameter 1. */
static LLVMValueRef red_vec_op(emit_fn *f, const red_hero *h, LLVMValueRef acc, LLVMValueRef x) {
  LLVMBuilderRef b = f->em->b;
  hlo_type t = h->types[0];
  LLVMValueRef l = h->swapped ? x : acc, r = h->swapped ? acc : x;   /* root's lhs, rhs */
  bool fl = hlo_type_is_float(t), mx = h->op == HLO_OP_MAXIMUM;
  if (t == HLO_PRED) {
    bool is_or = h->op == HLO_OP_ADD || h->op == HLO_OP_OR || mx;
    return is_or ? LLVMBuildOr(b, l, r, "") : LLVMBuildAnd(b, l, r, "");
  }
  switch (h->op) {
  case HLO_OP_ADD: return fl ? LLVMBuildFAdd(b, l, r, "") : LLVMBuildAdd(b, l, r, "");
  case HLO_OP_MULTIPLY: return fl ? LLVMBuildFMul(b, l, r, "") : LLVMBuildMul(b, l, r, "");
  case HLO_OP_AND: return LLVMBuildAnd(b, l, r, "");
  case HLO_OP_OR: return LLVMBuildOr(b, l, r, "");
  default: break;
  }
  if (!fl) {
    LLVMIntPredicate lt = hlo_type_class_of(t) == HLO_CLASS_SINT ? LLVMIntSLT : LLVMIntULT;
    LLVMValueRef c = mx ? LLVMBuildICmp(b, lt, l, r, "") : LLVMBuildICmp(b, lt, r, l, "");
    return LLVMBuildSelect(b, c, r, l, "");
  }
  LLVMValueRef pick_r = mx ? LLVMBuildFCmp(b, LLVMRealOLT, l, r, "") : LLVMBuildFCmp(b, LLVMRealOLT, r, l, "");
  LLVMValueRef v = LLVMBuildSelect(b, pick_r, r, l, "");
  v = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealUNO, r, r, ""), r, v, "");
  return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealUNO, l, l, ""), l, v, "");
}

/* The W inputs x[j0 + l], l < W, as one vector: a loop over the lanes storing scalar
   elemental values into a W-element array, read back as a vector. LLVM's loop vectoriser
   turns the loop into vector code with plain vector loads. (Inserting W scalar values
   lane by lane left the merging of their loads to the SLP vectoriser, which gave up on
   indices built with `or` and emitted gathers: the attention softmax ran 3x slower.) */
static LLVMValueRef red_vec_inputs(emit_fn *f, const red_plan *p, int hi, const emit_index *kidx,
                                   LLVMValueRef j0, LLVMTypeRef vt) {
  const red_hero *h = &p->h[hi];
  LLVMBuilderRef b = f->em->b;
  LLVMTypeRef ct = emit_compute_type(f->em, h->types[0]);
  bool bit = ct == f->em->t_i1;   /* pred: bytes in memory (a <W x i1> load reads bits) */
  LLVMTypeRef mt = bit ? f->em->t_i8 : ct;
  LLVMValueRef arr = red_alloca(f, mt, h->lanes, "lanes.x"), x;
  emit_loop l;
  emit_loop_begin(f, &l, emit_i64(f, 0), emit_i64(f, h->lanes), 1, "red.x");
  emit_index idx;
  red_in_index(f, h, kidx, LLVMBuildNUWAdd(b, j0, l.iv, "j"), &idx);
  red_visit(f, p, hi, &idx, &x);
  red_st(f, mt, arr, l.iv, bit ? LLVMBuildZExt(b, x, mt, "") : x);
  emit_loop_end(f, &l);
  /* the array has its element's alignment only: say so, or the load assumes the vector's */
  LLVMValueRef xv = LLVMBuildLoad2(b, bit ? LLVMVectorType(mt, (unsigned)h->lanes) : vt, arr, "xv");
  LLVMSetAlignment(xv, bit ? 1 : (unsigned)hlo_type_size(h->types[0]));
  return bit ? LLVMBuildTrunc(b, xv, vt, "") : xv;
}

/* The lane order of the top comment; |h|->n == 1, K >= W. The W partial accumulators are
   one <W x T> value (a vector alloca that mem2reg turns into a phi). */
static void red_lanes_value(emit_fn *f, const red_plan *p, int hi, const emit_index *kidx, LLVMValueRef *v) {
  const red_hero *h = &p->h[hi];
  int W = h->lanes;
  int64_t Kv = h->K - h->K % W;
  LLVMBuilderRef b = f->em->b;
  LLVMTypeRef ct = emit_compute_type(f->em, h->types[0]), vt = LLVMVectorType(ct, (unsigned)W);
  LLVMValueRef slot = red_alloca(f, vt, 1, "lanes"), x;
  LLVMBuildStore(b, red_vec_inputs(f, p, hi, kidx, emit_i64(f, 0), vt), slot);  /* acc = x[0..W) */
  if (Kv > W) {
    emit_loop lp;
    emit_loop_begin(f, &lp, emit_i64(f, W), emit_i64(f, Kv), W, "red.lanes");
    LLVMValueRef xv = red_vec_inputs(f, p, hi, kidx, lp.iv, vt);
    LLVMValueRef acc = LLVMBuildLoad2(b, vt, slot, "acc");
    LLVMBuildStore(b, red_vec_op(f, h, acc, xv), slot);
    lp.no_vectorize = true;   /* already W lanes wide; widening it gave strided gathers */
    emit_loop_end(f, &lp);
  }
  LLVMValueRef accv = LLVMBuildLoad2(b, vt, slot, "acc"), acc[RED_MAX_LANES];
  for (int l = 0; l < W; l++) acc[l] = LLVMBuildExtractElement(b, accv, LLVMConstInt(f->em->t_i32, (unsigned)l, 0), "");
  for (int s = W / 2; s >= 1; s /= 2)            /* fixed tree: acc[l] = f(acc[l], acc[l+s]) */
    for (int l = 0; l < s; l++) {
      LLVMValueRef y = acc[l + s];
      red_apply(f, h, &acc[l], &y);
    }
  red_inits(f, h, v);                            /* v = f(init, tree), then the remainder */
  red_apply(f, h, v, &acc[0]);
  emit_index idx;
  for (int64_t j = Kv; j < h->K; j++) {
    red_in_index(f, h, kidx, emit_i64(f, j), &idx);
    red_visit(f, p, hi, &idx, &x);
    red_apply(f, h, v, &x);
  }
}

/* ---- the row's values, kept-shape and input-shape outputs ----------------------------------- */

/* From now on (until red_override_reset) emit_elemental gives hero |h|'s values |hv| for
   every read of it. */
static void red_override_add(emit_fn *f, const red_plan *p, int h, LLVMValueRef *hv) {
  for (int i = 0; i < p->nov; i++) {
    if (p->ov_hero[i] != h) continue;
    if (!f->override_ins) {
      f->override_ins = p->ov[i], f->override_val = hv[p->ov_k[i]];
    } else {
      f->override_ins2[f->noverrides] = p->ov[i];
      f->override_val2[f->noverrides++] = hv[p->ov_k[i]];
    }
  }
  emit_cache_clear(f);   /* nothing cached may have inlined the reduce itself */
}

static void red_override_reset(emit_fn *f) {
  f->override_ins = NULL, f->override_val = NULL, f->noverrides = 0;
  emit_cache_clear(f);
}

/* The DIRECT and KEPT leaves at kept index |kidx| (linear |klin|), from the heroes' values
   |hv| (every hero overridden). */
static void red_epilogue(emit_fn *f, const red_plan *p, const emit_index *kidx, LLVMValueRef klin,
                         LLVMValueRef hv[][RED_MAX_N]) {
  for (int i = 0; i < p->nleaves; i++) {
    const red_leaf *l = &p->leaf[i];
    if (l->kind == RED_LEAF_DIRECT)
      emit_store_elem(f, l->type, f->outs[i], klin, hv[l->hero][l->k]);
    else if (l->kind == RED_LEAF_KEPT)
      emit_store_elem(f, l->type, f->outs[i], klin, emit_elemental(f, l->ins, kidx));
  }
}

/* The FULL leaves at each of the K input elements of row |kidx| (every hero overridden):
   one loop per input shape, the row's elements in order (a plain loop LLVM vectorises). */
static void red_full_rows(emit_fn *f, const red_plan *p, const emit_index *kidx, LLVMValueRef klin) {
  LLVMBuilderRef b = f->em->b;
  for (int hi = 0; hi < p->nh; hi++) {
    int first = -1;
    for (int i = 0; i < p->nleaves && first < 0; i++)
      if (p->leaf[i].kind == RED_LEAF_FULL && p->leaf[i].hero == hi) first = i;
    if (first < 0) continue;
    const red_hero *h = &p->h[hi];
    bool row = red_is_row(h);   /* then input linear = klin * K + j */
    LLVMValueRef base = row ? LLVMBuildNUWMul(b, klin, emit_i64(f, h->K), "rowbase") : NULL;
    emit_loop l;
    emit_loop_begin(f, &l, emit_i64(f, 0), emit_i64(f, h->K), 1, "row.out");
    emit_index idx;
    red_in_index(f, h, kidx, l.iv, &idx);
    LLVMValueRef lin = row ? LLVMBuildNUWAdd(b, base, l.iv, "lin")
                           : emit_linear_index(f, &h->ins->operands[0]->shape, &idx);
    int nov = f->noverrides;   /* the stashed values, loaded before any leaf is stored */
    for (int s = 0; s < p->nstash; s++) {   /* (stored while hero stash.hero visited it) */
      if (p->leaf[p->stash[s].leaf].hero != hi ||
          f->noverrides == (int)(sizeof f->override_ins2 / sizeof f->override_ins2[0]))
        continue;   /* no slot left: the leaf recomputes S (the same bits) */
      const red_leaf *sl = &p->leaf[p->stash[s].leaf];
      f->override_ins2[f->noverrides] = p->stash[s].ins;
      f->override_val2[f->noverrides++] = emit_load_elem(f, sl->type, f->outs[p->stash[s].leaf], lin);
    }
    for (int i = first; i < p->nleaves; i++) {
      const red_leaf *lf = &p->leaf[i];
      if (lf->kind == RED_LEAF_FULL && lf->hero == hi)
        emit_store_elem(f, lf->type, f->outs[i], lin, emit_elemental(f, lf->ins, &idx));
    }
    f->noverrides = nov;
    emit_loop_end(f, &l);
  }
}

static void red_emit_per_kept(emit_fn *f, const red_plan *p) {
  emit_loop lr;
  emit_loop_begin(f, &lr, f->begin, f->end, 1, "kept");
  emit_index kidx;
  emit_delinearize(f, &p->kept, lr.iv, &kidx);
  LLVMValueRef hv[RED_MAX_HEROES][RED_MAX_N];
  for (int o = 0; o < p->nh; o++) {
    int h = p->order[o];
    if (p->h[h].lanes > 1) red_lanes_value(f, p, h, &kidx, hv[h]);
    else red_sequential(f, p, h, &kidx, hv[h]);
    red_override_add(f, p, h, hv[h]);
  }
  red_epilogue(f, p, &kidx, lr.iv, hv);
  if (p->full) red_full_rows(f, p, &kidx, lr.iv);
  red_override_reset(f);
  emit_loop_end(f, &lr);
}

/* ---- column strategy --------------------------------------------------------------------- */

static void red_emit_column(emit_fn *f, const red_plan *p) {
  LLVMBuilderRef b = f->em->b;
  LLVMValueRef acc[RED_MAX_HEROES][RED_MAX_N];
  LLVMTypeRef ct[RED_MAX_HEROES][RED_MAX_N];
  for (int h = 0; h < p->nh; h++)
    for (int j = 0; j < p->h[h].n; j++) {
      ct[h][j] = emit_compute_type(f->em, p->h[h].types[j]);
      acc[h][j] = red_alloca(f, ct[h][j], p->cb, "col.acc");
    }
  emit_loop lu;
  emit_loop_begin(f, &lu, f->begin, f->end, 1, "colblock");
  LLVMValueRef nb = emit_i64(f, p->nb);
  LLVMValueRef co = LLVMBuildUDiv(b, lu.iv, nb, "co"), cb = LLVMBuildURem(b, lu.iv, nb, "cb");
  LLVMValueRef c0 = LLVMBuildNUWMul(b, cb, emit_i64(f, p->cb), "c0");
  LLVMValueRef c1 = LLVMBuildNUWAdd(b, c0, emit_i64(f, p->cb), "c1");
  LLVMValueRef cm = emit_i64(f, p->Cm);
  c1 = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntULT, c1, cm, "lt"), c1, cm, "c1");
  /* kept index (outer kept dims from co, minor = c); co-only part built once */
  emit_index kout;
  hlo_shape outer = p->kept;
  outer.rank--;
  emit_delinearize(f, &outer, co, &kout);
  LLVMValueRef kbase = LLVMBuildNUWMul(b, co, cm, "kbase");
  for (int h = 0; h < p->nh; h++) {
    const red_hero *hh = &p->h[h];
    LLVMValueRef init[RED_MAX_N], a[RED_MAX_N], x[RED_MAX_N];
    red_inits(f, hh, init);
    emit_loop li;
    emit_loop_begin(f, &li, c0, c1, 1, "col.init");
    for (int j = 0; j < hh->n; j++) red_st(f, ct[h][j], acc[h][j], LLVMBuildNUWSub(b, li.iv, c0, "ci"), init[j]);
    emit_loop_end(f, &li);
    emit_loop lk, lc;
    emit_loop_begin(f, &lk, emit_i64(f, 0), emit_i64(f, hh->K), 1, "col.k");
    LLVMValueRef k = lk.iv;
    emit_loop_begin(f, &lc, c0, c1, 1, "col.c");
    emit_index kidx = kout, idx;
    kidx.v[kidx.rank++] = lc.iv;
    red_in_index(f, hh, &kidx, k, &idx);
    red_visit(f, p, h, &idx, x);
    LLVMValueRef ci = LLVMBuildNUWSub(b, lc.iv, c0, "ci");
    for (int j = 0; j < hh->n; j++) a[j] = red_ld(f, ct[h][j], acc[h][j], ci);
    red_apply(f, hh, a, x);
    for (int j = 0; j < hh->n; j++) red_st(f, ct[h][j], acc[h][j], ci, a[j]);
    emit_loop_end(f, &lc);
    emit_loop_end(f, &lk);
  }
  emit_loop le;
  emit_loop_begin(f, &le, c0, c1, 1, "col.out");
  emit_index kidx = kout;
  kidx.v[kidx.rank++] = le.iv;
  LLVMValueRef ci = LLVMBuildNUWSub(b, le.iv, c0, "ci");
  LLVMValueRef hv[RED_MAX_HEROES][RED_MAX_N];
  for (int h = 0; h < p->nh; h++)
    for (int j = 0; j < p->h[h].n; j++) hv[h][j] = red_ld(f, ct[h][j], acc[h][j], ci);
  for (int h = 0; h < p->nh; h++) red_override_add(f, p, h, hv[h]);
  red_epilogue(f, p, &kidx, LLVMBuildNUWAdd(b, kbase, le.iv, "klin"), hv);
  red_override_reset(f);
  emit_loop_end(f, &le);
  emit_loop_end(f, &lu);
}

/* ---- entry point -------------------------------------------------------------------------- */

hj_status emit_reduction_fusion(emit_module *em, const hlo_instr *fusion, const hlo_instr *hero,
                                const char *name, emit_kernel *out) {
  (void)hero;   /* every reduce of the fusion is a hero here */
  memset(out, 0, sizeof *out);
  if (fusion->ncalls < 1 || !fusion->calls[0])
    return hj__err(em->ctx, HJ_ERR_INVALID_ARG, "reduction emitter: fusion '%s' has no computation", fusion->name);
  red_plan *p = calloc(1, sizeof *p);
  if (!p) return hj__err(em->ctx, HJ_ERR_OOM, "reduction emitter: out of memory");
  hj_status st = red_analyse(em, fusion, p);
  emit_fn f;
  if (!st) st = emit_kernel_begin(&f, em, name, fusion);
  if (!st) {
    if (f.nouts != p->nleaves)
      emit_fail(&f, HJ_ERR_INTERNAL, "%d output buffers, %d output leaves", f.nouts, p->nleaves);
    else if (p->column) red_emit_column(&f, p);
    else red_emit_per_kept(&f, p);
    st = emit_kernel_end(&f);
  }
  if (!st) {
    int64_t work = 1;
    for (int h = 0; h < p->nh; h++) work += p->h[h].K;
    for (int h = 0; h < p->nh; h++)   /* a FULL loop per input shape */
      for (int i = 0; i < p->nleaves; i++)
        if (p->leaf[i].kind == RED_LEAF_FULL && p->leaf[i].hero == h) { work += p->h[h].K; break; }
    if (p->column) {
      out->parallel_n = p->Co * p->nb;
      work *= p->cb;
    } else {
      out->parallel_n = hlo_shape_numel(&p->kept);
    }
    out->grain = work >= 32768 ? 1 : 32768 / work;
    out->kind = EMIT_KIND_REDUCTION;
    snprintf(out->name, sizeof out->name, "%s", name);
  }
  free(p);
  return st;
}

/* ---- for the GPU reduction emitter (reduction_plan.h) ------------------------------------ */

hj_status emitp_red_plan_make(emit_module *em, const hlo_instr *fusion, emitp_red_plan *out) {
  memset(out, 0, sizeof *out);
  if (fusion->ncalls < 1 || !fusion->calls[0])
    return hj__err(em->ctx, HJ_ERR_INVALID_ARG, "reduction emitter: fusion '%s' has no computation", fusion->name);
  _Static_assert(RED_MAX_HEROES == EMITP_RED_MAX_HEROES && RED_MAX_N == EMITP_RED_MAX_N &&
                 RED_MAX_OV == EMITP_RED_MAX_OV, "reduction_plan.h mirrors reduction.c's limits");
  _Static_assert((int)RED_LEAF_DIRECT == (int)EMITP_LEAF_DIRECT && (int)RED_LEAF_KEPT == (int)EMITP_LEAF_KEPT &&
                 (int)RED_LEAF_INPUT == (int)EMITP_LEAF_INPUT && (int)RED_LEAF_FULL == (int)EMITP_LEAF_FULL,
                 "reduction_plan.h mirrors reduction.c's leaf kinds");
  red_plan *p = calloc(1, sizeof *p);
  if (!p) return hj__err(em->ctx, HJ_ERR_OOM, "reduction emitter: out of memory");
  hj_status st = red_analyse(em, fusion, p);
  if (st == HJ_OK) {
    out->nh = p->nh;
    for (int h = 0; h < p->nh; h++) {
      emitp_red_hero *g = &out->h[h];
      g->ins = p->h[h].ins;
      g->n = p->h[h].n;
      memcpy(g->reduced, p->h[h].reduced, sizeof g->reduced);
      g->K = p->h[h].K;
      memcpy(g->types, p->h[h].types, sizeof g->types);
      g->deps = p->h[h].deps;
      g->row = red_is_row(&p->h[h]);
      out->order[h] = p->order[h];
    }
    out->nleaves = p->nleaves;
    for (int i = 0; i < p->nleaves; i++) {
      const red_leaf *l = &p->leaf[i];
      out->leaf[i] = (emitp_red_leaf){ l->ins, (emitp_leaf_kind)l->kind, l->hero, l->k, l->type, l->shape };
    }
    out->nov = p->nov;
    for (int i = 0; i < p->nov; i++) out->ov[i] = p->ov[i], out->ov_hero[i] = p->ov_hero[i], out->ov_k[i] = p->ov_k[i];
    out->kept = p->kept;
    out->column = p->column;
    out->full = p->full;
  }
  free(p);
  return st;
}
