/* matmul.c — the matmul emitter: for a fusion whose hero is a canonical dot
   (passes/dot_canon.c) it JITs the register-blocked micro-kernels and fills the plan
   (matmul_plan.h) that backends/cpu/cpu_matmul.c drives: packing, cache blocking and
   threading live in the driver, the arithmetic lives here.

   Accepted: dot(lhs [B,M,K] or [M,K], rhs [B,K,N]/[K,N] or [B,N,K]/[N,K]) with
   lhs_contracting = {last}, rhs_contracting = {1 or 2} (rank 3) / {0 or 1} (rank 2), batch
   dims {0} or none, all f32, or an f32 lhs with a bf16 rhs (weights kept in bf16; the
   driver widens B as it packs it, the gemvs as they load it; CPU only, matmul_plan.h);
   each operand a fused parameter (or a reshape/bitcast of one:
   dense row-major data is the same bytes); the fusion's root the dot (or a reshape/bitcast
   of it), or an f32 epilogue around it (see below). Everything else — other element types,
   operands computed inside the fusion, tuple roots — is HJ_ERR_UNSUPPORTED with a message,
   and the runtime runs the fusion in the evaluator.
   Epilogue (passes/epilogue_fusion.c makes these: bias add through a broadcast, scale,
   GELU, residual add): every path from the dot to the root is elementwise ops and
   reshapes/bitcasts keeping the dot's non-size-1 dims, and the root is f32. The dot is then
   computed straight into the output buffer and a second kernel "NAME.epi" (kernel ABI of
   emit.h, [begin, end) = a run of output elements inside one row of C) rewrites each
   element in place as emit_elemental(root) with override_ins = dot, override_val = the
   element. The driver calls it on each mr x nc strip right after its last K block, while
   the strip is still in L1/L2 (with the plan's K split, gemv_kb, on each row as the
   partial results are summed).

   Worked example: AVX-512 host (vw = 16 floats), lhs f32[64,768] x rhs f32[768,2304].
   Plan: mr = 8, nr = 48 (3 vectors), kc = 80, nc = 2304 (B blocks of whole rows), K in
   2 blocks of 384 rows (gemv_kb = 384; 4 kc steps of 80 and one of 64 each). ukr "NAME.ukr8" keeps 8 x 3 = 24 <16 x float>
   accumulators in registers; per k it loads 3 vectors of the packed B panel (b + k*48),
   broadcasts 8 floats of the packed A panel (a + k*8) and issues 24 fmas. At the end it
   stores (first K block) or adds into C (later blocks): c + i*ldc + v*16. The driver packs
   A (8-row panels, k-major) and B (48-column panels, k-major) so both streams are
   contiguous, and calls ukr8 over the 8 x 48 tiles of C. M = 64 is 8 panels: no ukr for a
   remainder (M % 8 = 0). For M = 1 the plan asks for gemv instead: B streamed once, 1 or 8 whole
   rows at a time, into y in L1 (the driver gives each thread a contiguous run of K blocks
   and sums their partial results). */
#include "matmul_internal.h"
#include <stdlib.h>

/* ---- the micro-kernel ------------------------------------------------------------------------ */

