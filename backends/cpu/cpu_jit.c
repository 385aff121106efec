/* cpu_jit.c — ORC LLJIT for the host CPU through the LLVM-C API (see cpu_jit.h for the life
   of a kernel).

   Why two TargetMachines: LLVMOrcJITTargetMachineBuilderCreateFromTargetMachine consumes
   the machine it is given, and LLVMRunPasses needs one of its own for the vectoriser's cost
   model (without it the loop vectoriser sees a generic target and picks no or narrow
   vectors). Both are built from the same triple, CPU name, features, PIC and the small code
   model, so the JIT's data layout equals the one we stamp on modules; create checks it.

   Runtime helpers are absolute symbols in the main JITDylib (LLVMOrcAbsoluteSymbols), not a
   search of the process: a kernel can only reach what is listed here, and a missing helper is
   a clear "Symbols not found" at lookup instead of whatever dlsym happens to find.

   Errors: LLVMErrorRef -> LLVMGetErrorMessage (consumes the error) -> hj__err(...,
   HJ_ERR_BACKEND, "LLVM: <what>: <message>") -> LLVMDisposeErrorMessage. When code
   generation fails inside a lookup, ORC returns only "Failed to materialize symbols" and
   hands the cause ("Symbols not found: [ expf2 ]") to the session's error reporter, which
   by default prints it to stderr; ours keeps it and the failed call appends it. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* exp10f, sincosf, roundevenf in <math.h> */
#endif
#include "cpu_jit.h"
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <llvm-c/Analysis.h>
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Target.h>
#include <llvm-c/Transforms/PassBuilder.h>

/* GNU extensions of <math.h>, declared again for builds (one translation unit) where
   <math.h> was included before _GNU_SOURCE could be defined. */
extern float exp10f(float);
extern double exp10(double);
extern void sincosf(float, float *, float *);
extern void sincos(double, double *, double *);
extern float roundevenf(float);
extern double roundeven(double);
/* libgcc's integer powers, which llvm.powi lowers to. */
extern float __powisf2(float, int);
extern double __powidf2(double, int);

struct cpu_jit {
  hj_ctx_t *ctx;
  LLVMTargetMachineRef tm;      /* for LLVMRunPasses; the JIT has its own copy */
  LLVMOrcLLJITRef jit;
  LLVMOrcJITDylibRef jd;        /* main JITDylib: kernels and helpers */
  char *triple, *cpu, *features; /* LLVM-allocated (LLVMDisposeMessage) */
  char *data_layout;            /* LLVM-allocated */
  pthread_mutex_t opt_mu;       /* serialises LLVMRunPasses on the shared TargetMachine */
  atomic_long counter;          /* cpu_jit_unique_name */
  pthread_mutex_t err_mu;       /* guards session_err */
  char session_err[1024];       /* last message of the session's error reporter, or "" */
  /* cpu_jit_compile_object: TargetMachines not in use (a TargetMachine is not safe to
     share between threads; each compile takes one, making one when none is free) */
  pthread_mutex_t tm_mu;
  LLVMTargetMachineRef *free_tms;   /* stb_ds */
  LLVMTargetRef target;
  /* cpu_jit_kernel_name: the names given out (stb_ds string set) */
  pthread_mutex_t name_mu;
  struct { char *key; int value; } *names;
};

/* ---- errors ------------------------------------------------------------------------------ */

/* Turns |e| (consumed) into the context's message, with the session's pending error
   appended when there is one (and cleared); returns HJ_ERR_BACKEND. |j| may be NULL. */
static hj_status cj_llvm_err(cpu_jit *j, hj_ctx_t *ctx, LLVMErrorRef e, const char *what) {
  char *msg = LLVMGetErrorMessage(e);
  char cause[sizeof j->session_err] = "";
  if (j) {
    pthread_mutex_lock(&j->err_mu);
    memcpy(cause, j->session_err, sizeof cause);
    j->session_err[0] = 0;
    pthread_mutex_unlock(&j->err_mu);
  }
  hj_status st = hj__err(ctx, HJ_ERR_BACKEND, "LLVM: %s: %s%s%s%s", what,
                         msg ? msg : "(no message)", cause[0] ? " (" : "", cause,
                         cause[0] ? ")" : "");
  LLVMDisposeErrorMessage(msg);
  return st;
}

