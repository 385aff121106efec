/* cuda_emu.h — a GPU EMULATOR for tests: the CUDA backend's kernels, as the GPU emitters
   make them, run on the host CPU with the GPU's thread model, so that their index
   arithmetic, bounds, barriers and warp shuffles can be compared with the reference
   evaluator on a machine without a GPU. It proves the kernels' logic, not their speed, and
   not the GPU's memory model (it runs one thread at a time).

   How: a module is compiled by the same compile driver (rt_compile) with the CUDA
   backend's emitter target (gpu, sm_80, the tiled and skinny matmul kernels) and
   passes, but into a module of the host JIT (backends/cpu/cpu_jit). Before the host
   compiles it: every PTX kernel gets the C calling convention and a wrapper NAME_emu(void
   **args); every NVVM intrinsic (llvm.nvvm.read.ptx.sreg.*, barrier0, shfl.sync.*) becomes
   a call to this file's emulation (hjemu_*); libdevice's __nv_X is the host's libm X.
   Launches: blocks one after the other; within a block, kernels without barriers or
   shuffles run their threads one after the other; kernels with them run each thread as a
   fiber (ucontext) scheduled round-robin: bar.sync waits until every live thread of the
   block is there, a shuffle until every lane of the warp has put its value (a shuffle in a
   warp with exited lanes, and a deadlock, are errors: on a GPU they would hang or be
   undefined). Matmul thunks run the tiled kernel (or, with emu.gemm_blas, a host gemm and
   the epilogue kernel: the library path). Everything else (copies, evaluator thunks,
   while, conditional) is the runtime's, on the host as on the GPU.

   Not with ASan (fibers switch stacks behind its back): callers skip, saying so. */
#ifndef HLOJIT_CUDA_EMU_H
#define HLOJIT_CUDA_EMU_H
#define _GNU_SOURCE
#include "backends/cpu/cpu_jit.h"
#include "backends/cuda/cuda_exec.h"
#include "hlojit_impl/runtime/runtime.h"
#include "hlojit_impl/emitters/matmul_plan.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#if defined(__SANITIZE_ADDRESS__)
#define CUDA_EMU_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUDA_EMU_UNDER_ASAN 1
#endif
#endif
#ifndef CUDA_EMU_UNDER_ASAN
#define CUDA_EMU_UNDER_ASAN 0
#endif

#define EMU_MAX_THREADS 1024
#define EMU_STACK (128 * 1024)

/* ---- the thread model ------------------------------------------------------------------------ */
enum { EMU_RUN, EMU_WAIT, EMU_DONE };
typedef struct emu_fiber { ucontext_t uc; char *stack; unsigned tid; int state, group; } emu_fiber;

static struct {
  emu_fiber f[EMU_MAX_THREADS];
  int n, cur;
  bool fibers;
  unsigned seq_tid;
  unsigned grid[3], block[3], ctaid[3];
  ucontext_t sched;
  void (*fn)(void **);
  void **args;
  uint32_t slots[EMU_MAX_THREADS / 32][32];
  char err[512];
  long launches, fiber_launches;
} E;

static unsigned emu_tid(void) { return E.fibers ? E.f[E.cur].tid : E.seq_tid; }

static void emu_error(const char *fmt, const char *what) {
  if (!E.err[0]) snprintf(E.err, sizeof E.err, fmt, what);
}

/* Waits in |group| (0: the block, 1 + w: warp w) until the scheduler releases it. */
static void emu_wait(int group) {
  if (!E.fibers) {
    emu_error("%s: a barrier or shuffle in a kernel run without fibers", "emu");
    return;
  }
  emu_fiber *f = &E.f[E.cur];
  f->state = EMU_WAIT;
  f->group = group;
  swapcontext(&f->uc, &E.sched);
}