/* ukr with |rows| rows (A stride |mr|), nr = nv vectors of vw floats; see matmul_plan.h. */
static void emx_emit_ukr(emit_module *em, const char *name, int rows, int mr, int nv, int vw, bool bf16) {
  LLVMBuilderRef b = em->b;
  LLVMValueRef fn = emx_fn_begin(em, name, vw);
  LLVMValueRef kc = LLVMGetParam(fn, 0), pa = LLVMGetParam(fn, 1), pb = LLVMGetParam(fn, 2);
  LLVMValueRef pc = LLVMGetParam(fn, 3), ldc = LLVMGetParam(fn, 4), accum = LLVMGetParam(fn, 5);
  LLVMTypeRef vt = LLVMVectorType(em->t_f32, (unsigned)vw);
  int nacc = rows * nv, nr = nv * vw;
  LLVMBasicBlockRef entry = LLVMGetInsertBlock(b);
  LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(em->llctx, fn, "k");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(em->llctx, fn, "done");
  LLVMBasicBlockRef add = LLVMAppendBasicBlockInContext(em->llctx, fn, "add");
  LLVMBasicBlockRef put = LLVMAppendBasicBlockInContext(em->llctx, fn, "put");
  LLVMValueRef zero = LLVMConstNull(vt);
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSGT, kc, emit_ci(em->t_i64, 0), ""), loop, done);

  LLVMPositionBuilderAtEnd(b, loop);
  LLVMValueRef k = LLVMBuildPhi(b, em->t_i64, "k"), acc[EMM_MAX_ACC], nxt[EMM_MAX_ACC];
  for (int i = 0; i < nacc; i++) acc[i] = LLVMBuildPhi(b, vt, "");
  LLVMValueRef bv[8];
  LLVMValueRef boff = LLVMBuildMul(b, k, emit_ci(em->t_i64, nr), "");
  for (int v = 0; v < nv; v++)
    bv[v] = emx_load_b(em, vt, emx_gep_b(em, pb, LLVMBuildAdd(b, boff, emit_ci(em->t_i64, v * vw), ""), bf16), bf16);
  LLVMValueRef aoff = LLVMBuildMul(b, k, emit_ci(em->t_i64, mr), "");
  for (int i = 0; i < rows; i++) {
    LLVMValueRef as = emx_load(em, em->t_f32, emx_gep(em, pa, LLVMBuildAdd(b, aoff, emit_ci(em->t_i64, i), "")));
    LLVMValueRef av = emx_splat(em, as, vw);
    for (int v = 0; v < nv; v++) nxt[i * nv + v] = emx_fma(em, av, bv[v], acc[i * nv + v]);
  }
  LLVMValueRef k1 = LLVMBuildAdd(b, k, emit_ci(em->t_i64, 1), "");
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, k1, kc, ""), loop, done);
  LLVMAddIncoming(k, (LLVMValueRef[]){ emit_ci(em->t_i64, 0), k1 }, (LLVMBasicBlockRef[]){ entry, loop }, 2);
  for (int i = 0; i < nacc; i++)
    LLVMAddIncoming(acc[i], (LLVMValueRef[]){ zero, nxt[i] }, (LLVMBasicBlockRef[]){ entry, loop }, 2);

  /* done: the final sums; then either C = acc or C = acc + C. */
  LLVMPositionBuilderAtEnd(b, done);
  LLVMValueRef fin[EMM_MAX_ACC];
  for (int i = 0; i < nacc; i++) {
    fin[i] = LLVMBuildPhi(b, vt, "");
    LLVMAddIncoming(fin[i], (LLVMValueRef[]){ zero, nxt[i] }, (LLVMBasicBlockRef[]){ entry, loop }, 2);
  }
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntNE, accum, emit_ci(em->t_i64, 0), ""), add, put);
  for (int pass = 0; pass < 2; pass++) {
    LLVMPositionBuilderAtEnd(b, pass ? add : put);
    for (int i = 0; i < rows; i++) {
      LLVMValueRef row = LLVMBuildMul(b, ldc, emit_ci(em->t_i64, i), "");
      for (int v = 0; v < nv; v++) {
        LLVMValueRef p = emx_gep(em, pc, LLVMBuildAdd(b, row, emit_ci(em->t_i64, v * vw), ""));
        LLVMValueRef x = fin[i * nv + v];
        if (pass) x = LLVMBuildFAdd(b, x, emx_load(em, vt, p), "");
        emx_store(em, x, p);
      }
    }
    LLVMBuildRetVoid(b);
  }
}

/* ---- analysis and the plan -------------------------------------------------------------------- */

/* The fused parameter behind |x| (through reshapes/bitcasts), or -1. */
static int emx_param_of(const hlo_instr *x) {
  while (x->op == HLO_OP_RESHAPE || x->op == HLO_OP_BITCAST) x = x->operands[0];
  return x->op == HLO_OP_PARAMETER ? (int)x->index : -1;
}

static hj_status emx_unsupported(emit_module *em, const hlo_instr *dot, const char *why) {
  char a[160], b[160];
  return hj__err(em->ctx, HJ_ERR_UNSUPPORTED, "emit matmul '%s': %s (lhs %s, rhs %s)", dot->name,
                 why, hlo_shape_str(&dot->operands[0]->shape, a, sizeof a),
                 hlo_shape_str(&dot->operands[1]->shape, b, sizeof b));
}

