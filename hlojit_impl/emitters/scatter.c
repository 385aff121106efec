/* scatter.c — the scatter emitter (CPU), and the plan and body the GPU's (gpu_scatter.c)
   shares: a fusion whose root is scatter(operands..., indices, updates...) with XLA's
   semantics, the evaluator's (eval_gather.c): outputs = operands, then every update
   element, in row-major order of the update index space, combined into the output element
   it scatters to (to_apply(current..., update...)); a window with any element out of
   bounds is skipped whole.

   Parallel over the operand's leading dim (rows): a chunk of rows [r0, r1) copies its rows
   of the operands, then walks ALL updates in order and applies those that land in its
   rows. Every output element is written by one chunk, in the update order: deterministic,
   the evaluator's bits, no atomics; the price is that every chunk reads every index
   vector (cheap next to the windows it applies). Per update batch position g (the update
   dims that are not window dims): the start vector from the indices (emit_elemental, so
   any fused producer works), the bounds check once, then the window's elements (the
   update window dims), row-checked one by one.

   Example: an embedding gradient, scatter-add of f32[4096,256] updates into f32[2048,256]
   at s32[4096,1] indices: 2048 rows in chunks; each chunk copies its rows, walks the 4096
   starts, and for those in its rows adds 256 contiguous floats.

   Not yet: in place over a dead operand (the copy is always made), the sorted/unique hints
   (a chunk could stop at the first start past its rows). */
#include "emit_internal.h"

static hj_status sca_unsup(emit_module *em, const hlo_instr *fusion, const char *why) {
  return hj__err(em->ctx, HJ_ERR_UNSUPPORTED, "scatter emitter, fusion '%s': %s", fusion->name, why);
}

static bool sca_has(const hlo_ints *v, int64_t x) {
  for (int i = 0; i < v->n; i++) if (v->v[i] == x) return true;
  return false;
}

/* |s| = the dims |which| of |us|, default layout; returns its element count. */
static int64_t sca_sub_shape(hlo_shape *s, const hlo_shape *us, const int *which, int n) {
  int64_t dims[HLO_MAX_RANK];
  for (int i = 0; i < n; i++) dims[i] = us->dims[which[i]];
  *s = hlo_shape_array(us->type, n, dims);
  return hlo_shape_numel(s);
}

hj_status emitp_scatter_plan_make(emit_module *em, const hlo_instr *fusion, const hlo_instr *sc,
                                  emitp_scatter_plan *p) {
  memset(p, 0, sizeof *p);
  p->sc = sc;
  const hlo_scatter_dims *sd = &sc->scatter;
  int n = (sc->noperands - 1) / 2;
  if (fusion->calls[0]->root != sc || n < 1 || n > 16 || sc->noperands != 2 * n + 1 || sc->ncalls != 1 ||
      !sc->calls[0] || !sc->calls[0]->root)
    return sca_unsup(em, fusion, "the root must be a scatter of at most 16 operands");
  const hlo_shape *os = &sc->operands[0]->shape, *is = &sc->operands[n]->shape,
                  *us = &sc->operands[n + 1]->shape;
  for (int k = 0; k < 2 * n + 1; k++)
    if (!hlo_shape_is_array(&sc->operands[k]->shape)) return sca_unsup(em, fusion, "tuple operands");
  for (int k = 0; k < n; k++)
    if (!hlo_same_dims(&sc->operands[k]->shape, os) || !hlo_same_dims(&sc->operands[n + 1 + k]->shape, us))
      return sca_unsup(em, fusion, "operands (or updates) of different shapes");
  int ir = is->rank, orank = os->rank;
  int64_t ivd = sd->index_vector_dim;
  if (ivd < 0 || ivd > ir || !hlo_type_is_int(is->type))
    return sca_unsup(em, fusion, "index_vector_dim or the index type do not fit");
  p->n = n;
  p->ivd = ivd;
  p->nvec = ivd == ir ? 1 : is->dims[ivd];
  p->nb = 0;
  for (int d = 0; d < ir; d++) if (d != ivd) p->idims[p->nb++] = d;
  p->nw = 0;
  for (int d = 0; d < orank; d++)
    if (!sca_has(&sd->inserted_window_dims, d) && !sca_has(&sd->input_batching_dims, d)) p->wdims[p->nw++] = d;
  int ns = 0;
  for (int d = 0; d < us->rank; d++) if (!sca_has(&sd->update_window_dims, d)) p->sdims[ns++] = d;
  if (sd->scatter_dims_to_operand_dims.n != p->nvec || p->nw != sd->update_window_dims.n || ns != p->nb ||
      sd->input_batching_dims.n != sd->scatter_indices_batching_dims.n)
    return sca_unsup(em, fusion, "dimension numbers do not fit the shapes");
  for (int i = 0; i < sd->scatter_dims_to_operand_dims.n; i++)
    if (sd->scatter_dims_to_operand_dims.v[i] < 0 || sd->scatter_dims_to_operand_dims.v[i] >= orank)
      return sca_unsup(em, fusion, "scatter_dims_to_operand_dims out of range");
  for (int i = 0; i < sd->input_batching_dims.n; i++) {
    int64_t od = sd->input_batching_dims.v[i], id = sd->scatter_indices_batching_dims.v[i];
    if (od < 0 || od >= orank || id < 0 || id >= ir || id == ivd) return sca_unsup(em, fusion, "bad batching dims");
    p->bpos[i] = (int)(id - (id > ivd));
  }
  for (int d = 0; d < orank; d++) p->wsize[d] = 1;
  for (int k = 0; k < p->nw; k++) {
    int64_t ud = sd->update_window_dims.v[k];
    if (ud < 0 || ud >= us->rank) return sca_unsup(em, fusion, "update_window_dims out of range");
    p->wsize[p->wdims[k]] = us->dims[ud];
  }
  int wd[HLO_MAX_RANK];
  for (int k = 0; k < p->nw; k++) wd[k] = (int)sd->update_window_dims.v[k];
  p->batch = sca_sub_shape(&p->bshape, us, p->sdims, p->nb);
  p->window = sca_sub_shape(&p->wshape, us, wd, p->nw);
  p->rows = orank ? os->dims[0] : 1;
  p->row_elems = p->rows ? hlo_shape_numel(os) / p->rows : 0;
  return HJ_OK;
}