static unsigned hjemu_sreg(int which, int dim) {
  switch (which) {
  case 0: return dim == 0 ? emu_tid() : 0;
  case 1: return E.block[dim];
  case 2: return E.ctaid[dim];
  default: return E.grid[dim];
  }
}
#define EMU_SREG(name, w, d) static unsigned hjemu_##name(void) { return hjemu_sreg(w, d); }
EMU_SREG(tid_x, 0, 0) EMU_SREG(tid_y, 0, 1) EMU_SREG(tid_z, 0, 2)
EMU_SREG(ntid_x, 1, 0) EMU_SREG(ntid_y, 1, 1) EMU_SREG(ntid_z, 1, 2)
EMU_SREG(ctaid_x, 2, 0) EMU_SREG(ctaid_y, 2, 1) EMU_SREG(ctaid_z, 2, 2)
EMU_SREG(nctaid_x, 3, 0) EMU_SREG(nctaid_y, 3, 1) EMU_SREG(nctaid_z, 3, 2)
#undef EMU_SREG

static void hjemu_barrier0(void) { emu_wait(0); }

static uint32_t emu_shfl(bool down, uint32_t val, uint32_t arg) {
  unsigned tid = emu_tid(), w = tid / 32, lane = tid % 32;
  for (unsigned l = 0; l < 32 && E.fibers; l++) {
    unsigned t = w * 32 + l;
    if (t >= (unsigned)E.n || E.f[t].state == EMU_DONE) emu_error("%s: shfl.sync in a warp with exited or missing lanes", "emu");
  }
  E.slots[w][lane] = val;
  emu_wait(1 + (int)w);
  uint32_t r;
  if (down) r = lane + arg <= 31 ? E.slots[w][lane + arg] : val;
  else r = E.slots[w][arg & 31];
  emu_wait(1 + (int)w);   /* nobody overwrites a slot before everyone read */
  return r;
}
static uint32_t hjemu_shfl_down(uint32_t mask, uint32_t v, uint32_t d, uint32_t c) { return emu_shfl(true, v, d); }
static uint32_t hjemu_shfl_idx(uint32_t mask, uint32_t v, uint32_t s, uint32_t c) { return emu_shfl(false, v, s); }

static void emu_fiber_main(void) {
  E.fn(E.args);
  E.f[E.cur].state = EMU_DONE;
}

/* Fiber |i| at the start of the kernel. Its own function: getcontext returns twice, and the
   caller's loop variables must not live across it (-Wclobbered). */
static __attribute__((noinline)) void emu_fiber_init(int i) {
  emu_fiber *f = &E.f[i];
  if (!f->stack) f->stack = malloc(EMU_STACK);
  getcontext(&f->uc);
  f->uc.uc_stack.ss_sp = f->stack;
  f->uc.uc_stack.ss_size = EMU_STACK;
  f->uc.uc_link = &E.sched;
  makecontext(&f->uc, emu_fiber_main, 0);
  f->tid = (unsigned)i;
  f->state = EMU_RUN;
}

/* One block with fibers: round-robin until every thread is done. */
static void emu_block_fibers(void) {
  for (int i = 0; i < E.n; i++) emu_fiber_init(i);
  for (;;) {
    bool ran = false, live = false;
    for (int i = 0; i < E.n; i++) {
      if (E.f[i].state != EMU_RUN) continue;
      E.cur = i;
      swapcontext(&E.sched, &E.f[i].uc);
      ran = true;
    }
    /* release the groups every live member of which is waiting */
    bool released = false;
    int ngroups = 1 + (E.n + 31) / 32;
    for (int g = 0; g < ngroups; g++) {
      int lo = g == 0 ? 0 : (g - 1) * 32, hi = g == 0 ? E.n : (g * 32 < E.n ? g * 32 : E.n);
      bool all = true, any = false;
      for (int i = lo; i < hi; i++) {
        if (E.f[i].state == EMU_DONE) continue;
        if (E.f[i].state == EMU_RUN || E.f[i].group != g) { all = false; break; }
        any = true;
      }
      if (all && any) {
        for (int i = lo; i < hi; i++)
          if (E.f[i].state == EMU_WAIT) E.f[i].state = EMU_RUN;
        released = true;
      }
    }
    for (int i = 0; i < E.n; i++) live |= E.f[i].state != EMU_DONE;
    if (!live) return;
    if (!ran && !released) {
      emu_error("%s: deadlock: threads wait at barriers or shuffles that not every thread reaches", "emu");
      return;
    }
  }
}

