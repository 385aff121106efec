/* gpu_kernel.c — what every GPU emitter shares (gpu_internal.h): kernel functions with the
   GPU ABI of emit.h, special registers, shared memory, barriers, warp shuffles and guarded
   regions, through the LLVM-C core API and NVVM intrinsics only.

   Kernel functions. The CPU's kernels are a pair (NAME(bufs, begin, end) unpacking into an
   always-inline NAME.impl with noalias parameters); a GPU kernel is one function whose
   parameters are the buffers themselves: the driver passes each as a kernel argument, and
   NVPTX's argument lowering treats a kernel's pointer parameters as global memory, so the
   loads become ld.global (ld.global.nc, the read-only path, for noalias readonly inputs).
   Every parameter carries `align 16`: the runtime hands out buffers aligned to at least
   16 bytes, which is what lets consecutive element loads merge into 16-byte vector loads.

   Shuffles move 32-bit registers: a value of another width travels as i32 pieces (pred,
   8- and 16-bit integers zero-extended; f32 as its bits; 64-bit types as two halves) and is
   put back together on the other side, so reductions of every type can use them. */
#include "gpu_internal.h"
#include "gpu_mm.h"

static void emg_attr(emit_module *em, LLVMValueRef fn, unsigned at, const char *name, uint64_t v) {
  unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
  LLVMAddAttributeAtIndex(fn, at, LLVMCreateEnumAttribute(em->llctx, kind, v));
}

/* !{ptr @fn, !"key", i32 value} in nvvm.annotations: what LLVM 19 reads launch bounds from */
static void emg_annotate(LLVMModuleRef mod, LLVMValueRef fn, const char *key, int value) {
  LLVMContextRef c = LLVMGetModuleContext(mod);
  LLVMMetadataRef ops[3] = {
    LLVMValueAsMetadata(fn),
    LLVMMDStringInContext2(c, key, strlen(key)),
    LLVMValueAsMetadata(LLVMConstInt(LLVMInt32TypeInContext(c), (unsigned)value, 0)),
  };
  LLVMAddNamedMetadataOperand(mod, "nvvm.annotations",
                              LLVMMetadataAsValue(c, LLVMMDNodeInContext2(c, ops, 3)));
}

LLVMValueRef emit_gpu_intrinsic(LLVMModuleRef mod, const char *name, LLVMTypeRef *overloads, int n,
                                emit_gpu_err *e) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  LLVMValueRef f = id ? LLVMGetIntrinsicDeclaration(mod, id, overloads, (size_t)n) : NULL;
  if (!f || LLVMGetIntrinsicID(f) == 0) {
    emit_gpu_err_set(e, HJ_ERR_INTERNAL, id ? "LLVM could not declare intrinsic '%s'"
                                            : "LLVM 19 has no intrinsic '%s'", name);
    return NULL;
  }
  return f;
}

void emit_gpu_mark_kernel(LLVMModuleRef mod, LLVMValueRef fn, int max_threads, int min_blocks) {
  LLVMSetFunctionCallConv(fn, LLVMPTXKernelCallConv);
  if (max_threads > 0) emg_annotate(mod, fn, "maxntidx", max_threads);   /* .maxntid */
  if (min_blocks > 0) emg_annotate(mod, fn, "minctasm", min_blocks);     /* .minnctapersm */
}

hj_status emitg_kernel_begin(emit_fn *f, emit_module *em, const char *name,
                             const hlo_instr *fusion, int inplace_operand, int max_threads) {
  uint64_t params = inplace_operand >= 0 && inplace_operand < 64 ? 1ull << inplace_operand : 0;
  hj_status st = emitg_kernel_begin_aliased(f, em, name, fusion, params, params ? 1 : 0, max_threads);
  if (st == HJ_OK && params && inplace_operand < f->nparams) f->params[inplace_operand] = f->outs[0];
  return st;
}

