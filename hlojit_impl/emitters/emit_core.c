/* emit_core.c — the plumbing every emitter shares: module types and builder, the kernel
   function pair, errors, the element cache, element types, loads and stores, index
   arithmetic and counted loops (emit.h, first sections).

   Kernel functions. emit_kernel_begin makes two functions:
       void NAME(ptr bufs, i64 begin, i64 end)            external, the ABI of emit.h:
           p_k = bufs[k] for each operand and output leaf; call NAME.impl(p..., begin, end)
       void NAME.impl(ptr noalias p0, ..., i64 begin, i64 end)   internal, alwaysinline
   The body goes into NAME.impl; O3 inlines it into NAME and turns the noalias parameters
   into scoped alias metadata, which is what lets the loop vectoriser skip runtime alias
   checks. For fusion f32[4,8] add(p0, p1): bufs = {p0, p1, out0}, NAME.impl(p0, p1, out0,
   begin, end).

   The cache is a stack (emit_internal.h): value entries keyed by (instr, element, index
   values), linear entries keyed by (dims, index values), and scope marks. Lookups are a
   linear scan from the top: fusions have tens to hundreds of instructions, and the most
   recent entries are the likeliest hits.

   Loops: preheader -> header (iv phi, iv < end) -> body ... -> latch (iv += step) -> header;
   exit from the header. emit_loop_begin pushes a cache mark, emit_loop_end pops it: values
   cached before the loop dominate the body and the exit, values made inside dominate
   neither the next iteration's start nor the exit, so only those are forgotten. */
#include "emit_internal.h"
#include <llvm-c/Analysis.h>
#include <llvm-c/DebugInfo.h>

/* ---- module ------------------------------------------------------------------------------ */

void emit_module_init(emit_module *em, hj_ctx_t *ctx, LLVMContextRef llctx, LLVMModuleRef mod,
                      const emit_target *target) {
  memset(em, 0, sizeof *em);
  em->ctx = ctx;
  em->llctx = llctx;
  em->mod = mod;
  if (target) em->target = *target;
  else em->target.vector_bytes = 16;
  em->b = LLVMCreateBuilderInContext(llctx);
  em->t_void = LLVMVoidTypeInContext(llctx);
  em->t_i1 = LLVMInt1TypeInContext(llctx);
  em->t_i8 = LLVMInt8TypeInContext(llctx);
  em->t_i16 = LLVMInt16TypeInContext(llctx);
  em->t_i32 = LLVMInt32TypeInContext(llctx);
  em->t_i64 = LLVMInt64TypeInContext(llctx);
  em->t_f16 = LLVMHalfTypeInContext(llctx);
  em->t_f32 = LLVMFloatTypeInContext(llctx);
  em->t_f64 = LLVMDoubleTypeInContext(llctx);
  em->t_ptr = LLVMPointerTypeInContext(llctx, 0);
}

void emit_module_dispose(emit_module *em) {
  if (em && em->b) LLVMDisposeBuilder(em->b);
  if (em) em->b = NULL;
}

/* ---- errors -------------------------------------------------------------------------------- */

hj_status emit_fail(emit_fn *f, hj_status code, const char *fmt, ...) {
  if (f->status != HJ_OK) return f->status;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char *nm = f->fusion && f->fusion->name ? f->fusion->name : "?";
  f->status = hj__err(f->em->ctx, code, "emit '%s': %s", nm, msg);
  return f->status;
}

/* ---- kernel functions ------------------------------------------------------------------------ */

static void emc_attr(emit_module *em, LLVMValueRef fn, unsigned at, const char *name) {
  unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
  LLVMAddAttributeAtIndex(fn, at, LLVMCreateEnumAttribute(em->llctx, kind, 0));
}

/* The start every kernel ABI shares: |f| zeroed for |fusion| in |em|, which must have a
   fused computation, at most 64 operands and 1..64 output leaves (f->comp, nparams, nouts). */