/* Runs |fn| (a NAME_emu wrapper) on |grid| x |block| threads. */
static void emu_launch(void (*fn)(void **), bool sync, const unsigned grid[3], const unsigned block[3], void **args) {
  if (block[1] != 1 || block[2] != 1 || block[0] > EMU_MAX_THREADS) {
    emu_error("%s: a block shape the emulator does not take", "emu");
    return;
  }
  E.fn = fn;
  E.args = args;
  memcpy(E.grid, grid, sizeof E.grid);
  memcpy(E.block, block, sizeof E.block);
  E.n = (int)block[0];
  E.fibers = sync;
  E.launches++;
  E.fiber_launches += sync;
  for (unsigned z = 0; z < grid[2] && !E.err[0]; z++)
    for (unsigned y = 0; y < grid[1] && !E.err[0]; y++)
      for (unsigned x = 0; x < grid[0] && !E.err[0]; x++) {
        E.ctaid[0] = x, E.ctaid[1] = y, E.ctaid[2] = z;
        if (sync) emu_block_fibers();
        else
          for (unsigned t = 0; t < block[0]; t++) {
            E.seq_tid = t;
            fn(args);
          }
      }
  E.fibers = false;
}

/* ---- compiling for the emulator ------------------------------------------------------------------- */

typedef struct emu_kernel { char name[112]; void (*fn)(void **); bool sync; } emu_kernel;

typedef struct cuda_emu {
  hj_ctx_t *ctx;
  cpu_jit *jit;
  bool gemm_blas;                      /* matmuls through a host gemm + the epilogue kernel */
} cuda_emu;

typedef struct emu_exec {
  rt_exec base;
  cuda_emu *emu;
  cpu_jit_rt *rt;
  emu_kernel *kernels;                 /* stb_ds */
  int name_seq;
} emu_exec;

static hj_status emu_create(hj_ctx_t *ctx, cuda_emu *e) {
  memset(e, 0, sizeof *e);
  e->ctx = ctx;
  hj_status st = cpu_jit_create(ctx, &e->jit);
  if (st) return st;
  static const cpu_jit_symbol syms[] = {
#define EMU_SYM(n) { "hjemu_" #n, (void *)&hjemu_##n },
    EMU_SYM(tid_x) EMU_SYM(tid_y) EMU_SYM(tid_z) EMU_SYM(ntid_x) EMU_SYM(ntid_y) EMU_SYM(ntid_z)
    EMU_SYM(ctaid_x) EMU_SYM(ctaid_y) EMU_SYM(ctaid_z) EMU_SYM(nctaid_x) EMU_SYM(nctaid_y) EMU_SYM(nctaid_z)
    EMU_SYM(barrier0) EMU_SYM(shfl_down) EMU_SYM(shfl_idx)
#undef EMU_SYM
#define EMU_NV(fn) { "__nv_" #fn "f", (void *)&fn##f }, { "__nv_" #fn, (void *)&fn },
    EMU_NV(exp) EMU_NV(expm1) EMU_NV(log) EMU_NV(log1p) EMU_NV(tanh) EMU_NV(erf) EMU_NV(sin) EMU_NV(cos)
    EMU_NV(tan) EMU_NV(cbrt) EMU_NV(pow) EMU_NV(atan2)
#undef EMU_NV
  };
  return cpu_jit_add_symbols(e->jit, syms, (int)(sizeof syms / sizeof syms[0]));
}

static void emu_destroy(cuda_emu *e) { cpu_jit_destroy(e->jit); }

