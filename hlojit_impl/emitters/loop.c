/* loop.c — the loop emitter: a kernel that writes every output element from the elemental
   emitter, parallel over elements or rows.

   Modes, for the root shape S (every root leaf has S's dims; multi-output fusions are a
   tuple of such leaves written at the same index):
   - linear: parallel dim = the N elements of S. Used when every parameter is read at the
     output's own linear index (elementwise ops over arrays of S's size, scalars and their
     broadcasts, reshapes and default-layout bitcasts), when S has rank <= 1, or when root
     leaves differ in dims but not in element count (each leaf gets its own delinearised
     index of the shared linear index: transposes with side outputs). The index
     is delinearised (emit_delinearize records it, so parameters are read at the loop
     counter itself and the div/mod instructions are dead code), and LLVM vectorises the
     loop: for GELU on f32 this is a plain streaming loop of <16 x float> on AVX-512.
   - row: parallel dim = the R = N / M rows (M = S's minor dim); one delinearisation per
     row, then an inner loop over the M elements of the row (index (row..., j), linear
     index row*M + j recorded for the cache). Transposes, slices, broadcasts along minor
     dims, pads and gathers live here: the outer indices are loop invariant for the inner
     loop, which LLVM hoists and often vectorises.
   Rows are few but long (R < 16, M >= 4096): the linear mode, so that all threads get work.
   - concatenate rows: the root is (through same-size reshapes) a concatenate along a dim
     that is not minor (hlo_root_concat): row mode over the concatenate's rows, where one
     chain of compares per row picks the operand and an inner loop reads that operand only
     (elp_concat_row) — a convolution's patch matrix (passes/conv_lower.c) is such a root.
   Grain: chunks of at least ~16K elements (linear: 16384; row: ceil(16384 / M) rows).

   Example: fusion { p0 = f32[64,128] parameter(0); t = f32[128,64] transpose(p0),
   dimensions={1,0}; ROOT e = f32[128,64] exponential(t) }: row mode, parallel_n = 128,
   grain = 256; row r, element j: idx (r, j), t reads p0 at (j, r) = linear j*128 + r.

   In place (emit_loop_fusion_inplace, through emitter.c's emit_fusion_inplace): output 0 may be the buffer of operand k when the fusion
   has one output, is in linear mode, and every path from the root to parameter k goes
   through ops that read their operands at their own index with the output's element count
   (elementwise ops, reshapes, default-layout bitcasts): element i of parameter k is then
   read only while computing element i, before it is stored. A broadcast, slice or reduce
   on the way (even of a scalar) disqualifies k. The kernel reads parameter k through the
   output pointer itself, so LLVM sees a dependence of distance 0 and vectorises without a
   runtime alias check. */
#include "emit_internal.h"

/* |ins| (with the output's element count) reads every parameter at its own linear index.
   A fused computation is a DAG whose nodes may be shared (v_i = v_{i-1} + v_{i-2}): the
   answer is memoised per instruction, so the walk is linear in the computation, not in
   its number of paths (exponential: 2.9 s at 40 such nodes before the memo). */
typedef struct { const hlo_instr *key; bool value; } elp_lin_memo;

static bool elp_linear_rec(const hlo_instr *ins, elp_lin_memo **memo);

static bool elp_linear_ok1(const hlo_instr *ins, elp_lin_memo **memo) {
  if (!hlo_shape_is_array(&ins->shape)) return false;
  if (hlo_shape_numel(&ins->shape) == 1) return true;
  hlo_elem_op e;
  switch (ins->op) {
  case HLO_OP_PARAMETER: case HLO_OP_CONSTANT: return true;
  case HLO_OP_BROADCAST: return hlo_shape_numel(&ins->operands[0]->shape) == 1;
  case HLO_OP_RESHAPE: return elp_linear_rec(ins->operands[0], memo);
  case HLO_OP_BITCAST:
    return hlo_shape_layout_is_default(&ins->shape) &&
           hlo_shape_layout_is_default(&ins->operands[0]->shape) &&
           elp_linear_rec(ins->operands[0], memo);
  case HLO_OP_MAP: break;
  default:
    if (!hlo_elem_op_of(ins, &e)) return false;
    break;
  }
  for (int k = 0; k < ins->noperands; k++) {
    const hlo_instr *o = ins->operands[k];
    if (!hlo_shape_is_array(&o->shape)) return false;
    if (hlo_shape_numel(&o->shape) == 1) continue;
    if (!hlo_same_dims(&o->shape, &ins->shape) || !elp_linear_rec(o, memo)) return false;
  }
  return true;
}