/* Fills the shape part of |p| from a canonical dot; NULL or why not. */
static const char *emx_check_dot(const hlo_instr *d, struct emit_matmul_plan *p) {
  const hlo_shape *ls = &d->operands[0]->shape, *rs = &d->operands[1]->shape;
  const hlo_dot_dims *dd = &d->dot;
  if (ls->type != HLO_F32 || (rs->type != HLO_F32 && rs->type != HLO_BF16) || d->shape.type != HLO_F32)
    return "only f32, or f32 x bf16 -> f32, is emitted";
  p->rhs_bf16 = rs->type == HLO_BF16;
  if (hlo_dot_is_panels(d, NULL)) {   /* lhs [M,P,kc], rhs [P,Q,kc,nr] (matmul_plan.h) */
    p->rhs_panels = true;
    p->B = 1;
    p->M = ls->dims[0];
    p->K = rs->dims[0] * rs->dims[2];
    p->N = rs->dims[1] * rs->dims[3];
    p->kc = rs->dims[2];
    p->nr = (int)rs->dims[3];
    return p->K > 0 ? NULL : "a panel-order rhs needs kc >= 1";
  }
  int r = ls->rank, nb = dd->lhs_batch.n;
  if (rs->rank != r || (r != 2 && r != 3) || nb != r - 2 || dd->rhs_batch.n != nb ||
      dd->lhs_contract.n != 1 || dd->rhs_contract.n != 1 || (nb && (dd->lhs_batch.v[0] != 0 ||
      dd->rhs_batch.v[0] != 0)) || dd->lhs_contract.v[0] != r - 1)
    return "dot is not canonical (run passes/dot_canon.c)";
  int64_t rc = dd->rhs_contract.v[0];
  if (rc != r - 1 && rc != r - 2) return "dot is not canonical (rhs contracting dim)";
  p->rhs_transposed = rc == r - 1;
  p->B = nb ? ls->dims[0] : 1;
  p->M = ls->dims[r - 2];
  p->K = ls->dims[r - 1];
  p->N = p->rhs_transposed ? rs->dims[r - 2] : rs->dims[r - 1];
  return NULL;
}

/* The root is the dot, possibly behind reshapes/bitcasts. */
static bool emx_root_is_dot(const hlo_comp *c, const hlo_instr *dot) {
  const hlo_instr *r = c->root;
  while (r != dot && (r->op == HLO_OP_RESHAPE || r->op == HLO_OP_BITCAST)) r = r->operands[0];
  return r == dot;
}

/* Non-size-1 dims of |s| into |out|; their count. */


/* Every use of |x| in |c| (transitively, up to the root) is elementwise or a reshape/bitcast
   on the dot's non-size-1 dims: the dot is read only at the output element's own index. */
static bool emx_epilogue_ok(const hlo_comp *c, const hlo_instr *x, const hlo_shape *ds, int depth) {
  if (depth > 64) return false;
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++) {
    const hlo_instr *u = c->instrs[i];
    bool uses = false;
    for (int k = 0; k < u->noperands; k++) uses |= u->operands[k] == x;
    if (!uses) continue;
    bool ok = (hlo_op_is_elementwise(u) || u->op == HLO_OP_RESHAPE ||
               (u->op == HLO_OP_BITCAST && hlo_shape_layout_is_default(&u->shape))) &&
              hlo_shape_is_array(&u->shape) && hlo_dot_epilogue_dims(&u->shape, ds);
    if (!ok || !emx_epilogue_ok(c, u, ds, depth + 1)) return false;
  }
  return true;
}

/* Why the fusion's root cannot be handled (NULL: it can); *epi: an epilogue is needed. */
static const char *emx_check_root(const hlo_comp *c, const hlo_instr *dot, bool *epi) {
  *epi = false;
  if (emx_root_is_dot(c, dot)) return NULL;
  if (!hlo_shape_is_array(&c->root->shape) || c->root->shape.type != HLO_F32)
    return "epilogue root is not an f32 array";
  hlo_shape ds = dot->shape;   /* a panel-order dot's epilogue sees C [M,N] (ir.h) */
  (void)hlo_dot_is_panels(dot, &ds);
  if (!hlo_dot_epilogue_dims(&c->root->shape, &ds) || !emx_epilogue_ok(c, dot, &ds, 0))
    return "the ops after the dot are not an elementwise epilogue";
  *epi = true;
  return NULL;
}