/* The emulation of NVVM intrinsic |name|, or NULL. */
static const char *emu_replacement(const char *name) {
  static const char *map[][2] = {
    { "llvm.nvvm.read.ptx.sreg.tid.x", "hjemu_tid_x" }, { "llvm.nvvm.read.ptx.sreg.tid.y", "hjemu_tid_y" },
    { "llvm.nvvm.read.ptx.sreg.tid.z", "hjemu_tid_z" }, { "llvm.nvvm.read.ptx.sreg.ntid.x", "hjemu_ntid_x" },
    { "llvm.nvvm.read.ptx.sreg.ntid.y", "hjemu_ntid_y" }, { "llvm.nvvm.read.ptx.sreg.ntid.z", "hjemu_ntid_z" },
    { "llvm.nvvm.read.ptx.sreg.ctaid.x", "hjemu_ctaid_x" }, { "llvm.nvvm.read.ptx.sreg.ctaid.y", "hjemu_ctaid_y" },
    { "llvm.nvvm.read.ptx.sreg.ctaid.z", "hjemu_ctaid_z" }, { "llvm.nvvm.read.ptx.sreg.nctaid.x", "hjemu_nctaid_x" },
    { "llvm.nvvm.read.ptx.sreg.nctaid.y", "hjemu_nctaid_y" }, { "llvm.nvvm.read.ptx.sreg.nctaid.z", "hjemu_nctaid_z" },
    { "llvm.nvvm.barrier0", "hjemu_barrier0" }, { "llvm.nvvm.shfl.sync.down.i32", "hjemu_shfl_down" },
    { "llvm.nvvm.shfl.sync.idx.i32", "hjemu_shfl_idx" },
  };
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    if (!strcmp(map[i][0], name)) return map[i][1];
  return NULL;
}

typedef struct emu_compile { hj_ctx_t *ctx; emu_exec *x; cpu_jit_module jm; } emu_compile;

static hj_status emu_module_begin(void *ud, const char *name, LLVMContextRef *llctx, LLVMModuleRef *mod, void **handle) {
  emu_compile *c = ud;
  hj_status st = cpu_jit_module_create(c->x->emu->jit, name, &c->jm);
  *llctx = c->jm.llctx;
  *mod = c->jm.mod;
  *handle = &c->jm;
  return st;
}
static void emu_module_discard(void *ud, void *handle) { cpu_jit_module_dispose(handle); }
static void emu_unique_name(void *ud, const char *prefix, char *buf, size_t n) {
  emu_compile *c = ud;
  char local[64];
  snprintf(local, sizeof local, "%s_%d", prefix, c->x->name_seq++);
  /* unique in the whole JIT: the emulator's executables share one */
  cpu_jit_unique_name(c->x->emu->jit, local, buf, n);
  for (char *p = buf; *p; p++)
    if (*p == '.') *p = '_';
}

/* Does kernel |fn| call a barrier or a shuffle (then its threads need fibers)? */
static bool emu_syncs(LLVMValueRef fn) {
  for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb))
    for (LLVMValueRef i = LLVMGetFirstInstruction(bb); i; i = LLVMGetNextInstruction(i)) {
      if (LLVMGetInstructionOpcode(i) != LLVMCall) continue;
      LLVMValueRef callee = LLVMGetCalledValue(i);
      size_t len;
      const char *nm = callee ? LLVMGetValueName2(callee, &len) : "";
      if (strstr(nm, "barrier0") || strstr(nm, "shfl.sync")) return true;
    }
  return false;
}