static bool elp_linear_rec(const hlo_instr *ins, elp_lin_memo **memo) {
  ptrdiff_t at = hmgeti(*memo, ins);
  if (at >= 0) return (*memo)[at].value;
  bool v = elp_linear_ok1(ins, memo);
  hmput(*memo, ins, v);
  return v;
}

/* The fused computation's instructions are visited in text (topological) order first, so
   that each recursive step above finds its operands memoised: no native recursion deeper
   than one level, however long the chain. */
static bool elp_linear_ok(const hlo_instr *root) {
  elp_lin_memo *memo = NULL;
  const hlo_comp *c = root->parent;
  for (ptrdiff_t i = 0; c && i < arrlen(c->instrs); i++) elp_linear_rec(c->instrs[i], &memo);
  bool v = elp_linear_rec(root, &memo);
  hmfree(memo);
  return v;
}

/* In-place check for fused parameter |pk|, over the computation's instructions in text
   (topological) order: 0 = does not read pk, 1 = reads it only at its own index with N
   elements, -1 = reads it anywhere else. */
typedef struct { const hlo_instr *key; int value; } elp_memo;

static int elp_own_index(const hlo_instr *ins, int64_t pk, int64_t N, elp_memo **memo) {
  if (ins->op == HLO_OP_PARAMETER)
    return ins->index != pk ? 0 : hlo_shape_is_array(&ins->shape) && hlo_shape_numel(&ins->shape) == N ? 1 : -1;
  int r = 0;
  for (int k = 0; k < ins->noperands; k++) {
    ptrdiff_t at = hmgeti(*memo, ins->operands[k]);
    int v = at >= 0 ? (*memo)[at].value : -1;   /* not seen: not in text order, refuse */
    if (v < 0) return -1;
    r |= v;
  }
  if (!r) return 0;
  hlo_elem_op e;
  if (!hlo_shape_is_array(&ins->shape) || hlo_shape_numel(&ins->shape) != N) return -1;
  switch (ins->op) {
  case HLO_OP_RESHAPE: return 1;
  case HLO_OP_BITCAST:
    return hlo_shape_layout_is_default(&ins->shape) &&
           hlo_shape_layout_is_default(&ins->operands[0]->shape) ? 1 : -1;
  case HLO_OP_MAP: break;
  default:
    if (!hlo_elem_op_of(ins, &e)) return -1;
    break;
  }
  for (int k = 0; k < ins->noperands; k++)   /* same dims: read at the same index */
    if (!hlo_same_dims(&ins->operands[k]->shape, &ins->shape)) return -1;
  return 1;
}

bool emit_loop_inplace_ok(const hlo_instr *fusion, int operand) {
  if (!fusion || fusion->op != HLO_OP_FUSION || fusion->ncalls < 1 || !fusion->calls[0] ||
      !hlo_shape_is_array(&fusion->shape) || operand < 0 || operand >= fusion->noperands)
    return false;
  const hlo_comp *c = fusion->calls[0];
  emitp_leaf lv[2];
  if (emitp_leaves(c, lv, 2) != 1 || lv[0].sub >= 0 || !elp_linear_ok(lv[0].ins)) return false;
  int64_t N = hlo_shape_numel(&fusion->shape);
  elp_memo *memo = NULL;
  int r = -1;
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++) {
    r = elp_own_index(c->instrs[i], operand, N, &memo);
    hmput(memo, c->instrs[i], r);
  }
  ptrdiff_t at = hmgeti(memo, c->root);
  r = at >= 0 ? memo[at].value : -1;
  hmfree(memo);
  return r >= 0;
}

/* Leaves lv[0..n) (output buffers first, first+1, ...) at |idx|, stored at |lin|. */
static void elp_emit_leaves(emit_fn *f, const emitp_leaf *lv, int n, int first,
                            const emit_index *idx, LLVMValueRef lin) {
  for (int k = 0; k < n; k++) {
    LLVMValueRef v = lv[k].sub >= 0 ? emitp_reduce(f, lv[k].ins, lv[k].sub, idx)
                                    : emit_elemental(f, lv[k].ins, idx);
    emit_store_elem(f, lv[k].shape->type, f->outs[first + k], lin, v);
  }
}