static LLVMValueRef sca_in(emit_fn *f, LLVMValueRef v, LLVMValueRef lo, LLVMValueRef hi) {
  LLVMBuilderRef b = f->em->b;
  return LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, v, lo, ""), LLVMBuildICmp(b, LLVMIntSLT, v, hi, ""), "in");
}

/* Opens `if (cond)`: the builder in its body; sca_endif closes it. */
static LLVMBasicBlockRef sca_if(emit_fn *f, LLVMValueRef cond, const char *name) {
  emit_module *em = f->em;
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(em->llctx, f->fn, name);
  LLVMBasicBlockRef after = LLVMAppendBasicBlockInContext(em->llctx, f->fn, "sca.after");
  LLVMBuildCondBr(em->b, cond, body, after);
  LLVMPositionBuilderAtEnd(em->b, body);
  emit_cache_clear(f);
  return after;
}

static void sca_endif(emit_fn *f, LLVMBasicBlockRef after) {
  LLVMBuildBr(f->em->b, after);
  LLVMPositionBuilderAtEnd(f->em->b, after);
  emit_cache_clear(f);
}

void emitp_scatter_body(emit_fn *f, const emitp_scatter_plan *p, LLVMValueRef r0, LLVMValueRef r1) {
  emit_module *em = f->em;
  LLVMBuilderRef b = em->b;
  const hlo_instr *sc = p->sc;
  const hlo_scatter_dims *sd = &sc->scatter;
  int n = p->n;
  const hlo_shape *os = &sc->operands[0]->shape, *us = &sc->operands[n + 1]->shape;
  const hlo_instr *ix = sc->operands[n];
  int orank = os->rank;
  /* 1. the chunk's rows of every operand */
  emit_loop lc;
  LLVMValueRef re = emit_i64(f, p->row_elems);
  emit_loop_begin(f, &lc, LLVMBuildNSWMul(b, r0, re, ""), LLVMBuildNSWMul(b, r1, re, ""), 1, "sca.copy");
  emit_index oi;
  emit_delinearize(f, os, lc.iv, &oi);
  for (int k = 0; k < n; k++)
    emit_store_elem(f, os->type, f->outs[k], lc.iv, emit_elemental(f, sc->operands[k], &oi));
  emit_loop_end(f, &lc);
  if (p->batch == 0 || p->window == 0) return;
  /* 2. every update batch position, in order */
  emit_loop lg, lw;
  emit_loop_begin(f, &lg, emit_i64(f, 0), emit_i64(f, p->batch), 1, "sca.g");
  emit_index g;
  emit_delinearize(f, &p->bshape, lg.iv, &g);
  LLVMValueRef sin[HLO_MAX_RANK];
  for (int d = 0; d < orank; d++) sin[d] = emit_i64(f, 0);
  emit_index ii = { .rank = ix->shape.rank };
  for (int j = 0; j < p->nb; j++) ii.v[p->idims[j]] = g.v[j];
  for (int64_t k = 0; k < p->nvec; k++) {
    if (p->ivd < ix->shape.rank) ii.v[p->ivd] = emit_i64(f, k);
    LLVMValueRef v = emit_elemental(f, ix, &ii);
    sin[sd->scatter_dims_to_operand_dims.v[k]] = emitp_index_value(f, v, ix->shape.type);
  }
  for (int i = 0; i < sd->input_batching_dims.n; i++) sin[sd->input_batching_dims.v[i]] = g.v[p->bpos[i]];
  LLVMValueRef inside = LLVMConstInt(em->t_i1, 1, 0);
  for (int d = 0; d < orank; d++) {
    LLVMValueRef hi = emit_i64(f, os->dims[d] - p->wsize[d] + 1);
    inside = LLVMBuildAnd(b, inside, sca_in(f, sin[d], emit_i64(f, 0), hi), "");
  }
  if (orank > 0) {   /* the window touches the chunk's rows at all */
    LLVMValueRef end0 = LLVMBuildNSWAdd(b, sin[0], emit_i64(f, p->wsize[0]), "");
    inside = LLVMBuildAnd(b, inside, LLVMBuildICmp(b, LLVMIntSLT, sin[0], r1, ""), "");
    inside = LLVMBuildAnd(b, inside, LLVMBuildICmp(b, LLVMIntSGT, end0, r0, ""), "");
  }
  LLVMBasicBlockRef after_g = sca_if(f, inside, "sca.window");
  emit_loop_begin(f, &lw, emit_i64(f, 0), emit_i64(f, p->window), 1, "sca.w");
  emit_index w;
  emit_delinearize(f, &p->wshape, lw.iv, &w);
  emit_index u = { .rank = us->rank }, o = { .rank = orank };
  for (int j = 0; j < p->nb; j++) u.v[p->sdims[j]] = g.v[j];
  for (int k = 0; k < p->nw; k++) u.v[sd->update_window_dims.v[k]] = w.v[k];
  for (int d = 0; d < orank; d++) o.v[d] = sin[d];
  for (int k = 0; k < p->nw; k++) o.v[p->wdims[k]] = LLVMBuildNSWAdd(b, sin[p->wdims[k]], w.v[k], "");
  LLVMBasicBlockRef after_r = orank > 0 ? sca_if(f, sca_in(f, o.v[0], r0, r1), "sca.row") : NULL;
  LLVMValueRef at = emit_linear_index(f, os, &o);
  LLVMValueRef args[32], res[16];
  for (int k = 0; k < n; k++) {
    args[k] = emit_load_elem(f, os->type, f->outs[k], at);
    args[n + k] = emit_elemental(f, sc->operands[n + 1 + k], &u);
  }
  emit_scalar_call(f, sc->calls[0], args, 2 * n, res, n);
  for (int k = 0; k < n; k++) emit_store_elem(f, sc->operands[k]->shape.type, f->outs[k], at, res[k]);
  if (after_r) sca_endif(f, after_r);
  emit_loop_end(f, &lw);
  sca_endif(f, after_g);
  emit_loop_end(f, &lg);
}

hj_status emit_scatter_fusion(emit_module *em, const hlo_instr *fusion, const hlo_instr *hero,
                              const char *name, emit_kernel *out) {
  memset(out, 0, sizeof *out);
  emitp_scatter_plan p;
  hj_status st = emitp_scatter_plan_make(em, fusion, hero, &p);
  emit_fn f;
  if (!st) st = emit_kernel_begin(&f, em, name, fusion);
  if (st) return st;
  if (f.nouts != p.n) emit_fail(&f, HJ_ERR_SHAPE, "%d output buffers for %d scattered operands", f.nouts, p.n);
  if (f.status == HJ_OK) emitp_scatter_body(&f, &p, f.begin, f.end);
  st = emit_kernel_end(&f);
  if (st) return st;
  out->kind = EMIT_KIND_SCATTER;
  out->parallel_n = p.rows;
  /* chunks big enough that re-reading every index vector stays small next to the rows */
  int64_t g = p.rows / 8;
  out->grain = g < 1 ? 1 : g;
  snprintf(out->name, sizeof out->name, "%s", name);
  return HJ_OK;
}