static hj_status emu_module_finish(void *ud, void *handle, rt_exec *base) {
  emu_compile *c = ud;
  emu_exec *x = c->x;
  LLVMModuleRef mod = c->jm.mod;
  LLVMContextRef lc = c->jm.llctx;
  LLVMTypeRef ptr = LLVMPointerTypeInContext(lc, 0), vt = LLVMVoidTypeInContext(lc);
  LLVMBuilderRef b = LLVMCreateBuilderInContext(lc);
  /* kernels: C calling convention and a wrapper taking the argument array */
  LLVMValueRef *ks = NULL;
  for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f))
    if (LLVMGetFunctionCallConv(f) == LLVMPTXKernelCallConv) arrput(ks, f);
  for (ptrdiff_t i = 0; i < arrlen(ks); i++) {
    LLVMValueRef f = ks[i];
    emu_kernel k = { .sync = emu_syncs(f) };
    size_t len;
    snprintf(k.name, sizeof k.name, "%s", LLVMGetValueName2(f, &len));
    LLVMSetFunctionCallConv(f, LLVMCCallConv);
    char wn[160];
    snprintf(wn, sizeof wn, "%s_emu", k.name);
    LLVMValueRef w = LLVMAddFunction(mod, wn, LLVMFunctionType(vt, &ptr, 1, 0));
    LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(lc, w, "entry"));
    unsigned np = LLVMCountParams(f);
    LLVMValueRef args[64];
    for (unsigned p = 0; p < np && p < 64; p++) {
      LLVMValueRef idx = LLVMConstInt(LLVMInt64TypeInContext(lc), p, 0);
      LLVMValueRef slot = LLVMBuildGEP2(b, ptr, LLVMGetParam(w, 0), &idx, 1, "");
      args[p] = LLVMBuildLoad2(b, LLVMTypeOf(LLVMGetParam(f, p)), slot, "");
    }
    LLVMBuildCall2(b, LLVMGlobalGetValueType(f), f, args, np, "");
    LLVMBuildRetVoid(b);
    arrput(x->kernels, k);
  }
  arrfree(ks);
  LLVMDisposeBuilder(b);
  /* NVVM intrinsics -> the emulation */
  LLVMValueRef *dead = NULL;
  hj_status st = HJ_OK;
  for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f)) {
    size_t len;
    const char *nm = LLVMGetValueName2(f, &len);
    if (strncmp(nm, "llvm.nvvm.", 10)) continue;
    const char *rep = emu_replacement(nm);
    if (!rep) {
      st = hj__err(c->ctx, HJ_ERR_UNSUPPORTED, "GPU emulator: no emulation of %s", nm);
      break;
    }
    LLVMValueRef r = LLVMGetNamedFunction(mod, rep);
    if (!r) r = LLVMAddFunction(mod, rep, LLVMGlobalGetValueType(f));
    LLVMReplaceAllUsesWith(f, r);
    arrput(dead, f);
  }
  for (ptrdiff_t i = 0; i < arrlen(dead); i++) LLVMDeleteFunction(dead[i]);
  arrfree(dead);
  LLVMNamedMDNodeRef ann = LLVMGetNamedMetadata(mod, "nvvm.annotations", 17);
  (void)ann;   /* launch bounds: nothing to the host */
  if (st == HJ_OK) st = cpu_jit_optimize(x->emu->jit, mod);
  if (st == HJ_OK) st = cpu_jit_add_module(x->emu->jit, &c->jm, &x->rt);
  else cpu_jit_module_dispose(&c->jm);
  for (ptrdiff_t i = 0; st == HJ_OK && i < arrlen(x->kernels); i++) {
    char wn[160];
    void *a = NULL;
    snprintf(wn, sizeof wn, "%s_emu", x->kernels[i].name);
    st = cpu_jit_lookup(x->emu->jit, wn, &a);
    memcpy(&x->kernels[i].fn, &a, sizeof a);
  }
  return st;
}

static emu_kernel *emu_find(emu_exec *x, const char *name) {
  for (ptrdiff_t i = 0; i < arrlen(x->kernels); i++)
    if (!strcmp(x->kernels[i].name, name)) return &x->kernels[i];
  return NULL;
}

/* Compiles |m| as the CUDA backend would (sm_80), for the emulator. */
static hj_status emu_compile_module(cuda_emu *e, const hlo_module *m, emu_exec *x) {
  memset(x, 0, sizeof *x);
  x->emu = e;
  x->base.ctx = e->ctx;
  static const char *const pre[] = { "conv-lower", "select-and-scatter-lower", "sort-lower",
                                  "rng-lower", "dot-canonicalize" };
  static const char *const post[] = { "fusion-split", "wrap-fusions" };
  emu_compile c = { e->ctx, x, { 0 } };
  rt_target t = {
    .name = "GPU emulator",
    .emit = { .gpu = true, .vector_bytes = 16, .has_fma = true, .has_f16c = true, .gpu_sm = 80,
              .gpu_sm_count = 108, .gpu_libdevice = true, .gpu_tiled_matmul = true },
    .pre = pre, .npre = (int)(sizeof pre / sizeof pre[0]),
    .post = post, .npost = (int)(sizeof post / sizeof post[0]), .ud = &c,
    .module_begin = emu_module_begin, .module_discard = emu_module_discard,
    .unique_name = emu_unique_name, .module_finish = emu_module_finish,
  };
  hj_status st = rt_compile(e->ctx, m, &t, &x->base);
  for (ptrdiff_t i = 0; st == HJ_OK && i < arrlen(x->base.kernels); i++) {
    th_thunk *th = x->base.kernels[i];
    const char *nm = th->kind == TH_KERNEL ? th->sym : th->matmul->gpu_tiled_name;
    if (th->kind == TH_MATMUL && !nm[0]) nm = th->matmul->epi_name;
    emu_kernel *k = nm[0] ? emu_find(x, nm) : NULL;
    if (!k && (th->kind == TH_KERNEL || th->matmul->gpu_tiled_name[0]))
      st = hj__err(e->ctx, HJ_ERR_INTERNAL, "GPU emulator: kernel %s not found", nm);
  }
  return st;
}

