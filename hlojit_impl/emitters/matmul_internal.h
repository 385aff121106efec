/* matmul_internal.h — what the matmul emitter's two files share: matmul.c (the micro-kernel,
   the plan, the epilogue, the entry points) and matmul_gemv.c (the M = 1 kernels: gemv,
   gemvt, gemvp). LLVM-C building helpers, static inline so that the single-header build
   (all.c includes both files) has one copy. */
#ifndef HLOJIT_MATMUL_INTERNAL_H
#define HLOJIT_MATMUL_INTERNAL_H
#include "emit.h"
#include "matmul_plan.h"

#define EMM_MAX_ACC 32   /* the most vector accumulators of a kernel (array sizes) */


static inline LLVMValueRef emx_gep(emit_module *em, LLVMValueRef base, LLVMValueRef off) {
  return LLVMBuildGEP2(em->b, em->t_f32, base, &off, 1, "");
}

static inline LLVMValueRef emx_load(emit_module *em, LLVMTypeRef t, LLVMValueRef p) {
  LLVMValueRef v = LLVMBuildLoad2(em->b, t, p, "");
  LLVMSetAlignment(v, 4);
  return v;
}

/* B's elements (the gemvs): f32, or bf16 widened to f32 as loaded (plan's rhs_bf16). */
static inline LLVMValueRef emx_gep_b(emit_module *em, LLVMValueRef base, LLVMValueRef off, bool bf16) {
  return LLVMBuildGEP2(em->b, bf16 ? em->t_i16 : em->t_f32, base, &off, 1, "");
}

/* bf16 bits (i16 or <n x i16>) -> f32 of the same shape: zext, shift up 16, bitcast. */
static inline LLVMValueRef emx_widen_bf16(emit_module *em, LLVMValueRef h, LLVMTypeRef ft) {
  LLVMBuilderRef b = em->b;
  LLVMTypeRef ht = LLVMTypeOf(h);
  bool vec = LLVMGetTypeKind(ht) == LLVMVectorTypeKind;
  unsigned n = vec ? LLVMGetVectorSize(ht) : 1;
  LLVMTypeRef it = vec ? LLVMVectorType(em->t_i32, n) : em->t_i32;
  LLVMValueRef w = LLVMBuildZExt(b, h, it, "");
  LLVMValueRef sh = LLVMConstInt(em->t_i32, 16, 0);
  if (vec) {
    LLVMValueRef lanes[16];
    for (unsigned i = 0; i < n; i++) lanes[i] = sh;
    sh = LLVMConstVector(lanes, n);
  }
  return LLVMBuildBitCast(b, LLVMBuildShl(b, w, sh, ""), ft, "");
}

/* A |t| (f32 or <vw x float>) of B at |p|. */
static inline LLVMValueRef emx_load_b(emit_module *em, LLVMTypeRef t, LLVMValueRef p, bool bf16) {
  if (!bf16) return emx_load(em, t, p);
  bool vec = LLVMGetTypeKind(t) == LLVMVectorTypeKind;
  LLVMTypeRef ht = vec ? LLVMVectorType(em->t_i16, LLVMGetVectorSize(t)) : em->t_i16;
  LLVMValueRef v = LLVMBuildLoad2(em->b, ht, p, "");
  LLVMSetAlignment(v, 2);
  return emx_widen_bf16(em, v, t);
}

static inline void emx_store(emit_module *em, LLVMValueRef v, LLVMValueRef p) {
  LLVMSetAlignment(LLVMBuildStore(em->b, v, p), 4);
}

static inline LLVMValueRef emx_splat(emit_module *em, LLVMValueRef s, int vw) {
  LLVMTypeRef vt = LLVMVectorType(em->t_f32, (unsigned)vw);
  LLVMValueRef v = LLVMBuildInsertElement(em->b, LLVMGetPoison(vt), s,
                                          LLVMConstInt(em->t_i32, 0, 0), "");
  LLVMValueRef mask = LLVMConstNull(LLVMVectorType(em->t_i32, (unsigned)vw));
  return LLVMBuildShuffleVector(em->b, v, LLVMGetPoison(vt), mask, "");
}

/* a*b+c through llvm.fma (one rounding: the same bits scalar or vector). */
static inline LLVMValueRef emx_fma(emit_module *em, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c) {
  LLVMTypeRef t = LLVMTypeOf(a);
  unsigned id = LLVMLookupIntrinsicID("llvm.fma", 8);
  LLVMValueRef fn = LLVMGetIntrinsicDeclaration(em->mod, id, &t, 1);
  LLVMValueRef args[3] = { a, b, c };
  return LLVMBuildCall2(em->b, LLVMIntrinsicGetType(em->llctx, id, &t, 1), fn, args, 3, "");
}

static inline void emx_attr(emit_module *em, LLVMValueRef fn, unsigned idx, const char *name) {
  unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
  LLVMAddAttributeAtIndex(fn, idx, LLVMCreateEnumAttribute(em->llctx, kind, 0));
}

/* A function of type (i64, ptr, ptr, ptr, i64, i64) with noalias pointers, positioned at a
   fresh entry block. Explicit 512-bit vectors must not be split by a 256-bit preference. */
static inline LLVMValueRef emx_fn_begin(emit_module *em, const char *name, int vw) {
  LLVMTypeRef ps[6] = { em->t_i64, em->t_ptr, em->t_ptr, em->t_ptr, em->t_i64, em->t_i64 };
  LLVMValueRef fn = LLVMAddFunction(em->mod, name, LLVMFunctionType(em->t_void, ps, 6, 0));
  for (unsigned i = 2; i <= 4; i++) emx_attr(em, fn, i, "noalias");
  emx_attr(em, fn, LLVMAttributeFunctionIndex, "nounwind");
  char w[16];
  snprintf(w, sizeof w, "%d", vw * 32);
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                          LLVMCreateStringAttribute(em->llctx, "min-legal-vector-width", 22, w,
                                                    (unsigned)strlen(w)));
  LLVMPositionBuilderAtEnd(em->b, LLVMAppendBasicBlockInContext(em->llctx, fn, "entry"));
  return fn;
}

/* matmul_gemv.c: the M = 1 kernels (signatures in matmul_plan.h). */
void emm_emit_gemv(emit_module *em, const char *name, int vw, int R, bool bf16);    /* B normal */
void emm_emit_gemvt(emit_module *em, const char *name, int rows, int vw, bool bf16); /* B^T */
void emm_emit_gemvp(emit_module *em, const char *name, int vw, int nr, bool bf16); /* panels */

#endif