hj_status emitp_fn_init(emit_fn *f, emit_module *em, const hlo_instr *fusion) {
  memset(f, 0, sizeof *f);
  f->em = em;
  f->fusion = fusion;
  if (!fusion || fusion->ncalls < 1 || !fusion->calls[0])
    return hj__err(em->ctx, HJ_ERR_INTERNAL, "emit '%s': not a fusion with a computation",
                   fusion && fusion->name ? fusion->name : "?");
  f->comp = fusion->calls[0];
  const hlo_shape **leaves = NULL;
  hlo_shape_leaves(&fusion->shape, &leaves);
  int nouts = (int)arrlen(leaves);
  arrfree(leaves);
  if (fusion->noperands > 64 || nouts > 64 || nouts < 1)
    return f->status = hj__err(em->ctx, HJ_ERR_UNSUPPORTED, "emit '%s': %d operands and %d "
                               "outputs (at most 64 each)", fusion->name, fusion->noperands, nouts);
  f->nparams = fusion->noperands;
  f->nouts = nouts;
  return HJ_OK;
}

hj_status emit_kernel_begin(emit_fn *f, emit_module *em, const char *name,
                            const hlo_instr *fusion) {
  return emit_kernel_begin_aliased(f, em, name, fusion, 0, 0);
}

hj_status emit_kernel_begin_ex(emit_fn *f, emit_module *em, const char *name,
                               const hlo_instr *fusion, int inplace_operand) {
  uint64_t params = inplace_operand >= 0 && inplace_operand < 64 ? 1ull << inplace_operand : 0;
  return emit_kernel_begin_aliased(f, em, name, fusion, params, params ? 1 : 0);
}

hj_status emit_kernel_begin_aliased(emit_fn *f, emit_module *em, const char *name,
                                    const hlo_instr *fusion, uint64_t alias_params,
                                    uint64_t alias_outs) {
  hj_status st = emitp_fn_init(f, em, fusion);
  if (st != HJ_OK) return st;
  int np = f->nparams + f->nouts;
  LLVMTypeRef args3[3] = { em->t_ptr, em->t_i64, em->t_i64 }, targs[130];
  for (int k = 0; k < np; k++) targs[k] = em->t_ptr;
  targs[np] = targs[np + 1] = em->t_i64;
  LLVMValueRef outer = LLVMAddFunction(em->mod, name, LLVMFunctionType(em->t_void, args3, 3, 0));
  char iname[256];
  snprintf(iname, sizeof iname, "%s.impl", name);
  LLVMValueRef impl = LLVMAddFunction(em->mod, iname, LLVMFunctionType(em->t_void, targs, (unsigned)np + 2, 0));
  LLVMSetLinkage(impl, LLVMInternalLinkage);
  emc_attr(em, impl, LLVMAttributeFunctionIndex, "alwaysinline");
  emc_attr(em, impl, LLVMAttributeFunctionIndex, "nounwind");
  emc_attr(em, outer, LLVMAttributeFunctionIndex, "nounwind");
  for (int k = 0; k < np; k++) {
    bool aliased = k < f->nparams ? alias_params >> k & 1 : alias_outs >> (k - f->nparams) & 1;
    if (!aliased) emc_attr(em, impl, (unsigned)k + 1, "noalias");
  }
  /* the outer function: unpack bufs, call the body */
  LLVMBuilderRef b = em->b;
  LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(em->llctx, outer, "entry"));
  LLVMValueRef cargs[130], bufs = LLVMGetParam(outer, 0);
  for (int k = 0; k < np; k++) {
    LLVMValueRef i = LLVMConstInt(em->t_i64, (unsigned long long)k, 0);
    LLVMValueRef p = LLVMBuildGEP2(b, em->t_ptr, bufs, &i, 1, "");
    cargs[k] = LLVMBuildLoad2(b, em->t_ptr, p, "buf");
  }
  cargs[np] = LLVMGetParam(outer, 1);
  cargs[np + 1] = LLVMGetParam(outer, 2);
  LLVMBuildCall2(b, LLVMGlobalGetValueType(impl), impl, cargs, (unsigned)np + 2, "");
  LLVMBuildRetVoid(b);
  /* the body */
  f->fn = impl;
  for (int k = 0; k < f->nparams; k++) f->params[k] = LLVMGetParam(impl, (unsigned)k);
  for (int k = 0; k < f->nouts; k++) f->outs[k] = LLVMGetParam(impl, (unsigned)(f->nparams + k));
  f->begin = LLVMGetParam(impl, (unsigned)np);
  f->end = LLVMGetParam(impl, (unsigned)np + 1);
  LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(em->llctx, impl, "entry"));
  return HJ_OK;
}