/* The ExecutionSession's error reporter: keeps the last message for cj_llvm_err. */
static void cj_report(void *user, LLVMErrorRef e) {
  cpu_jit *j = user;
  char *msg = LLVMGetErrorMessage(e);
  pthread_mutex_lock(&j->err_mu);
  snprintf(j->session_err, sizeof j->session_err, "%s", msg ? msg : "");
  pthread_mutex_unlock(&j->err_mu);
  LLVMDisposeErrorMessage(msg);
}

static void cj_clear_session_err(cpu_jit *j) {
  pthread_mutex_lock(&j->err_mu);
  j->session_err[0] = 0;
  pthread_mutex_unlock(&j->err_mu);
}

/* ---- native target, once per process ----------------------------------------------------- */

static pthread_once_t cj_once = PTHREAD_ONCE_INIT;
static int cj_native_failed;

static void cj_init_native(void) {
  cj_native_failed = LLVMInitializeNativeTarget() || LLVMInitializeNativeAsmPrinter();
}

/* ---- runtime helpers --------------------------------------------------------------------- */

/* Everything O3 or our emitters may turn into a call: libm (float and double), the memory
   intrinsics (loop-idiom recognition emits memset/memcpy) and libgcc's powi. */
#define CJ_LIBM(X)                                                                        \
  X(exp) X(exp2) X(exp10) X(expm1) X(log) X(log2) X(log10) X(log1p) X(pow) X(sqrt) X(cbrt) \
  X(sin) X(cos) X(tan) X(asin) X(acos) X(atan) X(atan2) X(sinh) X(cosh) X(tanh) X(asinh)  \
  X(acosh) X(atanh) X(erf) X(erfc) X(lgamma) X(tgamma) X(fmod) X(remainder) X(hypot)     \
  X(floor) X(ceil) X(trunc) X(round) X(roundeven) X(rint) X(nearbyint) X(fmin) X(fmax)   \
  X(fma) X(ldexp) X(frexp) X(copysign) X(fabs) X(sincos)

static const cpu_jit_symbol cj_default_syms[] = {
#define CJ_SYM(fn) { #fn "f", (void *)&fn##f }, { #fn, (void *)&fn },
  CJ_LIBM(CJ_SYM)
#undef CJ_SYM
  { "memcpy", (void *)&memcpy }, { "memmove", (void *)&memmove }, { "memset", (void *)&memset },
  { "__powisf2", (void *)&__powisf2 }, { "__powidf2", (void *)&__powidf2 },
};
#undef CJ_LIBM

hj_status cpu_jit_add_symbols(cpu_jit *j, const cpu_jit_symbol *syms, int n) {
  if (!j || (n > 0 && !syms) || n < 0)
    return hj__err(j ? j->ctx : NULL, HJ_ERR_INVALID_ARG, "cpu_jit_add_symbols: bad arguments");
  if (n == 0) return HJ_OK;
  LLVMOrcCSymbolMapPair *pairs = calloc((size_t)n, sizeof *pairs);
  if (!pairs) return hj__err(j->ctx, HJ_ERR_OOM, "cpu_jit_add_symbols: out of memory");
  for (int i = 0; i < n; i++) {
    pairs[i].Name = LLVMOrcLLJITMangleAndIntern(j->jit, syms[i].name);
    pairs[i].Sym.Address = (LLVMOrcExecutorAddress)(uintptr_t)syms[i].addr;
    pairs[i].Sym.Flags.GenericFlags =
        LLVMJITSymbolGenericFlagsExported | LLVMJITSymbolGenericFlagsCallable;
    pairs[i].Sym.Flags.TargetFlags = 0;
  }
  /* Takes the names' references; the array stays ours. */
  LLVMOrcMaterializationUnitRef mu = LLVMOrcAbsoluteSymbols(pairs, (size_t)n);
  free(pairs);
  LLVMErrorRef e = LLVMOrcJITDylibDefine(j->jd, mu);
  if (e) {
    LLVMOrcDisposeMaterializationUnit(mu); /* still ours on failure */
    return cj_llvm_err(j, j->ctx, e, "defining runtime helpers");
  }
  return HJ_OK;
}

/* ---- create / destroy -------------------------------------------------------------------- */