/* NAME.epi: out[t] = root(dot = out[t]) for t in [begin, end), one row of C (see top). */
static hj_status emx_emit_epilogue(emit_module *em, const hlo_instr *fusion, const hlo_instr *dot,
                                   const struct emit_matmul_plan *p, const char *name) {
  emit_fn f;
  hj_status st = emit_kernel_begin(&f, em, name, fusion);
  if (st) return st;
  LLVMBuilderRef b = em->b;
  const hlo_instr *root = f.comp->root;
  LLVMValueRef row = LLVMBuildSDiv(b, f.begin, emit_ci(em->t_i64, p->N), "row");
  LLVMValueRef rowbase = LLVMBuildMul(b, row, emit_ci(em->t_i64, p->N), "");
  LLVMValueRef bi = LLVMBuildSDiv(b, row, emit_ci(em->t_i64, p->M), "b");
  LLVMValueRef mi = LLVMBuildSub(b, row, LLVMBuildMul(b, bi, emit_ci(em->t_i64, p->M), ""), "m");
  emit_loop l;
  emit_loop_begin(&f, &l, f.begin, f.end, 1, "epi");
  LLVMValueRef nj = LLVMBuildSub(b, l.iv, rowbase, "n");
  /* the dot's (b, m, n) -> the root's index: its non-size-1 dims take them in order */
  int64_t bmn_dims[3] = { p->B, p->M, p->N };
  LLVMValueRef bmn[3] = { bi, mi, nj };
  emit_index idx;
  emit_dot_root_index(&f, root, bmn_dims, bmn, &idx);
  f.override_ins = dot;
  f.override_val = emit_load_elem(&f, HLO_F32, f.outs[0], l.iv);
  LLVMValueRef v = emit_elemental(&f, root, &idx);
  emit_store_elem(&f, HLO_F32, f.outs[0], l.iv, v);
  emit_loop_end(&f, &l);
  return emit_kernel_end(&f);
}

/* Register and cache blocking for the host's vector width (floats per register |vw|). */
int emit_matmul_panel_nr(int vector_bytes) {
  int vw = vector_bytes / 4 < 4 ? 4 : vector_bytes / 4 > 16 ? 16 : vector_bytes / 4;
  return vw >= 16 ? 3 * vw : 2 * vw;
}

/* A panel-order rhs (matmul_plan.h): kc and nr are the layout's, and nothing is packed
   but A. The driver sweeps the panels of a kc step one after the other, each read once
   from memory, contiguous, and used by every mr-row strip of the A block while it is in
   L1/L2; the threads split N (each its own panels: contiguous stretches). M = 1 runs the
   panel gemv (gemvp, matmul_gemv.c: a panel's outputs in registers from its first row to
   its last); gemv_rows is unused here. */
static void emx_panel_blocking(struct emit_matmul_plan *p) {
  int64_t mpad = (p->M + p->mr - 1) / p->mr * p->mr;
  p->mc = mpad < 1536 ? mpad : 1536 / p->mr * p->mr;
  p->nc = p->nr;
  p->m_rem = (int)(p->M % p->mr);
  p->use_gemv = p->M == 1;
  p->gemv_cols = p->nr;
  p->gemv_kb = p->K;
  p->gemv_rows = 8;
}