/* Row |row| (its index |idx| in the concatenate's row space) of the root concatenate |cat|:
   the operand is the same for the whole row, so a chain of compares picks it once and an
   inner loop over the minor dim reads that operand alone (the elemental concatenate would
   read every operand at every element and select). Values made in one operand's block
   dominate nothing after it: the cache gets a mark per block. */
static void elp_concat_row(emit_fn *f, const hlo_instr *cat, const hlo_shape *out, emit_index *idx,
                           LLVMValueRef row) {
  emit_module *em = f->em;
  LLVMBuilderRef b = em->b;
  const hlo_shape *s = &cat->shape;
  int axis = (int)cat->dims.v[0], r = s->rank;
  int64_t minor = s->dims[r - 1], at = 0;
  LLVMValueRef t = idx->v[axis], base = LLVMBuildNSWMul(b, row, emit_i64(f, minor), "");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(em->llctx, f->fn, "cat.done");
  for (int k = 0; k < cat->noperands; k++) {
    int64_t d = cat->operands[k]->shape.dims[axis];
    if (d == 0) continue;
    LLVMBasicBlockRef in = LLVMAppendBasicBlockInContext(em->llctx, f->fn, "cat.op");
    LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(em->llctx, f->fn, "cat.next");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, t, emit_i64(f, at + d), ""), in, next);
    LLVMPositionBuilderAtEnd(b, in);
    ptrdiff_t mark = emitp_cache_mark(f);
    emit_loop inner;
    emit_loop_begin(f, &inner, emit_i64(f, 0), emit_i64(f, minor), 1, "cj");
    emit_index j = *idx;
    j.rank = r;
    j.v[axis] = LLVMBuildNSWSub(b, t, emit_i64(f, at), "");
    j.v[r - 1] = inner.iv;
    LLVMValueRef v = emit_elemental(f, cat->operands[k], &j);
    emit_store_elem(f, out->type, f->outs[0], LLVMBuildNSWAdd(b, base, inner.iv, ""), v);
    emit_loop_end(f, &inner);
    emitp_cache_pop(f, mark);
    LLVMBuildBr(b, done);
    LLVMPositionBuilderAtEnd(b, next);
    at += d;
  }
  LLVMBuildBr(b, done);
  LLVMPositionBuilderAtEnd(b, done);
}