hj_status emit_kernel_end(emit_fn *f) {
  if (f->fn) LLVMBuildRetVoid(f->em->b);
  arrfree(f->cache);
  f->cache = NULL;
  return f->status;
}

/* ---- the cache ------------------------------------------------------------------------------- */

static bool emc_same_idx(const emit_index *a, const emit_index *b) {
  if (a->rank != b->rank) return false;
  for (int d = 0; d < a->rank; d++)
    if (a->v[d] != b->v[d]) return false;
  return true;
}

LLVMValueRef emitp_cache_get(emit_fn *f, const hlo_instr *ins, int sub, const emit_index *idx) {
  for (ptrdiff_t i = arrlen(f->cache) - 1; i >= 0; i--) {
    const emit_cache_entry *e = &f->cache[i];
    if (e->kind == EMITP_VALUE && e->ins == ins && e->sub == sub && emc_same_idx(&e->idx, idx))
      return e->v;
  }
  return NULL;
}

void emitp_cache_put(emit_fn *f, const hlo_instr *ins, int sub, const emit_index *idx,
                     LLVMValueRef v) {
  emit_cache_entry e;
  memset(&e, 0, sizeof e);
  e.kind = EMITP_VALUE;
  e.ins = ins;
  e.sub = sub;
  e.idx = *idx;
  e.v = v;
  arrput(f->cache, e);
}

void emitp_linear_put(emit_fn *f, const hlo_shape *s, const emit_index *idx, LLVMValueRef lin) {
  emit_cache_entry e;
  memset(&e, 0, sizeof e);
  e.kind = EMITP_LINEAR;
  e.idx = *idx;
  memcpy(e.dims, s->dims, sizeof(int64_t) * (size_t)s->rank);
  e.v = lin;
  arrput(f->cache, e);
}

static LLVMValueRef emc_linear_get(emit_fn *f, const hlo_shape *s, const emit_index *idx) {
  for (ptrdiff_t i = arrlen(f->cache) - 1; i >= 0; i--) {
    const emit_cache_entry *e = &f->cache[i];
    if (e->kind == EMITP_LINEAR && emc_same_idx(&e->idx, idx) &&
        !memcmp(e->dims, s->dims, sizeof(int64_t) * (size_t)s->rank))
      return e->v;
  }
  return NULL;
}

ptrdiff_t emitp_cache_mark(emit_fn *f) {
  emit_cache_entry e;
  memset(&e, 0, sizeof e);
  e.kind = EMITP_MARK;
  arrput(f->cache, e);
  return arrlen(f->cache) - 1;
}

void emitp_cache_pop(emit_fn *f, ptrdiff_t mark) {
  if (mark >= 0 && mark <= arrlen(f->cache)) arrsetlen(f->cache, mark);
}

/* Keeps the marks (and so every position a scope remembers): the rest becomes dead. */
void emit_cache_clear(emit_fn *f) {
  for (ptrdiff_t i = 0; i < arrlen(f->cache); i++)
    if (f->cache[i].kind != EMITP_MARK) f->cache[i].kind = EMITP_DEAD;
}

/* ---- helpers ----------------------------------------------------------------------------------- */

LLVMValueRef emitp_entry_alloca(emit_fn *f, LLVMTypeRef t, const char *name) {
  LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(f->fn);
  LLVMBuilderRef b = LLVMCreateBuilderInContext(f->em->llctx);
  LLVMValueRef first = LLVMGetFirstInstruction(entry);
  if (first) LLVMPositionBuilderBefore(b, first);
  else LLVMPositionBuilderAtEnd(b, entry);
  LLVMValueRef a = LLVMBuildAlloca(b, t, name);
  LLVMDisposeBuilder(b);
  return a;
}

LLVMValueRef emitp_intrinsic(emit_fn *f, const char *name, LLVMTypeRef *tys, int ntys,
                             LLVMValueRef *args, int nargs) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  if (!id) {
    emit_fail(f, HJ_ERR_INTERNAL, "LLVM has no intrinsic '%s'", name);
    return LLVMGetUndef(tys ? tys[0] : f->em->t_i64);
  }
  LLVMValueRef fn = LLVMGetIntrinsicDeclaration(f->em->mod, id, tys, (size_t)ntys);
  LLVMTypeRef ft = LLVMIntrinsicGetType(f->em->llctx, id, tys, (size_t)ntys);
  return LLVMBuildCall2(f->em->b, ft, fn, args, (unsigned)nargs, "");
}

