/* gpu_matmul.c — the GPU matmul emitter: a fusion whose hero is a canonical dot (the CPU
   emitter's acceptance, matmul.c's emitp_matmul_check: f32, operands fused parameters, an
   elementwise epilogue at most) becomes two ways to run it, and the backend picks one per
   shape at run time (matmul_plan.h's gpu_* fields):
     - NAME_mm, the shared-memory tiled kernel (gpu_mm_tiled.c; gpu_mm_skinny.c's for at
       most EMIT_GPU_SKINNY_MAX_M rows), when emit_target.gpu_tiled_matmul says the target
       runs it: tiles of A and B staged in shared memory, an 8x8
       register block per thread, float4 loads, double buffering, bounds for any shape,
       batched over blockIdx.z) with the epilogue fused: for each of a thread's 64 outputs
       the generator calls back here, and the elemental emitter computes the fusion's root
       at that element with the dot overridden by the accumulator (bias through a
       broadcast, GELU, a residual add: whatever elementwise code the fusion holds). The
       kernel's parameters are A, B, C, then every operand of the fusion (the epilogue
       reads its operands through those);
     - the library path: a cuBLAS gemm into the output, then (when there is an epilogue)
       NAME_epi, a GPU loop kernel that rewrites each output element in place as the root
       with the dot overridden by the element's value (the CPU's NAME.epi, as a GPU kernel).
   A fusion with more than 16 operands, or a tiled kernel the generator refuses, keeps the
   library path only.

   The epilogue index: the root keeps the dot's non-size-1 dims in order (the acceptance
   checks it), so the root's index takes (batch, row, col) in order for its non-size-1 dims
   and 0 elsewhere, and the root's linear index equals the dot's. */
#include "gpu_internal.h"
#include "matmul_plan.h"
#include "gpu_mm.h"
#include <stdlib.h>

typedef struct gmm_ctx {
  emit_module *em;
  const hlo_instr *fusion, *dot;
  const struct emit_matmul_plan *p;
  hj_status st;
} gmm_ctx;

/* The root at (batch, row, col) with the dot overridden by |acc|, into emit_fn |f|. */
static LLVMValueRef gmm_root_at(emit_fn *f, const gmm_ctx *c, LLVMValueRef acc, LLVMValueRef batch,
                                LLVMValueRef row, LLVMValueRef col) {
  const hlo_instr *root = f->comp->root;
  int64_t dims[3] = { c->p->B, c->p->M, c->p->N };
  LLVMValueRef bmn[3] = { batch, row, col };
  emit_index idx;
  emit_dot_root_index(f, root, dims, bmn, &idx);
  f->override_ins = c->dot;
  f->override_val = acc;
  return emit_elemental(f, root, &idx);
}

/* The generators' epilogue (emit_gpu_mm.epilogue). */
static LLVMValueRef gmm_epilogue(void *user, const emit_gpu_mm_epi *a) {
  gmm_ctx *c = user;
  emit_module *em = c->em;
  emit_fn f;
  memset(&f, 0, sizeof f);
  f.em = em;
  f.fn = a->kernel;
  f.fusion = c->fusion;
  f.comp = c->fusion->calls[0];
  f.nparams = a->n_extra;
  for (int k = 0; k < a->n_extra; k++) f.params[k] = a->extra[k];
  f.nouts = 0;
  LLVMPositionBuilderAtEnd(em->b, LLVMGetInsertBlock(a->b));
  LLVMValueRef v = gmm_root_at(&f, c, a->acc, a->batch, a->row, a->col);
  arrfree(f.cache);
  if (f.status != HJ_OK && c->st == HJ_OK) c->st = f.status;
  return v;
}

/* NAME_epi: out0[i] = root(dot = out0[i]) for every output element, 4 per thread. */
static hj_status gmm_emit_epi(emit_module *em, const hlo_instr *fusion, const gmm_ctx *c,
                              const char *name, struct emit_matmul_plan *p) {
  int64_t N = p->B * p->M * p->N, V = 4, threads = (N + V - 1) / V;
  int block = threads >= 256 ? 256 : (int)((threads + 31) / 32 * 32);
  if (block < 32) block = 32;
  emit_fn f;
  hj_status st = emitg_kernel_begin(&f, em, name, fusion, -1, block);
  if (st) return st;
  LLVMBuilderRef b = em->b;
  LLVMValueRef base = LLVMBuildNUWMul(b, emitg_global_id(&f), emit_i64(&f, V), "base");
  for (int i = 0; i < V && N > 0; i++) {
    LLVMValueRef lin = LLVMBuildNUWAdd(b, base, emit_i64(&f, i), "lin");
    emitg_region r;
    emitg_if_begin(&f, &r, LLVMBuildICmp(b, LLVMIntSLT, lin, emit_i64(&f, N), ""), "epi");
    LLVMValueRef mn = emit_i64(&f, p->M * p->N);
    LLVMValueRef bi = LLVMBuildUDiv(b, lin, mn, "b");
    LLVMValueRef rem = LLVMBuildURem(b, lin, mn, "");
    LLVMValueRef row = LLVMBuildUDiv(b, rem, emit_i64(&f, p->N), "m");
    LLVMValueRef col = LLVMBuildURem(b, rem, emit_i64(&f, p->N), "n");
    LLVMValueRef acc = emit_load_elem(&f, HLO_F32, f.outs[0], lin);
    LLVMValueRef v = gmm_root_at(&f, c, acc, bi, row, col);
    emit_store_elem(&f, HLO_F32, f.outs[0], lin, v);
    f.override_ins = NULL;
    emitg_if_end(&f, &r);
  }
  st = emit_kernel_end(&f);
  if (st) return st;
  emit_kernel k = { 0 };
  emitg_launch_1d(&k, threads, block);
  memcpy(p->gpu_epi_grid, k.grid, sizeof k.grid);
  memcpy(p->gpu_epi_block, k.block, sizeof k.block);
  return HJ_OK;
}

