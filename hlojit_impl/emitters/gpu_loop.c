/* gpu_loop.c — the GPU loop emitter: every output element from the elemental emitter, the
   output's linear index split over threads, V consecutive elements per thread.

   Mapping, for N output elements (every root leaf has N elements; multi-output fusions
   write all leaves at the same linear index): V = 16 bytes / the widest element the fusion
   moves (f32: 4, f16: 8, f64: 2, at most 8), blocks of 256 threads (fewer, a multiple of 32,
   for small N), thread g owns elements [g*V, g*V + V). Consecutive threads own consecutive
   16-byte pieces, so a warp reads and writes 512 contiguous bytes: coalesced. Each element's
   linear index is delinearised (emit_delinearize records it, so a parameter read at the
   output's own index is a load at that same linear index and the div/mod is dead code);
   the V loads of one parameter then sit at base, base+1, ..., base+V-1 with base a multiple
   of V and the pointer 16-byte aligned (emit.h's GPU ABI), and LLVM's load/store
   vectoriser merges them into one ld.global.nc.v4.f32 (one st.global.v4.f32 for the
   stores). Parameters read at other indices (transposes, broadcasts, gathers, slices) are
   scalar loads at their own indices: correct, and as coalesced as the index map allows.

   Bounds: when N is a multiple of V, a thread's V elements are all in or all out (threads
   past the end return; none when the grid divides exactly); otherwise the last thread's
   elements are each checked (the tail), every other thread takes the unchecked path.

   Walk-through, GELU on f32[64,3072] (N = 196608): V = 4, 49152 threads, 192 blocks of 256;
   thread g: base = 4g; x0..x3 = p0[base..base+3] (one 16-byte load), four GELUs (emit_math's
   tanh), out[base..base+3] (one 16-byte store). No guard: 49152 = 192 * 256.

   In place (emit_fusion_inplace): output 0 is operand k's buffer; the kernel reads operand
   k only at the elements it writes, each before writing it (emit_loop_inplace_ok). */
#include "gpu_internal.h"

/* Every leaf at linear index |lin|. */
static void emgl_element(emit_fn *f, const emitp_leaf *lv, int n, LLVMValueRef lin) {
  emit_index idx;
  emit_delinearize(f, lv[0].shape, lin, &idx);
  for (int k = 0; k < n; k++) {
    emit_index own = idx;
    if (!hlo_same_dims(lv[k].shape, lv[0].shape)) emit_delinearize(f, lv[k].shape, lin, &own);
    LLVMValueRef v = lv[k].sub >= 0 ? emitp_reduce(f, lv[k].ins, lv[k].sub, &own)
                                    : emit_elemental(f, lv[k].ins, &own);
    emit_store_elem(f, lv[k].shape->type, f->outs[k], lin, v);
  }
}

static LLVMValueRef emgl_add(emit_fn *f, LLVMValueRef a, int64_t b) {
  return b ? LLVMBuildNUWAdd(f->em->b, a, emit_i64(f, b), "lin") : a;
}

hj_status emitg_loop(emit_module *em, const hlo_instr *fusion, const char *name,
                     int inplace_operand, emit_kernel *out) {
  const char *fname = fusion && fusion->name ? fusion->name : "?";
  memset(out, 0, sizeof *out);
  if (!fusion || fusion->ncalls < 1 || !fusion->calls[0])
    return hj__err(em->ctx, HJ_ERR_INTERNAL, "emit '%s': not a fusion", fname);
  emitp_leaf lv[64];
  int n = emitp_leaves(fusion->calls[0], lv, 64);
  if (n < 1) return hj__err(em->ctx, HJ_ERR_UNSUPPORTED, "emit '%s': the root is not arrays or "
                            "a tuple of at most 64 arrays", fname);
  int64_t N = hlo_shape_numel(lv[0].shape);
  for (int k = 1; k < n; k++)
    if (hlo_shape_numel(lv[k].shape) != N)
      return hj__err(em->ctx, HJ_ERR_UNSUPPORTED, "emit '%s': loop fusion roots with different "
                     "element counts", fname);
  int V = 16 / emitg_max_elem_bytes(fusion);
  if (V > 8) V = 8;
  if (V < 1) V = 1;
  int64_t threads = (N + V - 1) / V;
  int block = threads >= 256 ? 256 : (int)((threads + 31) / 32 * 32);
  if (block < 32) block = 32;
  emit_fn f;
  hj_status st = emitg_kernel_begin(&f, em, name, fusion, inplace_operand, block);
  if (st) return st;
  if (f.nouts != n) emit_fail(&f, HJ_ERR_SHAPE, "%d output buffers for %d root leaves", f.nouts, n);
  if (N > 0 && f.status == HJ_OK) {
    LLVMBuilderRef b = em->b;
    LLVMValueRef gid = emitg_global_id(&f);
    LLVMValueRef base = V > 1 ? LLVMBuildNUWMul(b, gid, emit_i64(&f, V), "base") : gid;
    int64_t blocks = (threads + block - 1) / block;
    emitg_region guard = { 0 };
    bool guarded = blocks * block != threads;
    if (guarded) emitg_if_begin(&f, &guard, LLVMBuildICmp(b, LLVMIntULT, gid, emit_i64(&f, threads), ""), "in");
    if (N % V == 0) {
      for (int i = 0; i < V; i++) emgl_element(&f, lv, n, emgl_add(&f, base, i));
    } else {
      LLVMValueRef full = LLVMBuildICmp(b, LLVMIntSLE, emgl_add(&f, base, V), emit_i64(&f, N), "full");
      emitg_region r;
      emitg_if_begin(&f, &r, full, "vec");
      for (int i = 0; i < V; i++) emgl_element(&f, lv, n, emgl_add(&f, base, i));
      emitg_if_end(&f, &r);
      emitg_if_begin(&f, &r, LLVMBuildNot(b, full, ""), "tail");
      for (int i = 0; i < V; i++) {
        emitg_region e;
        LLVMValueRef lin = emgl_add(&f, base, i);
        emitg_if_begin(&f, &e, LLVMBuildICmp(b, LLVMIntSLT, lin, emit_i64(&f, N), ""), "elem");
        emgl_element(&f, lv, n, lin);
        emitg_if_end(&f, &e);
      }
      emitg_if_end(&f, &r);
    }
    if (guarded) emitg_if_end(&f, &guard);
  }
  st = emit_kernel_end(&f);
  if (st) return st;
  snprintf(out->name, sizeof out->name, "%s", name);
  out->kind = EMIT_KIND_LOOP;
  out->parallel_n = N;
  out->grain = 1;
  emitg_launch_1d(out, threads, block);
  return HJ_OK;
}