static void emu_exec_free(emu_exec *x) {
  if (x->rt) cpu_jit_remove(x->emu->jit, x->rt);
  arrfree(x->kernels);
  rt_exec_free(&x->base);
}

static hj_status emu_kernel_hook(void *ud, const th_thunk *t, void **bufs) {
  emu_exec *x = ud;
  emu_kernel *k = emu_find(x, t->sym);
  if (!k) return hj__err(x->base.ctx, HJ_ERR_INTERNAL, "GPU emulator: no kernel %s", t->sym);
  emu_launch(k->fn, k->sync, t->grid, t->block, bufs);
  return E.err[0] ? hj__err(x->base.ctx, HJ_ERR_INTERNAL, "%s (kernel %s)", E.err, t->sym) : HJ_OK;
}

/* The library path: C = A op(B) on the host, then the epilogue kernel in place. */
static void emu_host_gemm(const struct emit_matmul_plan *p, const float *A, const float *B, float *C) {
  for (int64_t b = 0; b < p->B; b++)
    for (int64_t i = 0; i < p->M; i++)
      for (int64_t j = 0; j < p->N; j++) {
        float s = 0;
        for (int64_t k = 0; k < p->K; k++)
          s = fmaf(A[b * p->M * p->K + i * p->K + k],
                   p->rhs_transposed ? B[b * p->N * p->K + j * p->K + k] : B[b * p->K * p->N + k * p->N + j], s);
        C[b * p->M * p->N + i * p->N + j] = s;
      }
}

static hj_status emu_matmul_hook(void *ud, const th_thunk *t, void **bufs) {
  emu_exec *x = ud;
  const struct emit_matmul_plan *p = t->matmul;
  if (!x->emu->gemm_blas && p->gpu_tiled_name[0]) {
    emu_kernel *k = emu_find(x, p->gpu_tiled_name);
    void *args[3 + 16] = { bufs[p->lhs_buf], bufs[p->rhs_buf], bufs[p->out_buf] };
    for (int i = 0; i < p->gpu_n_extra; i++) args[3 + i] = bufs[i];
    emu_launch(k->fn, k->sync, p->gpu_grid, p->gpu_block, args);
  } else {
    emu_host_gemm(p, bufs[p->lhs_buf], bufs[p->rhs_buf], bufs[p->out_buf]);
    if (p->epi_name[0]) {
      emu_kernel *k = emu_find(x, p->epi_name);
      emu_launch(k->fn, k->sync, p->gpu_epi_grid, p->gpu_epi_block, bufs);
    }
  }
  return E.err[0] ? hj__err(x->base.ctx, HJ_ERR_INTERNAL, "%s (matmul %s)", E.err, t->ins->name) : HJ_OK;
}

/* Runs |x| on the caller's flattened leaves (host memory: the emulator's device is the host). */
static hj_status emu_run(emu_exec *x, void *const *in, void *const *out) {
  E.err[0] = 0;
  th_runtime rt = { .ctx = x->base.ctx, .ud = x, .kernel = emu_kernel_hook, .matmul = emu_matmul_hook };
  return th_program_run(&rt, x->base.entry, in, out);
}

#endif /* HLOJIT_CUDA_EMU_H */