static LLVMTargetMachineRef cj_make_tm(cpu_jit *j, LLVMTargetRef target) {
  return LLVMCreateTargetMachine(target, j->triple, j->cpu, j->features,
                                 LLVMCodeGenLevelAggressive, LLVMRelocPIC, LLVMCodeModelSmall);
}

/* The TargetMachines, the LLJIT and the data-layout check. */
static hj_status cj_build(cpu_jit *j) {
  char *msg = NULL;
  LLVMTargetRef target;
  if (LLVMGetTargetFromTriple(j->triple, &target, &msg)) {
    hj_status st = hj__err(j->ctx, HJ_ERR_BACKEND, "LLVM: no target for '%s': %s", j->triple,
                           msg ? msg : "");
    LLVMDisposeMessage(msg);
    return st;
  }
  j->target = target;
  j->tm = cj_make_tm(j, target);
  LLVMTargetMachineRef jit_tm = cj_make_tm(j, target);
  if (!j->tm || !jit_tm) {
    if (jit_tm) LLVMDisposeTargetMachine(jit_tm);
    return hj__err(j->ctx, HJ_ERR_BACKEND, "LLVM: cannot create a TargetMachine for %s (cpu %s)",
                   j->triple, j->cpu);
  }
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(j->tm);
  j->data_layout = LLVMCopyStringRepOfTargetData(td);
  LLVMDisposeTargetData(td);

  LLVMOrcLLJITBuilderRef b = LLVMOrcCreateLLJITBuilder();
  LLVMOrcLLJITBuilderSetJITTargetMachineBuilder(
      b, LLVMOrcJITTargetMachineBuilderCreateFromTargetMachine(jit_tm)); /* both consumed */
  LLVMErrorRef e = LLVMOrcCreateLLJIT(&j->jit, b);                      /* consumes b */
  if (e) {
    j->jit = NULL;
    return cj_llvm_err(j, j->ctx, e, "creating the LLJIT");
  }
  LLVMOrcExecutionSessionSetErrorReporter(LLVMOrcLLJITGetExecutionSession(j->jit), cj_report, j);
  j->jd = LLVMOrcLLJITGetMainJITDylib(j->jit);
  const char *jdl = LLVMOrcLLJITGetDataLayoutStr(j->jit);
  if (strcmp(jdl, j->data_layout) != 0)
    return hj__err(j->ctx, HJ_ERR_BACKEND, "LLVM: JIT data layout '%s' differs from '%s'", jdl,
                   j->data_layout);
  return HJ_OK;
}

hj_status cpu_jit_create(hj_ctx_t *ctx, cpu_jit **out) {
  if (!out) return hj__err(ctx, HJ_ERR_INVALID_ARG, "cpu_jit_create: out is NULL");
  *out = NULL;
  pthread_once(&cj_once, cj_init_native);
  if (cj_native_failed)
    return hj__err(ctx, HJ_ERR_BACKEND, "LLVM: cannot initialise the native target");
  cpu_jit *j = calloc(1, sizeof *j);
  if (!j) return hj__err(ctx, HJ_ERR_OOM, "cpu_jit_create: out of memory");
  j->ctx = ctx;
  pthread_mutex_init(&j->opt_mu, NULL);
  pthread_mutex_init(&j->err_mu, NULL);
  pthread_mutex_init(&j->tm_mu, NULL);
  pthread_mutex_init(&j->name_mu, NULL);
  sh_new_arena(j->names);
  atomic_init(&j->counter, 0);
  char *def = LLVMGetDefaultTargetTriple();
  j->triple = LLVMNormalizeTargetTriple(def);
  LLVMDisposeMessage(def);
  j->cpu = LLVMGetHostCPUName();
  j->features = LLVMGetHostCPUFeatures();
  hj_status st = cj_build(j);
  if (st == HJ_OK)
    st = cpu_jit_add_symbols(j, cj_default_syms,
                             (int)(sizeof cj_default_syms / sizeof cj_default_syms[0]));
  if (st != HJ_OK) {
    cpu_jit_destroy(j);
    return st;
  }
  *out = j;
  return HJ_OK;
}