static void emx_choose_blocking(struct emit_matmul_plan *p, int vw) {
  p->vw = vw;
  p->mr = vw >= 16 ? 8 : 6;   /* AVX-512: 32 zmm -> 8 x 3 vectors = 24 accumulators */
  int nr = emit_matmul_panel_nr(vw * 4);   /* AVX2/SSE: 16 registers -> 6 x 2 = 12 */
  if (p->rhs_panels) {
    emx_panel_blocking(p);   /* p->nr is the layout's: emit_matmul_fusion checks it */
    return;
  }
  p->nr = nr;
  /* B block (kc x nc, ~800 KB) in L2, re-read from there once per mr rows; A block: all of
     M up to a limit (lives in L3 for big M). A transposed B is packed from whole rows of up
     to 768 floats (one long read per row instead of two halves: ~10% on the logits shape,
     same elsewhere; 8 x 48 / kc 384 measured best or equal among 12x32, 14x32, 6x64 and kc
     256/512 on Zen 5). */
  p->kc = 384;
  p->nc = (512 / p->nr + 1) * p->nr;
  /* B normal, N up to 6144: the B block is whole rows (nc = N, kc = what fits in ~768 KiB,
     a multiple of 8 from 32 to 384), so packing reads one contiguous stretch of B. Blocks
     of 528 columns read 2 KiB pieces of 12 KiB rows: 8-9 GB/s from memory here against
     22 for whole rows (fc, 768 x 3072, one thread), and a GPT-2 block's weights come from
     memory. gemv_kb (below) then splits K so that threads need not split the rows. Only
     up to M = 128, where packing is a large share: at M = 256 the 12 passes over C that
     kc = 64 makes (3 MiB for fc, in L3) cost 4-5% on one thread. */
  int64_t split_kb = 0;
  if (!p->rhs_transposed && p->N > 0 && p->M > 1 && p->M <= 128) {
    int64_t fit = 786432 / (p->N * 4) / 8 * 8;
    if (fit >= 32) {
      p->kc = fit < 384 ? fit : 384;
      p->nc = (p->N + p->nr - 1) / p->nr * p->nr;
      /* one batch (several keep the threads busy without): K in 2 halves (gemv_kb), each a
         whole number of kc steps of equal size, so the halves cost the same (attention
         projection, N = 768: kc 192 x 2 per half, not 256 + 128) */
      int64_t kb = (p->K + 15) / 16 * 8, steps = (kb + p->kc - 1) / p->kc;
      if (p->B == 1 && kb >= 64 && kb < p->K && 2 * p->M * p->N * 4 <= ((int64_t)16 << 20)) {
        p->kc = ((kb + steps - 1) / steps + 7) / 8 * 8;
        split_kb = kb;
      }
    }
  }
  if (p->rhs_transposed) {
    p->kc = p->K < 768 ? (p->K > 0 ? p->K : 1) : 768;
    int64_t nc = 786432 / (p->kc * 4) / p->nr * p->nr;
    p->nc = nc > p->nr ? (nc < 4096 ? nc : 4096) : p->nr;
  }
  int64_t mpad = (p->M + p->mr - 1) / p->mr * p->mr;
  p->mc = mpad < 1536 ? mpad : 1536 / p->mr * p->mr;
  p->m_rem = (int)(p->M % p->mr);
  p->use_gemv = p->M == 1;
  /* gemv_cols: the driver's column splits are multiples of it; for gemvt also the rows of
     B^T read side by side. One row at a time (B^T read as one sequential stream) streams
     fastest inside a model: GPT-2 124M decode, Zen 4, 1 thread, every matrix (out, in)
     (HLOJIT_PROFILE=1 build/gpt2 --layouts stored), per matrix 30.8-32.1 GB/s with 1 row,
     14-23 with 2, 16.5-24 with 4 (a block 0.98 / 1.86 / 1.61 ms, the lm_head over wte
     4.82 / 11.0 / 9.29 ms). Earlier, bench_matmul's back-to-back calls had 4 rows at 1.02
     of the bandwidth and 8 at 0.90 on the logits shape (768 x 50304): the same lesson as
     the gemvp's (matmul_gemv.c EMM_PANEL_G). */
  p->gemv_cols = p->rhs_transposed ? 1 : 4 * vw;
  /* B normal: K in 4 blocks of gemv_kb rows (at least 64), each block's partial y summed
     in block order afterwards; fixed by the shape alone, so the bits do not depend on the
     thread count. Few long blocks stream best: with 2 threads, fc (768 x 3072) read B at
     0.89 of the bandwidth in 12 blocks, 0.94 in 6 and 0.97 in 4 (1 thread: 0.93 -> 0.98);
     more threads than blocks split N as well. Partials are capped at 16 MiB. */
  p->gemv_kb = p->K > 0 ? p->K : 1;
  /* B normal: rows of B per pass over y. Short rows (y of at most 4 KiB: attention
     projection, fc projection) one at a time, B then being one sequential stream; longer
     rows 12 at a time (12 against 8: GPT-2 124M decode, --layouts plain, 1 thread, a block
     1.02-1.06 ms against 1.03-1.08, the lm_head 4.99-5.17 against 5.41-5.53; bf16 a block
     0.57-0.60 against 0.61-0.64 (both without the prefetch, matmul_gemv.c); 2 threads alike
     within the noise; the figures for every R in matmul_gemv.c). The same fma chain per
     column whatever the count, so the same bits. Earlier, 1 / 8 rows (GPT-2 124M decode
     block, HLOJIT_PROFILE=1 build/gpt2 ... --threads 1, Zen 4, 4 runs each, alternated):
     1.27-1.43 ms against 1.47-1.59 with 4 rows for all; attention projection
     14 -> 22-25 GB/s, qkv 17-18 -> 20-21, fc 18-19 -> 20-21; 2 threads 0.96-1.13 ms against
     1.10-1.18; bf16 weights 0.88-0.98 ms against 1.04-1.26. One row for the long rows too
     lost (fc 13-17 GB/s; see emx_gemv_rows), 8 rows for the short ones lost to one (18 GB/s
     for the attention projection against 22-25). */
  p->gemv_rows = p->N * 4 <= 4096 ? 1 : 12;
  if (p->use_gemv && !p->rhs_transposed) {
    int64_t kb = (p->K + 3) / 4;
    kb = (kb < 64 ? 64 : kb + 7) / 8 * 8;
    while (kb < p->K && p->B * ((p->K + kb - 1) / kb) * p->N * 4 > ((int64_t)16 << 20)) kb *= 2;
    if (kb < p->K) p->gemv_kb = kb;
  }
  /* gemm, B normal in whole rows: the 2 K blocks chosen above, each block's partial C
     summed in block order afterwards (partials capped at 16 MiB), so that 2 threads each
     pack whole rows of their own half of B (splitting N: half rows, 8-9 GB/s from memory
     in all). Fixed by the shape alone, like the gemv's. */
  if (split_kb) p->gemv_kb = split_kb;
}