static LLVMValueRef emc_call_scalar(emit_fn *f, const char *name, LLVMTypeRef t,
                                    LLVMValueRef *args, int nargs) {
  char nv[64];
  if (f->em->target.gpu) {   /* a GPU has no libm: libdevice's function of the same name */
    if (!f->em->target.gpu_libdevice) {
      emit_fail(f, HJ_ERR_UNSUPPORTED, "'%s' on the GPU needs libdevice (CUDA toolkit), not found", name);
      return LLVMGetUndef(t);
    }
    snprintf(nv, sizeof nv, "__nv_%s", name);
    name = nv;
  }
  LLVMTypeRef ps[4] = { t, t, t, t };
  LLVMTypeRef ft = LLVMFunctionType(t, ps, (unsigned)nargs, 0);
  LLVMValueRef fn = LLVMGetNamedFunction(f->em->mod, name);
  if (!fn) {
    fn = LLVMAddFunction(f->em->mod, name, ft);
    emc_attr(f->em, fn, LLVMAttributeFunctionIndex, "nounwind");
  }
  return LLVMBuildCall2(f->em->b, ft, fn, args, (unsigned)nargs, "");
}

LLVMValueRef emitp_libcall(emit_fn *f, const char *name, LLVMValueRef *args, int nargs) {
  LLVMTypeRef t = LLVMTypeOf(args[0]);
  if (LLVMGetTypeKind(t) != LLVMVectorTypeKind) return emc_call_scalar(f, name, t, args, nargs);
  LLVMTypeRef et = LLVMGetElementType(t);
  unsigned n = LLVMGetVectorSize(t);
  LLVMValueRef r = LLVMGetUndef(t);
  for (unsigned i = 0; i < n; i++) {
    LLVMValueRef lane = LLVMConstInt(f->em->t_i32, i, 0), sa[4];
    for (int k = 0; k < nargs; k++) sa[k] = LLVMBuildExtractElement(f->em->b, args[k], lane, "");
    r = LLVMBuildInsertElement(f->em->b, r, emc_call_scalar(f, name, et, sa, nargs), lane, "");
  }
  return r;
}

void emitp_zero_index(emit_fn *f, int rank, emit_index *out) {
  out->rank = rank;
  for (int d = 0; d < rank; d++) out->v[d] = emit_i64(f, 0);
}

LLVMValueRef emitp_undef(emit_fn *f, const hlo_shape *s) {
  if (!hlo_shape_is_array(s)) return LLVMGetUndef(f->em->t_i1);
  return LLVMGetUndef(emit_compute_type(f->em, s->type));
}

/* ---- types, loads, stores -------------------------------------------------------------------- */

/* ---- element bits ------------------------------------------------------------------------------ */

/* float -> bf16 bits, as hlo_f32_to_bf16: NaN -> (u >> 16) | 0x40, else round half to even. */
static LLVMValueRef emc_f32_to_bf16_bits(emit_fn *f, LLVMValueRef v) {
  emit_module *em = f->em;
  LLVMBuilderRef b = em->b;
  LLVMTypeRef i32 = em->t_i32;
  LLVMValueRef u = LLVMBuildBitCast(b, v, i32, "");
  LLVMValueRef hi = LLVMBuildLShr(b, u, emit_ci(i32, 16), "");
  LLVMValueRef nan = LLVMBuildICmp(b, LLVMIntUGT, LLVMBuildAnd(b, u, emit_ci(i32, 0x7fffffff), ""),
                                   emit_ci(i32, 0x7f800000), "");
  LLVMValueRef qn = LLVMBuildOr(b, hi, emit_ci(i32, 0x40), "");
  LLVMValueRef bias = LLVMBuildAdd(b, emit_ci(i32, 0x7fff), LLVMBuildAnd(b, hi, emit_ci(i32, 1), ""), "");
  LLVMValueRef r = LLVMBuildLShr(b, LLVMBuildAdd(b, u, bias, ""), emit_ci(i32, 16), "");
  return LLVMBuildTrunc(b, LLVMBuildSelect(b, nan, qn, r, ""), em->t_i16, "");
}