void cpu_jit_destroy(cpu_jit *j) {
  if (!j) return;
  if (j->jit) {
    LLVMErrorRef e = LLVMOrcDisposeLLJIT(j->jit);
    if (e) LLVMConsumeError(e); /* nothing useful to do with it while tearing down */
  }
  if (j->tm) LLVMDisposeTargetMachine(j->tm);
  for (ptrdiff_t i = 0; i < arrlen(j->free_tms); i++) LLVMDisposeTargetMachine(j->free_tms[i]);
  arrfree(j->free_tms);
  shfree(j->names);
  pthread_mutex_destroy(&j->tm_mu);
  pthread_mutex_destroy(&j->name_mu);
  LLVMDisposeMessage(j->triple);
  LLVMDisposeMessage(j->cpu);
  LLVMDisposeMessage(j->features);
  LLVMDisposeMessage(j->data_layout);
  pthread_mutex_destroy(&j->opt_mu);
  pthread_mutex_destroy(&j->err_mu);
  free(j);
}

const char *cpu_jit_triple(const cpu_jit *j) { return j->triple; }
const char *cpu_jit_cpu_name(const cpu_jit *j) { return j->cpu; }
const char *cpu_jit_cpu_features(const cpu_jit *j) { return j->features; }
const char *cpu_jit_data_layout(const cpu_jit *j) { return j->data_layout; }
LLVMTargetMachineRef cpu_jit_target_machine(const cpu_jit *j) { return j->tm; }

void cpu_jit_unique_name(cpu_jit *j, const char *prefix, char *buf, size_t n) {
  long k = atomic_fetch_add(&j->counter, 1);
  snprintf(buf, n, "%s.%ld", prefix, k);
}

void cpu_jit_kernel_name(cpu_jit *j, const char *base, char *buf, size_t n) {
  pthread_mutex_lock(&j->name_mu);
  snprintf(buf, n, "%s", base);
  for (long k = 1; shgeti(j->names, buf) >= 0; k++) snprintf(buf, n, "%s.%ld", base, k);
  shput(j->names, buf, 1);
  pthread_mutex_unlock(&j->name_mu);
}

/* ---- modules ----------------------------------------------------------------------------- */

hj_status cpu_jit_module_create(cpu_jit *j, const char *name, cpu_jit_module *m) {
  if (!m) return hj__err(j ? j->ctx : NULL, HJ_ERR_INVALID_ARG, "cpu_jit_module_create: m is NULL");
  memset(m, 0, sizeof *m);
  if (!j || !name)
    return hj__err(j ? j->ctx : NULL, HJ_ERR_INVALID_ARG, "cpu_jit_module_create: bad arguments");
  m->tsc = LLVMOrcCreateNewThreadSafeContext();
  m->llctx = LLVMOrcThreadSafeContextGetContext(m->tsc);
  m->mod = LLVMModuleCreateWithNameInContext(name, m->llctx);
  LLVMSetTarget(m->mod, j->triple);
  LLVMSetDataLayout(m->mod, j->data_layout);
  return HJ_OK;
}

void cpu_jit_module_dispose(cpu_jit_module *m) {
  if (!m) return;
  if (m->mod) LLVMDisposeModule(m->mod);       /* before its context */
  if (m->tsc) LLVMOrcDisposeThreadSafeContext(m->tsc);
  memset(m, 0, sizeof *m);
}

hj_status cpu_jit_add_module(cpu_jit *j, cpu_jit_module *m, cpu_jit_rt **rt) {
  if (rt) *rt = NULL;
  if (!j || !m || !m->mod || !m->tsc) {
    cpu_jit_module_dispose(m);
    return hj__err(j ? j->ctx : NULL, HJ_ERR_INVALID_ARG, "cpu_jit_add_module: bad arguments");
  }
  size_t len;
  const char *id = LLVMGetModuleIdentifier(m->mod, &len);
  char what[160];
  snprintf(what, sizeof what, "adding module '%.*s'", (int)(len < 100 ? len : 100), id);
  /* The TSM takes the module and a reference to the context; ours is dropped at once. */
  LLVMOrcThreadSafeModuleRef tsm = LLVMOrcCreateNewThreadSafeModule(m->mod, m->tsc);
  LLVMOrcDisposeThreadSafeContext(m->tsc);
  memset(m, 0, sizeof *m);
  LLVMErrorRef e;
  cj_clear_session_err(j);
  if (rt) {
    LLVMOrcResourceTrackerRef r = LLVMOrcJITDylibCreateResourceTracker(j->jd);
    e = LLVMOrcLLJITAddLLVMIRModuleWithRT(j->jit, r, tsm); /* consumes tsm */
    if (e) LLVMOrcReleaseResourceTracker(r);
    else *rt = r;
  } else {
    e = LLVMOrcLLJITAddLLVMIRModule(j->jit, j->jd, tsm);   /* consumes tsm */
  }
  return e ? cj_llvm_err(j, j->ctx, e, what) : HJ_OK;
}