void emit_matmul_plan_free(struct emit_matmul_plan *p) { free(p); }

hj_status emit_matmul_fusion(emit_module *em, const hlo_instr *fusion, const hlo_instr *hero,
                             const char *name, emit_kernel *out) {
  const hlo_comp *c = fusion->calls[0];
  if (!hero || hero->op != HLO_OP_DOT)
    return hj__err(em->ctx, HJ_ERR_INTERNAL, "emit matmul '%s': hero is not a dot", fusion->name);
  struct emit_matmul_plan tmp = { 0 };
  const char *why = emx_check_dot(hero, &tmp);
  bool epi = false;
  if (!why) why = emx_check_root(c, hero, &epi);
  tmp.lhs_buf = emx_param_of(hero->operands[0]);
  tmp.rhs_buf = emx_param_of(hero->operands[1]);
  if (!why && (tmp.lhs_buf < 0 || tmp.rhs_buf < 0)) why = "an operand is computed inside the fusion";
  if (why) return emx_unsupported(em, hero, why);
  tmp.out_buf = (int)arrlen(c->params);
  int vw = em->target.vector_bytes / 4;
  if (vw < 4) vw = 4;
  emx_choose_blocking(&tmp, vw > 16 ? 16 : vw);
  if (tmp.rhs_panels && (em->target.gpu || tmp.nr != emit_matmul_panel_nr(em->target.vector_bytes)))
    return emx_unsupported(em, hero, "the panel width is not the micro-kernel's (passes/dot_canon.c keeps "
                                     "only the target's matmul_panel_nr)");

  struct emit_matmul_plan *p = calloc(1, sizeof *p);
  if (!p) return hj__err(em->ctx, HJ_ERR_OOM, "emit matmul '%s': out of memory", fusion->name);
  *p = tmp;
  /* The kernels depend only on the blocking: shared per module when the backend allows
     (a GPT-2 block's six matmuls need two micro-kernels, not six; O3 and codegen of the
     micro-kernel were most of a matmul fusion's compile time). */
  const char *pre = em->shared_prefix[0] ? em->shared_prefix : name;
  const bool b16 = p->rhs_panels && p->rhs_bf16;   /* the kernels read bf16 panels (else B is packed f32) */
  const char *sfx = p->rhs_bf16 ? "_bf16" : "";
  snprintf(p->ukr_name[0], sizeof p->ukr_name[0], "%s.ukr%d_%dx%d%s", pre, p->mr, p->mr, p->nr, b16 ? sfx : "");
  if (!LLVMGetNamedFunction(em->mod, p->ukr_name[0]))
    emx_emit_ukr(em, p->ukr_name[0], p->mr, p->mr, p->nr / p->vw, p->vw, b16);
  if (p->m_rem) {
    snprintf(p->ukr_name[1], sizeof p->ukr_name[1], "%s.ukr%d_%dx%d%s", pre, p->m_rem, p->mr, p->nr,
             b16 ? sfx : "");
    if (!LLVMGetNamedFunction(em->mod, p->ukr_name[1]))
      emx_emit_ukr(em, p->ukr_name[1], p->m_rem, p->mr, p->nr / p->vw, p->vw, b16);
  }
  if (p->use_gemv && p->rhs_panels) {
    snprintf(p->gemv_name, sizeof p->gemv_name, "%s.gemvp%d_%d%s", pre, p->vw, p->nr, sfx);
    if (!LLVMGetNamedFunction(em->mod, p->gemv_name)) emm_emit_gemvp(em, p->gemv_name, p->vw, p->nr, b16);
  } else if (p->use_gemv) {
    snprintf(p->gemv_name, sizeof p->gemv_name, "%s.gemv%s%d_r%d%s", pre, p->rhs_transposed ? "t" : "",
             p->rhs_transposed ? p->gemv_cols : p->vw, p->gemv_rows, sfx);
    if (!LLVMGetNamedFunction(em->mod, p->gemv_name)) {
      if (p->rhs_transposed) emm_emit_gemvt(em, p->gemv_name, p->gemv_cols, p->vw, p->rhs_bf16);
      else emm_emit_gemv(em, p->gemv_name, p->vw, p->gemv_rows, p->rhs_bf16);
    }
  }
  if (epi) {
    snprintf(p->epi_name, sizeof p->epi_name, "%s.epi", name);
    hj_status st = emx_emit_epilogue(em, fusion, hero, p, p->epi_name);
    if (st) {
      free(p);
      return st;
    }
  }
  memset(out, 0, sizeof *out);
  snprintf(out->name, sizeof out->name, "%s", name);
  out->kind = EMIT_KIND_MATMUL;
  out->parallel_n = 1;
  out->grain = 1;
  out->matmul = p;
  return HJ_OK;
}