hj_status emitg_matmul(emit_module *em, const hlo_instr *fusion, const hlo_instr *hero,
                       const char *name, emit_kernel *out) {
  memset(out, 0, sizeof *out);
  struct emit_matmul_plan tmp = { 0 };
  bool epi = false;
  const char *why = emitp_matmul_check(fusion, hero, &tmp, &epi);
  if (why) {
    char a[160] = "?", b2[160] = "?";
    if (hero && hero->noperands == 2) {
      hlo_shape_str(&hero->operands[0]->shape, a, sizeof a);
      hlo_shape_str(&hero->operands[1]->shape, b2, sizeof b2);
    }
    return hj__err(em->ctx, HJ_ERR_UNSUPPORTED, "GPU matmul '%s': %s (lhs %s, rhs %s)",
                   hero && hero->name ? hero->name : "?", why, a, b2);
  }
  struct emit_matmul_plan *p = calloc(1, sizeof *p);
  if (!p) return hj__err(em->ctx, HJ_ERR_OOM, "GPU matmul '%s': out of memory", fusion->name);
  *p = tmp;
  p->gpu = true;
  gmm_ctx c = { em, fusion, hero, p, HJ_OK };
  hj_status st = HJ_OK;
  if (epi) {
    snprintf(p->epi_name, sizeof p->epi_name, "%s_epi", name);
    st = gmm_emit_epi(em, fusion, &c, p->epi_name, p);
  }
  if (st == HJ_OK && em->target.gpu_tiled_matmul && fusion->noperands <= 16 && p->M > 0 && p->N > 0) {
    snprintf(p->gpu_tiled_name, sizeof p->gpu_tiled_name, "%s_mm", name);
    emit_gpu_mm s;   /* the skinny kernel for a few rows, else the tiled one (gpu_mm.h) */
    emit_gpu_mm_init(&s);
    s.m = p->M, s.n = p->N, s.k = p->K, s.batch = p->B, s.b_nk = p->rhs_transposed;
    s.stride_a = p->M * p->K, s.stride_b = p->K * p->N, s.stride_c = p->M * p->N;
    s.sm_count = em->target.gpu_sm_count;
    s.n_extra = epi ? fusion->noperands : 0;
    s.epilogue = epi ? gmm_epilogue : NULL;
    s.epilogue_user = &c;
    emit_gpu_mm_launch l;
    emit_gpu_err e = { 0 };
    LLVMValueRef last = LLVMGetLastFunction(em->mod);
    hj_status ts = s.m <= EMIT_GPU_SKINNY_MAX_M ? emit_gpu_mm_skinny(em->mod, p->gpu_tiled_name, &s, &l, &e)
                                                : emit_gpu_mm_tiled(em->mod, p->gpu_tiled_name, &s, &l, &e);
    if (ts != HJ_OK) hj__err(em->ctx, ts, "GPU matmul '%s': %s", fusion->name, e.msg);
    if (ts == HJ_OK) ts = c.st;
    if (ts == HJ_OK) {
      memcpy(p->gpu_grid, l.grid, sizeof l.grid);
      memcpy(p->gpu_block, l.block, sizeof l.block);
      p->gpu_shared = 0;   /* the tiles are static shared arrays */
      p->gpu_tile = l.tile;
      p->gpu_n_extra = fusion->noperands;
    } else if (ts == HJ_ERR_UNSUPPORTED || ts == HJ_ERR_INVALID_ARG) {
      emitp_drop_after(em->mod, last);   /* the library path alone */
      p->gpu_tiled_name[0] = 0;
      hj__ctx_err(em->ctx)[0] = 0;
    } else {
      st = ts;
    }
  }
  if (st != HJ_OK) {
    free(p);
    return st;
  }
  snprintf(out->name, sizeof out->name, "%s", name);
  out->kind = EMIT_KIND_MATMUL;
  out->parallel_n = 1;
  out->grain = 1;
  out->matmul = p;
  return HJ_OK;
}