hj_status cpu_jit_lookup(cpu_jit *j, const char *name, void **addr) {
  if (addr) *addr = NULL;
  if (!j || !name || !addr)
    return hj__err(j ? j->ctx : NULL, HJ_ERR_INVALID_ARG, "cpu_jit_lookup: bad arguments");
  LLVMOrcExecutorAddress a = 0;
  cj_clear_session_err(j);
  LLVMErrorRef e = LLVMOrcLLJITLookup(j->jit, &a, name);
  if (e) {
    char what[160];
    snprintf(what, sizeof what, "lookup of '%.100s'", name);
    return cj_llvm_err(j, j->ctx, e, what);
  }
  *addr = (void *)(uintptr_t)a;
  return HJ_OK;
}

hj_status cpu_jit_remove(cpu_jit *j, cpu_jit_rt *rt) {
  if (!rt) return HJ_OK;
  LLVMErrorRef e = LLVMOrcResourceTrackerRemove(rt);
  LLVMOrcReleaseResourceTracker(rt);
  return e ? cj_llvm_err(j, j ? j->ctx : NULL, e, "removing JIT code") : HJ_OK;
}

/* ---- optimisation and dumps -------------------------------------------------------------- */

/* The dump directory, or NULL when dumps are off. */
static const char *cj_dump_dir(const cpu_jit *j) {
  const char *d = j->ctx ? j->ctx->opt.dump_dir : NULL;
  if (!d || !*d) d = getenv("HLOJIT_DUMP_TO");
  return d && *d ? d : NULL;
}

/* Writes |mod| to DIR/ID.SUFFIX; the id keeps only [A-Za-z0-9._-] so it stays a file name.
   Errors go to |err| (the caller reports them: this may run on a compile thread). */
static hj_status cj_dump(cpu_jit *j, LLVMModuleRef mod, const char *suffix, char *err, size_t nerr) {
  const char *dir = cj_dump_dir(j);
  if (!dir) return HJ_OK;
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    snprintf(err, nerr, "dump: cannot create directory '%s': %s", dir, strerror(errno));
    return HJ_ERR_IO;
  }
  size_t len;
  const char *id = LLVMGetModuleIdentifier(mod, &len);
  char name[128];
  size_t n = 0;
  for (; n < len && n < sizeof name - 1; n++) {
    char c = id[n];
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '.' || c == '_' || c == '-';
    name[n] = ok ? c : '_';
  }
  name[n] = 0;
  char path[4096];
  snprintf(path, sizeof path, "%s/%s%s", dir, n ? name : "module", suffix);
  char *msg = NULL;
  if (LLVMPrintModuleToFile(mod, path, &msg)) {
    snprintf(err, nerr, "dump: cannot write '%s': %s", path, msg ? msg : "");
    LLVMDisposeMessage(msg);
    return HJ_ERR_IO;
  }
  return HJ_OK;
}

/* The pipeline every kernel module gets; $HLOJIT_LLVM_PIPELINE overrides it
   (LLVMRunPasses syntax), for measuring others. Why O3 (issue 9, GPT-2 124M, 12 layers,
   1 thread, thread CPU time of the forward, all pipelines giving the same bits): O2 costs
   the same to compile (O3 863 ms CPU, O2 882 for the prefill; 335 / 298 for a decode
   step) and runs the same (1.001, 1.03); O1 compiles in 665 / 284 ms but the prefill runs
   12% slower (compute-bound matmuls); O1 for everything but the matmul kernels
   ($HLOJIT_LLVM_PIPELINE_LIGHT, which also puts matmuls in modules of their own) saves
   12-18% of the CPU time and still costs the prefill 2.5-4%. Measured on a shared 2-core
   machine; the run-time ratios are the reliable part. */
#define CJ_PIPELINE "default<O3>"

static const char *cj_pipeline(void) {
  const char *e = getenv("HLOJIT_LLVM_PIPELINE");
  return e && *e ? e : CJ_PIPELINE;
}