LLVMValueRef emitp_to_bits(emit_fn *f, hlo_type t, LLVMValueRef v) {
  emit_module *em = f->em;
  LLVMBuilderRef b = em->b;
  switch (t) {
  case HLO_PRED: return LLVMBuildZExt(b, v, em->t_i8, "");
  case HLO_F16: return LLVMBuildBitCast(b, LLVMBuildFPTrunc(b, v, em->t_f16, ""), em->t_i16, "");
  case HLO_BF16: return emc_f32_to_bf16_bits(f, v);
  case HLO_F32: return LLVMBuildBitCast(b, v, em->t_i32, "");
  case HLO_F64: return LLVMBuildBitCast(b, v, em->t_i64, "");
  default: return v;
  }
}

LLVMValueRef emitp_from_bits(emit_fn *f, hlo_type t, LLVMValueRef bits) {
  emit_module *em = f->em;
  LLVMBuilderRef b = em->b;
  switch (t) {
  case HLO_PRED: return LLVMBuildICmp(b, LLVMIntNE, bits, emit_ci(LLVMTypeOf(bits), 0), "");
  case HLO_F16: return LLVMBuildFPExt(b, LLVMBuildBitCast(b, bits, em->t_f16, ""), em->t_f32, "");
  case HLO_BF16: {
    LLVMValueRef w = LLVMBuildShl(b, LLVMBuildZExt(b, bits, em->t_i32, ""), emit_ci(em->t_i32, 16), "");
    return LLVMBuildBitCast(b, w, em->t_f32, "");
  }
  case HLO_F32: return LLVMBuildBitCast(b, bits, em->t_f32, "");
  case HLO_F64: return LLVMBuildBitCast(b, bits, em->t_f64, "");
  default: return bits;
  }
}

LLVMTypeRef emit_storage_type(emit_module *em, hlo_type t) {
  switch (t) {
  case HLO_PRED: case HLO_S8: case HLO_U8: return em->t_i8;
  case HLO_S16: case HLO_U16: case HLO_BF16: return em->t_i16;
  case HLO_F16: return em->t_f16;
  case HLO_S32: case HLO_U32: return em->t_i32;
  case HLO_S64: case HLO_U64: return em->t_i64;
  case HLO_F32: return em->t_f32;
  case HLO_F64: return em->t_f64;
  default: return em->t_i8;
  }
}

LLVMTypeRef emit_compute_type(emit_module *em, hlo_type t) {
  switch (t) {
  case HLO_PRED: return em->t_i1;
  case HLO_F16: case HLO_BF16: case HLO_F32: return em->t_f32;
  default: return emit_storage_type(em, t);
  }
}

LLVMValueRef emit_load_elem(emit_fn *f, hlo_type t, LLVMValueRef base, LLVMValueRef linear) {
  emit_module *em = f->em;
  LLVMBuilderRef b = em->b;
  LLVMTypeRef st = emit_storage_type(em, t);
  LLVMValueRef p = LLVMBuildGEP2(b, st, base, &linear, 1, "");
  LLVMValueRef v = LLVMBuildLoad2(b, st, p, "");
  switch (t) {
  case HLO_PRED: return LLVMBuildICmp(b, LLVMIntNE, v, LLVMConstInt(em->t_i8, 0, 0), "");
  case HLO_F16: return LLVMBuildFPExt(b, v, em->t_f32, "");
  case HLO_BF16: return emitp_from_bits(f, HLO_BF16, v);
  default: return v;
  }
}

void emit_store_elem(emit_fn *f, hlo_type t, LLVMValueRef base, LLVMValueRef linear, LLVMValueRef v) {
  emit_module *em = f->em;
  LLVMBuilderRef b = em->b;
  LLVMTypeRef st = emit_storage_type(em, t);
  switch (t) {
  case HLO_PRED: v = LLVMBuildZExt(b, v, em->t_i8, ""); break;
  case HLO_F16: v = LLVMBuildFPTrunc(b, v, em->t_f16, ""); break;
  case HLO_BF16: v = emitp_to_bits(f, HLO_BF16, v); break;
  default: break;
  }
  LLVMValueRef p = LLVMBuildGEP2(b, st, base, &linear, 1, "");
  LLVMBuildStore(b, v, p);
}