hj_status emitg_kernel_begin_aliased(emit_fn *f, emit_module *em, const char *name,
                                     const hlo_instr *fusion, uint64_t alias_params,
                                     uint64_t alias_outs, int max_threads) {
  hj_status st = emitp_fn_init(f, em, fusion);
  if (st != HJ_OK) return st;
  if (strchr(name, '.'))
    return hj__err(em->ctx, HJ_ERR_INTERNAL, "emit '%s': GPU kernel name '%s' has a '.'",
                   fusion->name, name);
  int np = f->nparams + f->nouts;
  LLVMTypeRef targs[128];
  for (int k = 0; k < np; k++) targs[k] = em->t_ptr;
  LLVMValueRef fn = LLVMAddFunction(em->mod, name, LLVMFunctionType(em->t_void, targs, (unsigned)np, 0));
  emg_attr(em, fn, LLVMAttributeFunctionIndex, "nounwind", 0);
  for (int k = 0; k < np; k++) {
    bool aliased = k < f->nparams ? alias_params >> k & 1 : alias_outs >> (k - f->nparams) & 1;
    if (!aliased) emg_attr(em, fn, (unsigned)k + 1, "noalias", 0);
    if (!aliased && k < f->nparams) emg_attr(em, fn, (unsigned)k + 1, "readonly", 0);
    emg_attr(em, fn, (unsigned)k + 1, "nocapture", 0);
    emg_attr(em, fn, (unsigned)k + 1, "align", 16);
  }
  emit_gpu_mark_kernel(em->mod, fn, max_threads, 0);
  f->fn = fn;
  for (int k = 0; k < f->nparams; k++) f->params[k] = LLVMGetParam(fn, (unsigned)k);
  for (int k = 0; k < f->nouts; k++) f->outs[k] = LLVMGetParam(fn, (unsigned)(f->nparams + k));
  LLVMPositionBuilderAtEnd(em->b, LLVMAppendBasicBlockInContext(em->llctx, fn, "entry"));
  return HJ_OK;
}

LLVMValueRef emitg_sreg(emit_fn *f, const char *which) {
  char name[64];
  snprintf(name, sizeof name, "llvm.nvvm.read.ptx.sreg.%s", which);
  return emitp_intrinsic(f, name, NULL, 0, NULL, 0);
}

LLVMValueRef emitg_sreg64(emit_fn *f, const char *which) {
  return LLVMBuildZExt(f->em->b, emitg_sreg(f, which), f->em->t_i64, which);
}

LLVMValueRef emitg_global_id(emit_fn *f) {
  LLVMBuilderRef b = f->em->b;
  LLVMValueRef blk = LLVMBuildNUWMul(b, emitg_sreg64(f, "ctaid.x"), emitg_sreg64(f, "ntid.x"), "");
  return LLVMBuildNUWAdd(b, blk, emitg_sreg64(f, "tid.x"), "gid");
}

LLVMValueRef emitg_shared(emit_fn *f, LLVMTypeRef t, uint64_t n, const char *suffix) {
  char gname[200];
  size_t len = 0;
  const char *fname = LLVMGetValueName2(f->fn, &len);
  snprintf(gname, sizeof gname, "%.*s_%s", (int)len, fname, suffix);
  LLVMTypeRef at = LLVMArrayType2(t, n ? n : 1);
  LLVMValueRef g = LLVMAddGlobalInAddressSpace(f->em->mod, at, gname, 3);
  LLVMSetInitializer(g, LLVMGetUndef(at));
  LLVMSetLinkage(g, LLVMInternalLinkage);
  LLVMSetAlignment(g, 16);
  return g;
}

LLVMValueRef emitg_shared_ptr(emit_fn *f, LLVMTypeRef t, LLVMValueRef arr, LLVMValueRef i) {
  return LLVMBuildGEP2(f->em->b, t, arr, &i, 1, "sh");
}

void emitg_barrier(emit_fn *f) { emitp_intrinsic(f, "llvm.nvvm.barrier0", NULL, 0, NULL, 0); }

/* ---- shuffles ------------------------------------------------------------------------------ */

static LLVMValueRef emg_shfl32(emit_fn *f, bool down, LLVMValueRef v, LLVMValueRef lane) {
  LLVMValueRef args[4] = { emit_i32(f, -1), v, lane, emit_i32(f, 31) };
  return emitp_intrinsic(f, down ? "llvm.nvvm.shfl.sync.down.i32" : "llvm.nvvm.shfl.sync.idx.i32",
                         NULL, 0, args, 4);
}

static LLVMValueRef emg_shfl(emit_fn *f, bool down, LLVMValueRef v, LLVMValueRef lane) {
  emit_module *em = f->em;
  LLVMBuilderRef b = em->b;
  LLVMTypeRef t = LLVMTypeOf(v);
  LLVMTypeKind k = LLVMGetTypeKind(t);
  if (k == LLVMFloatTypeKind)
    return LLVMBuildBitCast(b, emg_shfl32(f, down, LLVMBuildBitCast(b, v, em->t_i32, ""), lane), t, "");
  if (k == LLVMDoubleTypeKind || (k == LLVMIntegerTypeKind && LLVMGetIntTypeWidth(t) == 64)) {
    LLVMValueRef i = k == LLVMDoubleTypeKind ? LLVMBuildBitCast(b, v, em->t_i64, "") : v;
    LLVMValueRef lo = LLVMBuildTrunc(b, i, em->t_i32, "");
    LLVMValueRef hi = LLVMBuildTrunc(b, LLVMBuildLShr(b, i, LLVMConstInt(em->t_i64, 32, 0), ""), em->t_i32, "");
    lo = LLVMBuildZExt(b, emg_shfl32(f, down, lo, lane), em->t_i64, "");
    hi = LLVMBuildZExt(b, emg_shfl32(f, down, hi, lane), em->t_i64, "");
    LLVMValueRef r = LLVMBuildOr(b, lo, LLVMBuildShl(b, hi, LLVMConstInt(em->t_i64, 32, 0), ""), "");
    return k == LLVMDoubleTypeKind ? LLVMBuildBitCast(b, r, t, "") : r;
  }
  if (k == LLVMIntegerTypeKind && LLVMGetIntTypeWidth(t) < 32)
    return LLVMBuildTrunc(b, emg_shfl32(f, down, LLVMBuildZExt(b, v, em->t_i32, ""), lane), t, "");
  if (k == LLVMIntegerTypeKind) return emg_shfl32(f, down, v, lane);
  emit_fail(f, HJ_ERR_INTERNAL, "shuffle of an unsupported LLVM type");
  return v;
}