/* The pipeline of the modules holding no matmul kernel (loop, reduction, transpose, dus):
   $HLOJIT_LLVM_PIPELINE_LIGHT, else the same as the others. */
static const char *cj_light_pipeline(void) {
  const char *e = getenv("HLOJIT_LLVM_PIPELINE_LIGHT");
  return e && *e ? e : cj_pipeline();
}

/* Verify, dump, optimise with |tm|, dump: the part of cpu_jit_optimize that touches no
   shared state but |j|'s immutable fields (so it may run on any thread with its own |tm|).
   Errors: status and message in |err|. */
static hj_status cj_optimize(cpu_jit *j, LLVMModuleRef mod, LLVMTargetMachineRef tm, const char *pipeline,
                             char *err, size_t nerr) {
  size_t len;
  const char *id = LLVMGetModuleIdentifier(mod, &len);
  hj_status st = cj_dump(j, mod, ".ll", err, nerr); /* before verifying: a broken module is worth seeing */
  if (st != HJ_OK) return st;
  char *msg = NULL;
  if (LLVMVerifyModule(mod, LLVMReturnStatusAction, &msg)) {
    int mlen = msg ? (int)strlen(msg) : 0;
    while (mlen > 0 && (msg[mlen - 1] == '\n' || msg[mlen - 1] == ' ')) mlen--;
    snprintf(err, nerr, "LLVM: module '%.*s' does not verify: %.*s", (int)(len < 100 ? len : 100), id,
             mlen, msg ? msg : "");
    LLVMDisposeMessage(msg);
    return HJ_ERR_BACKEND;
  }
  LLVMDisposeMessage(msg);
  LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
  LLVMPassBuilderOptionsSetLoopVectorization(po, 1);
  LLVMPassBuilderOptionsSetSLPVectorization(po, 1);
  LLVMPassBuilderOptionsSetLoopInterleaving(po, 1);
  LLVMPassBuilderOptionsSetLoopUnrolling(po, 1);
  LLVMErrorRef e = LLVMRunPasses(mod, pipeline, tm, po);
  LLVMDisposePassBuilderOptions(po);
  if (e) {
    char *m = LLVMGetErrorMessage(e);
    snprintf(err, nerr, "LLVM: optimising module '%.*s': %s", (int)(len < 100 ? len : 100), id, m ? m : "");
    LLVMDisposeErrorMessage(m);
    return HJ_ERR_BACKEND;
  }
  return cj_dump(j, mod, ".opt.ll", err, nerr);
}

hj_status cpu_jit_optimize(cpu_jit *j, LLVMModuleRef mod) {
  if (!j || !mod) return hj__err(j ? j->ctx : NULL, HJ_ERR_INVALID_ARG, "cpu_jit_optimize: bad arguments");
  char err[1024] = "";
  pthread_mutex_lock(&j->opt_mu);
  hj_status st = cj_optimize(j, mod, j->tm, cj_pipeline(), err, sizeof err);
  pthread_mutex_unlock(&j->opt_mu);
  return st == HJ_OK ? HJ_OK : hj__err(j->ctx, st, "%s", err);
}

/* ---- compiling on several threads ------------------------------------------------------------ */

static LLVMTargetMachineRef cj_tm_take(cpu_jit *j) {
  pthread_mutex_lock(&j->tm_mu);
  LLVMTargetMachineRef tm = arrlen(j->free_tms) ? arrpop(j->free_tms) : NULL;
  pthread_mutex_unlock(&j->tm_mu);
  return tm ? tm : cj_make_tm(j, j->target);
}

static void cj_tm_give(cpu_jit *j, LLVMTargetMachineRef tm) {
  pthread_mutex_lock(&j->tm_mu);
  arrput(j->free_tms, tm);
  pthread_mutex_unlock(&j->tm_mu);
}

hj_status cpu_jit_optimize_mt(cpu_jit *j, LLVMModuleRef mod, bool light, char *err, size_t nerr) {
  LLVMTargetMachineRef tm = cj_tm_take(j);
  if (!tm) {
    snprintf(err, nerr, "LLVM: cannot create a TargetMachine for %s (cpu %s)", j->triple, j->cpu);
    return HJ_ERR_BACKEND;
  }
  hj_status st = cj_optimize(j, mod, tm, light ? cj_light_pipeline() : cj_pipeline(), err, nerr);
  cj_tm_give(j, tm);
  return st;
}

