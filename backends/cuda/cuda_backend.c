/* cuda_backend.c — the CUDA backend's entry in the backend table (backend.h): what only the
   GPU does around the shared compile driver (runtime/compile.c). cuda_exec.h lists the
   other files (memory, runs and graphs, matmuls).

   Per context (ctx_create, on the first CUDA compile or buffer): the driver by dlopen
   (cuda_driver_open: no driver, the toolkit's stub, no device -> HJ_ERR_UNSUPPORTED "no
   CUDA device: ..."), device $HLOJIT_CUDA_DEVICE (default 0) with its primary context, a
   stream and (when it loads) cuBLAS, and the NVPTX code generator for the device's arch
   (compute capability 9.0: sm_90a, else sm_80). Under HJ_BACKEND_AUTO a failure here makes
   the API fall back to the next backend, the reason in hj_exec_stats().note; under
   HJ_BACKEND_CUDA it is the caller's error.

   compile(module): rt_compile with the GPU target:
     - emitter target: gpu, the arch's number (80/90), the SM count, whether libdevice can
       be linked (transcendental functions: hlojit's own emit_math for the f32 hot ones,
       as on the CPU; libdevice's for the rest, which the CPU takes from libm — libdevice
       ships with the CUDA toolkit, not the driver, so where it is missing those fusions
       run in the evaluator), and the tiled-matmul generator (cuda_gemm.c);
     - passes: the CPU backend's (dot_canonicalize before the pipeline, fusion_split and
       wrap_fusions after);
     - module hooks: one LLVM module per executable in a fresh LLVM context, prepared for
       NVPTX; finishing it takes its PTX from the PTX cache (cuda_code_cache.c: memory, then
       disk) or links libdevice if called, runs O3 and writes PTX (dumped as NNN.NAME.ptx
       under HLOJIT_DUMP_TO, with the LLVM IR as NNN.NAME.ll), loads it once with
       cuModuleLoadDataEx and resolves every kernel (cuModuleGetFunction); PTX that loaded
       is cached, a cached PTX the driver refuses is dropped and compiled again.
   After rt_compile each program's arena and constants move to managed memory (the
   compile driver made them on the host), and cub_graph_plan decides whether the entry
   program can be a CUDA graph.

   Offline (code_text, `hlojit ptx`): the same compile for a given arch with no driver or
   device: the PTX is the result; nothing is loaded and the PTX cache is not used. Names are
   per module ("hjk_0", ...), so the same module gives the same PTX (and the cache's key
   needs no renaming). */
#include "cuda_exec.h"
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

/* ---- per-context state ------------------------------------------------------------------ */

bool cub_env_off(const char *name) {
  const char *v = getenv(name);
  return v && (!strcmp(v, "0") || !strcmp(v, "off") || !strcmp(v, "no"));
}

static int cb_gemm_mode(void) {
  const char *v = getenv("HLOJIT_CUDA_GEMM");
  if (!v || !*v || !strcmp(v, "measure")) return CUB_GEMM_MEASURE;
  if (!strcmp(v, "rule")) return CUB_GEMM_RULE;
  if (!strcmp(v, "tiled")) return CUB_GEMM_TILED;
  if (!strcmp(v, "cublas")) return CUB_GEMM_CUBLAS;
  return CUB_GEMM_MEASURE;
}