LLVMValueRef emitg_shfl_idx(emit_fn *f, LLVMValueRef v, LLVMValueRef src) { return emg_shfl(f, false, v, src); }
LLVMValueRef emitg_shfl_down(emit_fn *f, LLVMValueRef v, int delta) {
  return emg_shfl(f, true, v, emit_i32(f, delta));
}

/* ---- regions ------------------------------------------------------------------------------- */

void emitg_if_begin(emit_fn *f, emitg_region *r, LLVMValueRef cond, const char *name) {
  emit_module *em = f->em;
  char nm[64];
  snprintf(nm, sizeof nm, "%s.then", name);
  r->body = LLVMAppendBasicBlockInContext(em->llctx, f->fn, nm);
  snprintf(nm, sizeof nm, "%s.after", name);
  r->after = LLVMAppendBasicBlockInContext(em->llctx, f->fn, nm);
  LLVMBuildCondBr(em->b, cond, r->body, r->after);
  LLVMPositionBuilderAtEnd(em->b, r->body);
  emit_cache_clear(f);
}

void emitg_if_end(emit_fn *f, emitg_region *r) {
  LLVMBuildBr(f->em->b, r->after);
  LLVMPositionBuilderAtEnd(f->em->b, r->after);
  emit_cache_clear(f);
}

/* ---- sizes and launches --------------------------------------------------------------------- */

int emitg_max_elem_bytes(const hlo_instr *fusion) {
  int m = 1;
  for (int k = 0; k < fusion->noperands; k++) {
    const hlo_shape **lv = NULL;
    hlo_shape_leaves(&fusion->operands[k]->shape, &lv);
    for (ptrdiff_t i = 0; i < arrlen(lv); i++)
      if (hlo_type_size(lv[i]->type) > m) m = hlo_type_size(lv[i]->type);
    arrfree(lv);
  }
  const hlo_shape **lv = NULL;
  hlo_shape_leaves(&fusion->shape, &lv);
  for (ptrdiff_t i = 0; i < arrlen(lv); i++)
    if (hlo_type_size(lv[i]->type) > m) m = hlo_type_size(lv[i]->type);
  arrfree(lv);
  return m;
}

void emitg_launch_1d(emit_kernel *out, int64_t threads, int block) {
  int64_t blocks = threads > 0 ? (threads + block - 1) / block : 0;
  out->grid[0] = (unsigned)(blocks > 0 ? blocks : 1);
  out->grid[1] = out->grid[2] = 1;
  out->block[0] = (unsigned)block;
  out->block[1] = out->block[2] = 1;
  out->shared_bytes = 0;
}

hj_status emitg_rows(emit_module *em, const hlo_instr *fusion, const char *name, int64_t rows, int nouts,
                     emitg_row_fn *row, const void *plan, emit_kind kind, emit_kernel *out) {
  memset(out, 0, sizeof *out);
  int block = rows >= 128 ? 128 : (int)((rows + 31) / 32 * 32);
  if (block < 32) block = 32;
  emit_fn f;
  hj_status st = emitg_kernel_begin(&f, em, name, fusion, -1, block);
  if (st) return st;
  if (f.nouts != nouts) emit_fail(&f, HJ_ERR_SHAPE, "%d output buffers for %d outputs", f.nouts, nouts);
  if (f.status == HJ_OK && rows > 0) {
    LLVMValueRef gid = emitg_global_id(&f);
    emitg_region r;
    emitg_if_begin(&f, &r, LLVMBuildICmp(em->b, LLVMIntULT, gid, emit_i64(&f, rows), ""), "row");
    row(&f, plan, gid);
    emitg_if_end(&f, &r);
  }
  st = emit_kernel_end(&f);
  if (st) return st;
  out->kind = kind;
  out->parallel_n = rows;
  out->grain = 1;
  snprintf(out->name, sizeof out->name, "%s", name);
  emitg_launch_1d(out, rows, block);
  return HJ_OK;
}