hj_status cpu_jit_codegen_mt(cpu_jit *j, cpu_jit_module *m, LLVMMemoryBufferRef *obj, char *err,
                             size_t nerr) {
  *obj = NULL;
  LLVMTargetMachineRef tm = cj_tm_take(j);
  if (!tm) {
    snprintf(err, nerr, "LLVM: cannot create a TargetMachine for %s (cpu %s)", j->triple, j->cpu);
    cpu_jit_module_dispose(m);
    return HJ_ERR_BACKEND;
  }
  char *msg = NULL;
  LLVMBool bad = LLVMTargetMachineEmitToMemoryBuffer(tm, m->mod, LLVMObjectFile, &msg, obj);
  cj_tm_give(j, tm);
  hj_status st = HJ_OK;
  if (bad) {
    size_t len;
    const char *id = LLVMGetModuleIdentifier(m->mod, &len);
    snprintf(err, nerr, "LLVM: code generation for module '%.*s': %s", (int)(len < 100 ? len : 100), id,
             msg ? msg : "");
    *obj = NULL;
    st = HJ_ERR_BACKEND;
  }
  LLVMDisposeMessage(msg);
  cpu_jit_module_dispose(m);
  return st;
}

/* ---- object code (the code cache, cpu_code_cache.c) ------------------------------------------
   The optimised module compiled to a relocatable object by the host TargetMachine (the same
   triple, CPU, features, PIC and code model as the JIT's, so ORC links it like its own
   output), and an object file added to ORC. Codegen on the shared TargetMachine is
   serialised with the optimiser. */

hj_status cpu_jit_emit_object(cpu_jit *j, LLVMModuleRef mod, void **obj, size_t *n) {
  *obj = NULL;
  *n = 0;
  char *msg = NULL;
  LLVMMemoryBufferRef buf = NULL;
  pthread_mutex_lock(&j->opt_mu);
  LLVMBool bad = LLVMTargetMachineEmitToMemoryBuffer(j->tm, mod, LLVMObjectFile, &msg, &buf);
  pthread_mutex_unlock(&j->opt_mu);
  if (bad) {
    hj_status st = hj__err(j->ctx, HJ_ERR_BACKEND, "LLVM: emitting the object file: %s", msg ? msg : "(no message)");
    LLVMDisposeMessage(msg);
    return st;
  }
  size_t len = LLVMGetBufferSize(buf);
  void *p = malloc(len ? len : 1);
  if (p) memcpy(p, LLVMGetBufferStart(buf), len);
  LLVMDisposeMemoryBuffer(buf);
  if (!p) return hj__err(j->ctx, HJ_ERR_OOM, "LLVM: out of memory for a %zu-byte object", len);
  *obj = p;
  *n = len;
  return HJ_OK;
}

hj_status cpu_jit_add_object(cpu_jit *j, const void *obj, size_t n, const char *name, cpu_jit_rt **rt) {
  *rt = NULL;
  LLVMMemoryBufferRef buf = LLVMCreateMemoryBufferWithMemoryRangeCopy(obj, n, name);
  if (!buf) return hj__err(j->ctx, HJ_ERR_OOM, "LLVM: out of memory for a %zu-byte object", n);
  LLVMOrcResourceTrackerRef r = LLVMOrcJITDylibCreateResourceTracker(j->jd);
  cj_clear_session_err(j);
  LLVMErrorRef e = LLVMOrcLLJITAddObjectFileWithRT(j->jit, r, buf);   /* consumes buf */
  if (e) {
    LLVMOrcReleaseResourceTracker(r);
    char what[160];
    snprintf(what, sizeof what, "adding object '%.100s'", name);
    return cj_llvm_err(j, j->ctx, e, what);
  }
  *rt = r;
  return HJ_OK;
}

void cpu_jit_code_id(const cpu_jit *j, bool light, char *buf, size_t n) {
  unsigned ma = 0, mi = 0, pa = 0;
  LLVMGetVersion(&ma, &mi, &pa);
  snprintf(buf, n, "llvm %u.%u.%u; %s; %s; %s; pipeline %s", ma, mi, pa, j->triple, j->cpu,
           j->features, light ? cj_light_pipeline() : cj_pipeline());
}