/* ---- indices --------------------------------------------------------------------------------- */

LLVMValueRef emit_linear_index(emit_fn *f, const hlo_shape *s, const emit_index *idx) {
  if (s->rank == 0) return emit_i64(f, 0);
  LLVMValueRef c = emc_linear_get(f, s, idx);
  if (c) return c;
  int64_t st[HLO_MAX_RANK];
  hlo_shape_strides(s, st);
  LLVMBuilderRef b = f->em->b;
  LLVMValueRef lin = NULL;
  for (int d = 0; d < s->rank && d < idx->rank; d++) {
    if (s->dims[d] == 1) continue;   /* its index is 0 */
    LLVMValueRef t = st[d] == 1 ? idx->v[d] : LLVMBuildNSWMul(b, idx->v[d], emit_i64(f, st[d]), "");
    lin = lin ? LLVMBuildNSWAdd(b, lin, t, "") : t;
  }
  if (!lin) lin = emit_i64(f, 0);
  emitp_linear_put(f, s, idx, lin);
  return lin;
}

void emit_delinearize(emit_fn *f, const hlo_shape *s, LLVMValueRef linear, emit_index *out) {
  int64_t st[HLO_MAX_RANK];
  hlo_shape_strides(s, st);
  LLVMBuilderRef b = f->em->b;
  out->rank = s->rank;
  for (int d = 0; d < s->rank; d++) {
    if (s->dims[d] == 1) {
      out->v[d] = emit_i64(f, 0);
      continue;
    }
    LLVMValueRef q = st[d] == 1 ? linear : LLVMBuildUDiv(b, linear, emit_i64(f, st[d]), "");
    bool outer = true;   /* the first non-trivial dim needs no modulo */
    for (int e = 0; e < d; e++) outer &= s->dims[e] == 1;
    out->v[d] = outer ? q : LLVMBuildURem(b, q, emit_i64(f, s->dims[d]), "");
  }
  emitp_linear_put(f, s, out, linear);
}

/* ---- loops --------------------------------------------------------------------------------- */

void emit_loop_begin(emit_fn *f, emit_loop *l, LLVMValueRef begin, LLVMValueRef end,
                     int64_t step, const char *name) {
  emit_module *em = f->em;
  LLVMBuilderRef b = em->b;
  char nm[64];
  memset(l, 0, sizeof *l);
  l->preheader = LLVMGetInsertBlock(b);
  snprintf(nm, sizeof nm, "%s.header", name);
  l->header = LLVMAppendBasicBlockInContext(em->llctx, f->fn, nm);
  snprintf(nm, sizeof nm, "%s.body", name);
  l->body = LLVMAppendBasicBlockInContext(em->llctx, f->fn, nm);
  snprintf(nm, sizeof nm, "%s.latch", name);
  l->latch = LLVMAppendBasicBlockInContext(em->llctx, f->fn, nm);
  snprintf(nm, sizeof nm, "%s.exit", name);
  l->exit = LLVMAppendBasicBlockInContext(em->llctx, f->fn, nm);
  l->step = emit_i64(f, step);
  LLVMBuildBr(b, l->header);
  LLVMPositionBuilderAtEnd(b, l->header);
  l->iv = LLVMBuildPhi(b, em->t_i64, name);
  LLVMAddIncoming(l->iv, &begin, &l->preheader, 1);
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, l->iv, end, ""), l->body, l->exit);
  LLVMPositionBuilderAtEnd(b, l->body);
  emitp_cache_mark(f);
}

/* !llvm.loop !{self, !{"llvm.loop.vectorize.enable", i1 false},
   !{"llvm.loop.interleave.count", i32 1}} on the back edge |br|. */