static hj_status elp_emit(emit_module *em, const hlo_instr *fusion, const char *name,
                         int inplace, emit_kernel *out) {
  const char *fname = fusion && fusion->name ? fusion->name : "?";
  if (!fusion || fusion->ncalls < 1 || !fusion->calls[0])
    return hj__err(em->ctx, HJ_ERR_INTERNAL, "emit '%s': not a fusion", fname);
  const hlo_comp *c = fusion->calls[0];
  emitp_leaf lv[64];
  int n = emitp_leaves(c, lv, 64);
  if (n < 1) return hj__err(em->ctx, HJ_ERR_UNSUPPORTED, "emit '%s': the root is not arrays or "
                            "a tuple of at most 64 arrays", fname);
  const hlo_shape *s = lv[0].shape;
  bool mixed = false;   /* leaves of other dims but as many elements: linear, one index each */
  for (int k = 1; k < n; k++) {
    if (hlo_same_dims(lv[k].shape, s)) continue;
    mixed = true;
    if (hlo_shape_numel(lv[k].shape) != hlo_shape_numel(s)) {
      char b1[128], b2[128];
      return hj__err(em->ctx, HJ_ERR_UNSUPPORTED, "emit '%s': loop fusion roots with different "
                     "element counts (%s, %s)", fname, hlo_shape_str(s, b1, sizeof b1),
                     hlo_shape_str(lv[k].shape, b2, sizeof b2));
    }
  }
  const hlo_instr *cat = n == 1 && lv[0].sub < 0 && inplace < 0 ? hlo_root_concat(c) : NULL;
  if (cat) s = &cat->shape;   /* row mode over the concatenate's rows (same linear order) */
  int64_t numel = hlo_shape_numel(s), minor = s->rank ? s->dims[s->rank - 1] : 1;
  bool linear = true;
  for (int k = 0; k < n; k++)
    if (lv[k].sub >= 0 || !elp_linear_ok(lv[k].ins)) linear = false;
  if (mixed || s->rank <= 1 || minor == 0 || (numel / minor < 16 && minor >= 4096)) linear = true;
  if (cat) linear = minor == 0;
  emit_fn f;
  hj_status st = emit_kernel_begin_ex(&f, em, name, fusion, inplace);
  if (st) return st;
  if (inplace >= 0) f.params[inplace] = f.outs[0];   /* the same pointer: distance 0 */
  if (f.nouts != n)
    emit_fail(&f, HJ_ERR_SHAPE, "%d output buffers for %d root leaves", f.nouts, n);
  LLVMBuilderRef b = em->b;
  emit_loop l, inner;
  emit_index idx;
  if (numel > 0 && f.status == HJ_OK) {
    if (linear) {
      emit_loop_begin(&f, &l, f.begin, f.end, 1, "i");
      emit_delinearize(&f, s, l.iv, &idx);
      for (int k = 0; k < n; k++) {
        emit_index own = idx;
        if (!hlo_same_dims(lv[k].shape, s)) emit_delinearize(&f, lv[k].shape, l.iv, &own);
        elp_emit_leaves(&f, &lv[k], 1, k, &own, l.iv);
      }
      emit_loop_end(&f, &l);
    } else {
      hlo_shape rows = *s;
      rows.rank = s->rank - 1;
      emit_loop_begin(&f, &l, f.begin, f.end, 1, "row");
      emit_delinearize(&f, &rows, l.iv, &idx);
      if (cat) {
        elp_concat_row(&f, cat, lv[0].shape, &idx, l.iv);
        emit_loop_end(&f, &l);
        goto done;
      }
      LLVMValueRef base = LLVMBuildNSWMul(b, l.iv, emit_i64(&f, minor), "");
      emit_loop_begin(&f, &inner, emit_i64(&f, 0), emit_i64(&f, minor), 1, "j");
      emit_index full = idx;
      full.rank = s->rank;
      full.v[s->rank - 1] = inner.iv;
      LLVMValueRef lin = LLVMBuildNSWAdd(b, base, inner.iv, "");
      emitp_linear_put(&f, s, &full, lin);
      elp_emit_leaves(&f, lv, n, 0, &full, lin);
      emit_loop_end(&f, &inner);
      emit_loop_end(&f, &l);
    }
  }
done:
  st = emit_kernel_end(&f);
  if (st) return st;
  snprintf(out->name, sizeof out->name, "%s", name);
  out->kind = EMIT_KIND_LOOP;
  out->parallel_n = numel == 0 ? 0 : linear ? numel : numel / minor;
  out->grain = linear ? 16384 : (16384 + minor - 1) / minor;
  out->matmul = NULL;
  return HJ_OK;
}

hj_status emit_loop_fusion(emit_module *em, const hlo_instr *fusion, const char *name,
                           emit_kernel *out) {
  return elp_emit(em, fusion, name, -1, out);
}

hj_status emit_loop_fusion_inplace(emit_module *em, const hlo_instr *fusion, const char *name,
                                   int operand, emit_kernel *out) {
  const hlo_instr *hero = NULL;
  memset(out, 0, sizeof *out);
  snprintf(out->name, sizeof out->name, "%s", name);
  out->kind = EMIT_KIND_LOOP;
  if (operand < 0 || emit_classify(fusion, 0, &hero) != EMIT_KIND_LOOP ||
      !emit_loop_inplace_ok(fusion, operand))
    return hj__err(em->ctx, HJ_ERR_UNSUPPORTED, "emit '%s': output 0 over operand %d needs a "
                   "linear loop fusion reading it at its own index",
                   fusion && fusion->name ? fusion->name : "?", operand);
  LLVMValueRef last = LLVMGetLastFunction(em->mod);
  hj_status st = elp_emit(em, fusion, name, operand, out);
  if (st != HJ_OK) emitp_drop_after(em->mod, last);   /* so the module verifies */
  return st;
}