/* ---- for the GPU matmul emitter (gpu_matmul.c; gpu_internal.h declares it) -------------------
   The same acceptance as emit_matmul_fusion: fills |p|'s shape and buffer fields; NULL, or
   why the fusion is not a matmul this emitter takes. *epi: the root is an epilogue. */
const char *emitp_matmul_check(const hlo_instr *fusion, const hlo_instr *dot,
                               struct emit_matmul_plan *p, bool *epi);
const char *emitp_matmul_check(const hlo_instr *fusion, const hlo_instr *dot,
                               struct emit_matmul_plan *p, bool *epi) {
  *epi = false;
  if (!dot || dot->op != HLO_OP_DOT || fusion->ncalls < 1 || !fusion->calls[0]) return "the hero is not a dot";
  const char *why = emx_check_dot(dot, p);
  if (!why) why = emx_check_root(fusion->calls[0], dot, epi);
  p->lhs_buf = emx_param_of(dot->operands[0]);
  p->rhs_buf = emx_param_of(dot->operands[1]);
  if (!why && (p->lhs_buf < 0 || p->rhs_buf < 0)) why = "an operand is computed inside the fusion";
  if (!why && p->rhs_bf16) why = "a bf16 rhs is emitted for the CPU only";
  if (!why && p->rhs_panels) why = "a panel-order rhs is emitted for the CPU only";
  p->out_buf = (int)arrlen(fusion->calls[0]->params);
  return why;
}