static void emitp_no_vectorize(emit_module *em, LLVMValueRef br) {
  LLVMContextRef c = em->llctx;
  LLVMMetadataRef ven[2] = { LLVMMDStringInContext2(c, "llvm.loop.vectorize.enable", 26),
                             LLVMValueAsMetadata(LLVMConstInt(em->t_i1, 0, 0)) };
  LLVMMetadataRef ilv[2] = { LLVMMDStringInContext2(c, "llvm.loop.interleave.count", 26),
                             LLVMValueAsMetadata(LLVMConstInt(em->t_i32, 1, 0)) };
  LLVMMetadataRef tmp = LLVMTemporaryMDNode(c, NULL, 0);
  LLVMMetadataRef ops[3] = { tmp, LLVMMDNodeInContext2(c, ven, 2), LLVMMDNodeInContext2(c, ilv, 2) };
  LLVMMetadataRef id = LLVMMDNodeInContext2(c, ops, 3);
  LLVMMetadataReplaceAllUsesWith(tmp, id);   /* the loop id refers to itself; frees |tmp| */
  LLVMSetMetadata(br, LLVMGetMDKindIDInContext(c, "llvm.loop", 9), LLVMMetadataAsValue(c, id));
}

void emit_loop_end(emit_fn *f, emit_loop *l) {
  LLVMBuilderRef b = f->em->b;
  LLVMBuildBr(b, l->latch);
  LLVMPositionBuilderAtEnd(b, l->latch);
  LLVMValueRef next = LLVMBuildNSWAdd(b, l->iv, l->step, "");
  LLVMValueRef back = LLVMBuildBr(b, l->header);
  if (l->no_vectorize) emitp_no_vectorize(f->em, back);
  LLVMAddIncoming(l->iv, &next, &l->latch, 1);
  LLVMPositionBuilderAtEnd(b, l->exit);
  /* forget what the body cached: back to (and including) the body's mark */
  for (ptrdiff_t i = arrlen(f->cache) - 1; i >= 0; i--)
    if (f->cache[i].kind == EMITP_MARK) {
      emitp_cache_pop(f, i);
      break;
    }
}

/* Deletes the functions added to |mod| after |last| (NULL: all of them). */
void emitp_drop_after(LLVMModuleRef mod, LLVMValueRef last) {
  LLVMValueRef fn = last ? LLVMGetNextFunction(last) : LLVMGetFirstFunction(mod);
  LLVMValueRef *dead = NULL;
  for (; fn; fn = LLVMGetNextFunction(fn)) arrput(dead, fn);
  for (ptrdiff_t i = 0; i < arrlen(dead); i++)
    LLVMReplaceAllUsesWith(dead[i], LLVMGetPoison(LLVMTypeOf(dead[i])));
  for (ptrdiff_t i = 0; i < arrlen(dead); i++) LLVMDeleteFunction(dead[i]);
  arrfree(dead);
}

void emit_dot_root_index(emit_fn *f, const hlo_instr *root, const int64_t bmn_dims[3],
                         const LLVMValueRef bmn[3], emit_index *idx) {
  LLVMValueRef nt[3];
  int64_t ntd[3];
  int nnt = 0, nr = 0;
  for (int d = 0; d < 3; d++)
    if (bmn_dims[d] != 1) ntd[nnt] = bmn_dims[d], nt[nnt++] = bmn[d];
  const hlo_shape *rs = &root->shape;
  bool same = true;
  for (int d = 0; d < rs->rank; d++)
    if (rs->dims[d] != 1) same &= nr < nnt && rs->dims[d] == ntd[nr], nr++;
  *idx = (emit_index){ .rank = rs->rank };
  if (same && nr == nnt) {
    for (int d = 0, k = 0; d < rs->rank; d++)
      idx->v[d] = rs->dims[d] == 1 || k >= nnt ? emit_i64(f, 0) : nt[k++];
    return;
  }
  /* rows split (hlo_dot_epilogue_dims): m over the root's leading dims, n last */
  LLVMBuilderRef b = f->em->b;
  LLVMValueRef m = nnt == 2 ? nt[0] : bmn[1];
  idx->v[rs->rank - 1] = nnt == 2 ? nt[1] : bmn[2];
  for (int d = rs->rank - 2; d >= 0; d--) {
    LLVMValueRef dim = emit_i64(f, rs->dims[d]);
    idx->v[d] = d == 0 ? m : LLVMBuildURem(b, m, dim, "");
    if (d > 0) m = LLVMBuildUDiv(b, m, dim, "");
  }
}