static void cb_state_free(cub_state *s) {
  if (!s) return;
  cuda_error e;
  if (s->dv) {
    for (ptrdiff_t i = 0; i < arrlen(s->allocs); i++)   /* buffers the caller leaked */
      if (cuda_device_bind(s->dv, &e) == HJ_OK) cuda_mem_free(s->dv, (CUdeviceptr)s->allocs[i].base, &e);
  }
  arrfree(s->allocs);
  cub_cc_destroy(s->cc);
  cuda_codegen_destroy(s->cg);
  cuda_device_close(s->dv);
  cuda_driver_close(s->d);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

static hj_status cb_ctx_create(hj_ctx_t *ctx, void **out) {
  *out = NULL;
  cub_state *s = calloc(1, sizeof *s);
  if (!s) return hj__err(ctx, HJ_ERR_OOM, "CUDA backend: out of memory");
  s->ctx = ctx;
  pthread_mutex_init(&s->mu, NULL);
  cuda_error e = { 0 };
  const char *ord = getenv("HLOJIT_CUDA_DEVICE");
  cuda_driver_options dopt;
  cuda_driver_options_init(&dopt);
  dopt.load_cublas = false;   /* on the first matmul that may use it (cuda_device_blas) */
  hj_status st = cuda_driver_open(&dopt, &s->d, &e);
  if (st == HJ_OK) st = cuda_device_open(s->d, ord ? atoi(ord) : 0, &s->dv, &e);
  if (st == HJ_OK) st = cuda_arch_for_device(s->dv->info.cc_major, s->dv->info.cc_minor, &s->arch, &e);
  if (st == HJ_OK) st = cuda_codegen_create(s->arch, &s->cg, &e);
  if (st != HJ_OK) {
    hj__err(ctx, st, "CUDA backend: %s", e.msg);
    cb_state_free(s);
    return st;
  }
  if ((st = cub_cc_create(ctx, &s->cc)) != HJ_OK) {
    cb_state_free(s);
    return st;
  }
  char lib[1024];
  s->libdevice = cuda_libdevice_path(lib, sizeof lib);
  s->graphs = s->d->has_graphs;
  s->gemm_mode = cb_gemm_mode();
  const char *tf = getenv("HLOJIT_CUDA_TF32");
  s->tf32 = tf && !strcmp(tf, "1");
  char d1[600], d2[500];
  cuda_driver_describe(s->d, d1, sizeof d1);
  cuda_device_describe(s->dv, d2, sizeof d2);
  snprintf(s->desc, sizeof s->desc, "%s; %s; PTX for %s", d1, d2, cuda_arch_name(s->arch));
  *out = s;
  return HJ_OK;
}

static void cb_ctx_destroy(hj_ctx_t *ctx, void *state) { cb_state_free(state); }

/* ---- the target ------------------------------------------------------------------------------ */

/* The passes this backend adds around the shared pipeline (passes/pipeline.c's names). */
static const char *const cb_pre[] = { "conv-lower", "select-and-scatter-lower", "sort-lower",
                                  "rng-lower", "dot-canonicalize" };
static const char *const cb_post[] = { "fusion-split", "wrap-fusions" };

typedef struct cb_compile {          /* the ud of the target hooks during one compile */
  hj_ctx_t *ctx;
  cub_exec *x;
  cuda_codegen *cg;
} cb_compile;

typedef struct cb_module { LLVMContextRef llctx; LLVMModuleRef mod; } cb_module;

static hj_status cb_module_begin(void *ud, const char *name, LLVMContextRef *llctx,
                                 LLVMModuleRef *mod, void **handle) {
  cb_compile *c = ud;
  *handle = NULL;
  cb_module *m = calloc(1, sizeof *m);
  if (!m) return hj__err(c->ctx, HJ_ERR_OOM, "CUDA backend: out of memory");
  m->llctx = LLVMContextCreate();
  m->mod = LLVMModuleCreateWithNameInContext(name, m->llctx);
  cuda_codegen_prepare_module(c->cg, m->mod);
  *llctx = m->llctx;
  *mod = m->mod;
  *handle = m;
  return HJ_OK;
}

static void cb_module_discard(void *ud, void *handle) {
  cb_module *m = handle;
  if (!m) return;
  LLVMDisposeModule(m->mod);
  LLVMContextDispose(m->llctx);
  free(m);
}

static void cb_unique_name(void *ud, const char *prefix, char *buf, size_t n) {
  cb_compile *c = ud;
  snprintf(buf, n, "%s_%d", prefix, c->x->name_seq++);
}

static void cb_dump(hj_ctx_t *ctx, const rt_exec *x, const char *what, const char *text, size_t len) {
  const char *dir = ctx->opt.dump_dir;
  if (!dir || !*dir || !text) return;
  mkdir(dir, 0777);
  char path[4096];
  snprintf(path, sizeof path, "%s/%03d.%s.%s", dir, x->seq, x->m->name, what);
  FILE *f = fopen(path, "wb");
  if (!f) return;
  fwrite(text, 1, len, f);
  fclose(f);
}

static double cb_now_ms(void) { return rt_now_ms(); }

/* The driver loads |x|'s PTX; every kernel is resolved. */
static hj_status cb_load(cub_exec *x, rt_exec *base, cuda_error *e) {
  cuda_device *dv = x->be->dv;
  char what[200];
  snprintf(what, sizeof what, "%03d.%s", base->seq, base->m->name);
  pthread_mutex_lock(&x->be->mu);
  hj_status st = cuda_device_bind(dv, e);
  if (st == HJ_OK) st = cuda_module_load(dv, x->ptx, what, &x->mod, e);
  for (ptrdiff_t i = 0; st == HJ_OK && i < arrlen(base->kernels); i++) {
    th_thunk *t = base->kernels[i];
    if (t->kind != TH_KERNEL) continue;
    CUfunction fn = NULL;
    st = cuda_module_function(dv, x->mod, t->sym, &fn, e);
    if (st == HJ_OK && t->shared_bytes) st = cuda_func_allow_shared(dv, fn, t->sym, (int)t->shared_bytes, e);
    t->fn = fn;
  }
  if (st != HJ_OK && x->mod) {
    cuda_error e2;
    cuda_module_unload(dv, x->mod, &e2);
    x->mod = NULL;
  }
  pthread_mutex_unlock(&x->be->mu);
  return st;
}

/* libdevice if called, O3, PTX (times in base->stats). */
static hj_status cb_ptx(cb_compile *c, cb_module *m, rt_exec *base, cuda_error *e) {
  double t1 = cb_now_ms();
  hj_status st = cuda_compile_ptx(c->cg, m->mod, &c->x->ptx, e);
  base->stats.optimize_ms = cb_now_ms() - t1;
  return st;
}

/* The module's PTX: from the PTX cache (online) or compiled; then (with a device) one
   module load and every kernel. A cached PTX the driver refuses is dropped and compiled
   afresh; what loads is cached. */
static hj_status cb_module_finish(void *ud, void *handle, rt_exec *base) {
  cb_compile *c = ud;
  cub_exec *x = c->x;
  cb_module *m = handle;
  cuda_error e = { 0 };
  if (c->ctx->opt.dump_dir && *c->ctx->opt.dump_dir) {
    char *ir = LLVMPrintModuleToString(m->mod);
    cb_dump(c->ctx, base, "ll", ir, strlen(ir));
    LLVMDisposeMessage(ir);
  }
  double t0 = cb_now_ms();
  rt_code_key key = { 0 };
  int source = HJ_CODE_COMPILED;
  base->stats.optimize_ms = 0;
  hj_status st = x->offline ? HJ_OK : cub_cc_lookup(x->be->cc, c->cg, m->mod, &key, &x->ptx, &source);
  if (st != HJ_OK) {   /* out of memory: the message is set */
    cb_module_discard(ud, handle);
    rt_code_key_free(&key);
    return st;
  }
  if (!x->ptx) st = cb_ptx(c, m, base, &e);
  if (st == HJ_OK && !x->offline) {
    cb_dump(c->ctx, base, "ptx", x->ptx, strlen(x->ptx));
    st = cb_load(x, base, &e);
    if (st != HJ_OK && source != HJ_CODE_COMPILED) {   /* the cached text refused: compile */
      cub_cc_drop(x->be->cc, &key);
      free(x->ptx);
      x->ptx = NULL;
      source = HJ_CODE_COMPILED;
      e = (cuda_error){ 0 };
      st = cb_ptx(c, m, base, &e);
      if (st == HJ_OK) cb_dump(c->ctx, base, "ptx", x->ptx, strlen(x->ptx));
      if (st == HJ_OK) st = cb_load(x, base, &e);
    }
    if (st == HJ_OK) cub_cc_put(x->be->cc, &key, x->ptx, source);
  } else if (st == HJ_OK) {
    cb_dump(c->ctx, base, "ptx", x->ptx, strlen(x->ptx));
  }
  cb_module_discard(ud, handle);
  rt_code_key_free(&key);
  base->stats.code_source = source;
  if (st != HJ_OK) return hj__err(c->ctx, st, "CUDA backend: %s", e.msg);
  for (ptrdiff_t i = 0; !x->offline && st == HJ_OK && i < arrlen(base->kernels); i++)
    if (base->kernels[i]->kind == TH_MATMUL) st = cub_mm_prepare(x, base->kernels[i]);
  base->stats.codegen_ms = cb_now_ms() - t0 - base->stats.optimize_ms;
  return st;
}

static emit_target cb_emit_target(cuda_arch arch, int sm_count, bool libdevice) {
  emit_target t = { .gpu = true, .vector_bytes = 16, .has_fma = true, .has_f16c = true };
  t.gpu_sm = arch == CUDA_SM_90A ? 90 : 80;
  t.gpu_sm_count = sm_count > 0 ? sm_count : arch == CUDA_SM_90A ? 132 : 108;
  t.gpu_libdevice = libdevice;
  t.gpu_tiled_matmul = true;
  return t;
}

/* rt_compile for |x| with code generator |cg|. */
static hj_status cb_rt_compile(hj_ctx_t *ctx, cub_exec *x, cuda_codegen *cg, cuda_arch arch,
                               int sm_count, bool libdevice, const hlo_module *m) {
  cb_compile c = { ctx, x, cg };
  rt_target t = {
    .name = "CUDA backend",
    .emit = cb_emit_target(arch, sm_count, libdevice),
    .pre = cb_pre, .npre = (int)(sizeof cb_pre / sizeof cb_pre[0]),
    .post = cb_post, .npost = (int)(sizeof cb_post / sizeof cb_post[0]),
    .ud = &c,
    .module_begin = cb_module_begin,
    .module_discard = cb_module_discard,
    .unique_name = cb_unique_name,
    .module_finish = cb_module_finish,
  };
  return rt_compile(ctx, m, &t, &x->base);
}

/* ---- device memory for the programs ------------------------------------------------------------ */

/* Each program's arena and constants into managed memory (prefetched at the first run). */
static hj_status cb_programs_to_device(cub_exec *x) {
  cub_state *s = x->be;
  for (ptrdiff_t i = 0; i < arrlen(x->base.programs); i++) {
    th_program *p = x->base.programs[i];
    void *arena = NULL;
    hj_status st = cub_alloc_managed(s, (size_t)(p->plan.arena_bytes ? p->plan.arena_bytes : 64), &arena);
    if (st != HJ_OK) return st;
    arrput(x->host_arena, p->arena);
    p->arena = arena;
    ptrdiff_t nc = arrlen(p->plan.consts);
    void **hc = calloc((size_t)nc + 1, sizeof *hc);
    if (!hc) return hj__err(s->ctx, HJ_ERR_OOM, "CUDA backend: out of memory");
    arrput(x->host_consts, hc);
    for (ptrdiff_t k = 0; k < nc; k++) {
      size_t n = (size_t)p->plan.consts[k].lit->nbytes;
      void *d = NULL;
      if ((st = cub_alloc_managed(s, n, &d)) != HJ_OK) return st;
      if (n) memcpy(d, p->consts[k], n);
      hc[k] = p->consts[k];
      p->consts[k] = d;
    }
  }
  return HJ_OK;
}

/* Puts the host arenas and constants back (rt_exec_free frees those) and frees ours. */
static void cb_programs_from_device(cub_exec *x) {
  for (ptrdiff_t i = 0; i < arrlen(x->host_arena); i++) {
    th_program *p = x->base.programs[i];
    cub_free_managed(x->be, p->arena);
    p->arena = x->host_arena[i];
    void **hc = i < arrlen(x->host_consts) ? x->host_consts[i] : NULL;
    for (ptrdiff_t k = 0; hc && k < arrlen(p->plan.consts); k++) {
      if (!hc[k]) break;   /* moved up to here */
      cub_free_managed(x->be, p->consts[k]);
      p->consts[k] = hc[k];
    }
    free(hc);
  }
  arrfree(x->host_arena);
  arrfree(x->host_consts);
}

/* ---- the table's functions ------------------------------------------------------------------------ */

static void cb_exec_free(void *exec) {
  cub_exec *x = exec;
  if (!x) return;
  cuda_error e;
  if (!x->offline && x->be) {
    pthread_mutex_lock(&x->be->mu);
    if (cuda_device_bind(x->be->dv, &e) == HJ_OK) cuda_device_sync(x->be->dv, &e);
    cub_graph_free(x);
    if (x->mod) cuda_module_unload(x->be->dv, x->mod, &e);
    pthread_mutex_unlock(&x->be->mu);
    for (ptrdiff_t i = 0; i < arrlen(x->stage_in); i++) cub_free_managed(x->be, x->stage_in[i].p);
    for (ptrdiff_t i = 0; i < arrlen(x->stage_out); i++) cub_free_managed(x->be, x->stage_out[i].p);
    cb_programs_from_device(x);
  }
  arrfree(x->stage_in);
  arrfree(x->stage_out);
  arrfree(x->mms);
  free(x->ptx);
  rt_exec_free(&x->base);
  pthread_mutex_destroy(&x->run_mu);
  free(x);
}

static hj_status cb_host_sync(void *ud);
static hj_status cb_copy(void *ud, void *dst, const void *src, size_t n);
static hj_status cb_kernel_hook(void *ud, const th_thunk *t, void **bufs);
static hj_status cb_matmul_hook(void *ud, const th_thunk *t, void **bufs);

static hj_status cb_compile_module(hj_ctx_t *ctx, void *state, const hlo_module *m, void **out) {
  *out = NULL;
  cub_state *s = state;
  cub_exec *x = calloc(1, sizeof *x);
  if (!x) return hj__err(ctx, HJ_ERR_OOM, "CUDA backend: out of memory");
  x->be = s;
  x->base.ctx = ctx;
  pthread_mutex_init(&x->run_mu, NULL);
  /* mms never moves once matmul thunks point into it: room for every matmul up front */
  hj_status st = cb_rt_compile(ctx, x, s->cg, s->arch, s->dv->info.sm_count, s->libdevice, m);
  if (st == HJ_OK) st = cb_programs_to_device(x);
  if (st != HJ_OK) {
    cb_exec_free(x);
    return st;
  }
  x->base.stats.backend = HJ_BACKEND_CUDA;
  x->run = (th_runtime){ .ctx = ctx, .ud = x, .kernel = cb_kernel_hook, .matmul = cb_matmul_hook,
                         .host_sync = cb_host_sync, .copy = cb_copy };
  cub_graph_plan(x);
  *out = x;
  return HJ_OK;
}

static hj_status cb_run(void *exec, void *const *in, int nin, void *const *out, int nout) {
  return cub_run(exec, in, nin, out, nout);
}

static void cb_stats(const void *exec, hj_exec_stats_t *s) { *s = ((const cub_exec *)exec)->base.stats; }

static hj_status cb_code_text(hj_ctx_t *ctx, const hlo_module *m, const char *target, char **text) {
  *text = NULL;
  cuda_arch arch = CUDA_SM_80;
  cuda_error e = { 0 };
  if (target && cuda_arch_parse(target, &arch, &e) != HJ_OK) return cub_err(ctx, &e);   /* NULL: sm_80 */
  cuda_codegen *cg = NULL;
  if (cuda_codegen_create(arch, &cg, &e) != HJ_OK) return cub_err(ctx, &e);
  cub_exec *x = calloc(1, sizeof *x);
  if (!x) {
    cuda_codegen_destroy(cg);
    return hj__err(ctx, HJ_ERR_OOM, "CUDA backend: out of memory");
  }
  x->offline = true;
  x->base.ctx = ctx;
  pthread_mutex_init(&x->run_mu, NULL);
  char lib[1024];
  hj_status st = cb_rt_compile(ctx, x, cg, arch, 0, cuda_libdevice_path(lib, sizeof lib), m);
  if (st == HJ_OK) {
    *text = x->ptx ? x->ptx : calloc(1, 1);   /* no kernels: empty text */
    x->ptx = NULL;
    if (!*text) st = hj__err(ctx, HJ_ERR_OOM, "CUDA backend: out of memory");
  }
  cb_exec_free(x);
  cuda_codegen_destroy(cg);
  return st;
}

static hj_status cb_buffer_alloc(hj_ctx_t *ctx, void *state, size_t bytes, void **out) {
  return cub_alloc_managed(state, bytes, out);
}
static void cb_buffer_free(hj_ctx_t *ctx, void *state, void *p) { cub_free_managed(state, p); }
static void cb_buffer_host(hj_ctx_t *ctx, void *state, void *p, size_t bytes) { cub_to_host(state, p, bytes); }

/* ---- run hooks (cuda_run.c does the work) ------------------------------------------------------------ */

static hj_status cb_host_sync(void *ud) {
  cub_exec *x = ud;
  cuda_error e;
  if (x->mode != CUB_EAGER)   /* graphs hold no host thunks (cub_graph_plan) */
    return hj__err(x->base.ctx, HJ_ERR_INTERNAL, "CUDA backend: host work inside a graph");
  return cuda_device_sync(x->be->dv, &e) == HJ_OK ? HJ_OK : cub_err(x->base.ctx, &e);
}

static hj_status cb_copy(void *ud, void *dst, const void *src, size_t n) { return cub_copy_hook(ud, dst, src, n); }
static hj_status cb_kernel_hook(void *ud, const th_thunk *t, void **bufs) { return cub_kernel(ud, t, bufs); }
static hj_status cb_matmul_hook(void *ud, const th_thunk *t, void **bufs) { return cub_mm_run(ud, t, bufs); }

const hlo_backend hlo_backend_cuda = {
  .name = "cuda",
  .kind = HJ_BACKEND_CUDA,
  .ctx_create = cb_ctx_create,
  .ctx_destroy = cb_ctx_destroy,
  .compile = cb_compile_module,
  .run = cb_run,
  .stats = cb_stats,
  .exec_free = cb_exec_free,
  .code_text = cb_code_text,
  .buffer_alloc = cb_buffer_alloc,
  .buffer_free = cb_buffer_free,
  .buffer_host = cb_buffer_host,
};
