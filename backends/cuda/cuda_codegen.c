/* cuda_codegen.c — NVPTX code generation through LLVM-C (cuda_codegen.h says what callers
   get): the target machine per arch, kernels and intrinsics, libdevice, O3 and PTX.

   Algorithm of cuda_compile_ptx(mod):
     1. libdevice, only if |mod| declares an __nv_* function: the bitcode file (read once per
        codegen, kept in memory) is opened lazily in |mod|'s context, given |mod|'s triple
        and data layout (or the linker warns), every definition made linkonce_odr — so the
        linker copies only what |mod| uses — and linked;
     2. verify; every defined function that is not a PTX kernel, and every defined global,
        becomes internal (libdevice's helpers and tables included);
     3. default<O3> with the NVPTX target machine: its pipeline-start callback adds
        NVVMReflect (which folds libdevice's __nvvm_reflect("__CUDA_FTZ"/"__CUDA_ARCH")
        tests) and inlining/GlobalDCE remove what is not reached from a kernel;
     4. the target machine writes PTX assembly into a memory buffer. */
#include "cuda_codegen.h"
#include "../../hlojit_impl/emitters/gpu_mm.h"   /* emit_gpu_intrinsic */
#include <llvm-c/Analysis.h>
#include <llvm-c/BitReader.h>
#include <llvm-c/Linker.h>
#include <llvm-c/Target.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define NVPTX_TRIPLE "nvptx64-nvidia-cuda"

static const struct { const char *name; const char *features; int ptx; } cg_arch[CUDA_ARCH_COUNT] = {
  [CUDA_SM_80] = { "sm_80", "+ptx70", 70 },
  [CUDA_SM_90A] = { "sm_90a", "+ptx80", 80 },
};

const char *cuda_arch_name(cuda_arch a) { return a < CUDA_ARCH_COUNT ? cg_arch[a].name : "?"; }
int cuda_arch_ptx_version(cuda_arch a) { return a < CUDA_ARCH_COUNT ? cg_arch[a].ptx : 0; }

hj_status cuda_arch_parse(const char *s, cuda_arch *out, cuda_error *e) {
  for (int a = 0; a < CUDA_ARCH_COUNT && s; a++)
    if (strcmp(s, cg_arch[a].name) == 0 || strcmp(s, cg_arch[a].name + 3) == 0) {
      *out = (cuda_arch)a;
      return HJ_OK;
    }
  return cuda_error_set(e, HJ_ERR_INVALID_ARG, "unknown CUDA arch '%s' (sm_80 or sm_90a)",
                        s ? s : "(null)");
}

hj_status cuda_arch_for_device(int major, int minor, cuda_arch *out, cuda_error *e) {
  if (major < 8)
    return cuda_error_set(e, HJ_ERR_UNSUPPORTED,
                          "compute capability %d.%d: hlojit needs 8.0 (Ampere) or newer",
                          major, minor);
  /* sm_90a code runs on 9.0 only; everything else gets the portable baseline */
  *out = major == 9 && minor == 0 ? CUDA_SM_90A : CUDA_SM_80;
  return HJ_OK;
}

struct cuda_codegen {
  cuda_arch arch;
  LLVMTargetMachineRef tm;
  char *layout;                 /* the data layout string */
  pthread_mutex_t lock;         /* O3 and emission */
  pthread_mutex_t lib_lock;     /* reading libdevice */
  bool libdevice_tried;
  char *libdevice;              /* the bitcode file, NULL when absent */
  size_t libdevice_len;
  char libdevice_path[1024];
  long long libdevice_mtime;
};

static pthread_once_t cg_init_once = PTHREAD_ONCE_INIT;
static void cg_init_targets(void) {
  LLVMInitializeNVPTXTargetInfo();
  LLVMInitializeNVPTXTarget();
  LLVMInitializeNVPTXTargetMC();
  LLVMInitializeNVPTXAsmPrinter();
}

hj_status cuda_codegen_create(cuda_arch arch, cuda_codegen **out, cuda_error *e) {
  *out = NULL;
  if (arch >= CUDA_ARCH_COUNT) return cuda_error_set(e, HJ_ERR_INVALID_ARG, "bad cuda_arch %d", arch);
  pthread_once(&cg_init_once, cg_init_targets);
  LLVMTargetRef target = NULL;
  char *msg = NULL;
  if (LLVMGetTargetFromTriple(NVPTX_TRIPLE, &target, &msg)) {
    hj_status st = cuda_error_set(e, HJ_ERR_UNSUPPORTED, "LLVM: no NVPTX target (%s)", msg ? msg : "?");
    LLVMDisposeMessage(msg);
    return st;
  }
  cuda_codegen *cg = calloc(1, sizeof *cg);
  if (!cg) return cuda_error_set(e, HJ_ERR_OOM, "cuda_codegen_create: out of host memory");
  cg->arch = arch;
  cg->tm = LLVMCreateTargetMachine(target, NVPTX_TRIPLE, cg_arch[arch].name, cg_arch[arch].features,
                                   LLVMCodeGenLevelAggressive, LLVMRelocDefault, LLVMCodeModelDefault);
  if (!cg->tm) {
    free(cg);
    return cuda_error_set(e, HJ_ERR_BACKEND, "LLVM: no NVPTX target machine for %s", cg_arch[arch].name);
  }
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(cg->tm);
  cg->layout = LLVMCopyStringRepOfTargetData(td);
  LLVMDisposeTargetData(td);
  pthread_mutex_init(&cg->lock, NULL);
  pthread_mutex_init(&cg->lib_lock, NULL);
  *out = cg;
  return HJ_OK;
}

void cuda_codegen_destroy(cuda_codegen *cg) {
  if (!cg) return;
  LLVMDisposeTargetMachine(cg->tm);
  LLVMDisposeMessage(cg->layout);
  free(cg->libdevice);
  pthread_mutex_destroy(&cg->lock);
  pthread_mutex_destroy(&cg->lib_lock);
  free(cg);
}

cuda_arch cuda_codegen_arch(const cuda_codegen *cg) { return cg->arch; }

void cuda_codegen_prepare_module(cuda_codegen *cg, LLVMModuleRef mod) {
  LLVMSetTarget(mod, NVPTX_TRIPLE);
  LLVMSetDataLayout(mod, cg->layout);
  LLVMContextRef c = LLVMGetModuleContext(mod);
  LLVMAddModuleFlag(mod, LLVMModuleFlagBehaviorOverride, "nvvm-reflect-ftz", 16,
                    LLVMValueAsMetadata(LLVMConstInt(LLVMInt32TypeInContext(c), 0, 0)));
}

LLVMValueRef cuda_intrinsic(LLVMModuleRef mod, const char *name, LLVMTypeRef *overloads, int n,
                            cuda_error *e) {
  emit_gpu_err ge = { 0 };
  LLVMValueRef f = emit_gpu_intrinsic(mod, name, overloads, n, &ge);
  if (!f) cuda_error_set(e, ge.status, "%s", ge.msg);
  return f;
}

/* ---- libdevice ------------------------------------------------------------------------------ */
static bool cg_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

bool cuda_libdevice_path(char *buf, size_t n) {
  const char *env = getenv("HLOJIT_LIBDEVICE"), *home = getenv("CUDA_HOME");
  if (env) {   /* when set, the only candidate: tests use it to hide libdevice */
    snprintf(buf, n, "%s", env);
    return cg_exists(buf);
  }
  if (home) {
    snprintf(buf, n, "%s/nvvm/libdevice/libdevice.10.bc", home);
    if (cg_exists(buf)) return true;
  }
  snprintf(buf, n, "/usr/local/cuda/nvvm/libdevice/libdevice.10.bc");
  return cg_exists(buf);
}

/* Reads the file into cg->libdevice, once (under cg->lib_lock). */
static void cg_read_libdevice(cuda_codegen *cg) {
  cg->libdevice_tried = true;
  if (!cuda_libdevice_path(cg->libdevice_path, sizeof cg->libdevice_path)) return;
  FILE *f = fopen(cg->libdevice_path, "rb");
  if (!f) return;
  long len = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
  char *p = len > 0 ? malloc((size_t)len) : NULL;
  struct stat sb;
  if (p && fseek(f, 0, SEEK_SET) == 0 && fread(p, 1, (size_t)len, f) == (size_t)len) {
    cg->libdevice = p;
    cg->libdevice_len = (size_t)len;
    cg->libdevice_mtime = fstat(fileno(f), &sb) == 0 ? (long long)sb.st_mtime : 0;
  } else {
    free(p);
  }
  fclose(f);
}

void cuda_codegen_code_id(cuda_codegen *cg, char *buf, size_t n) {
  unsigned ma = 0, mi = 0, pa = 0;
  LLVMGetVersion(&ma, &mi, &pa);
  pthread_mutex_lock(&cg->lib_lock);
  if (!cg->libdevice_tried) cg_read_libdevice(cg);
  if (cg->libdevice)
    snprintf(buf, n, "llvm %u.%u.%u; %s; %s; %s; O3; libdevice %s, %zu bytes, mtime %lld", ma, mi, pa,
             NVPTX_TRIPLE, cg_arch[cg->arch].name, cg_arch[cg->arch].features, cg->libdevice_path,
             cg->libdevice_len, cg->libdevice_mtime);
  else
    snprintf(buf, n, "llvm %u.%u.%u; %s; %s; %s; O3; no libdevice", ma, mi, pa, NVPTX_TRIPLE,
             cg_arch[cg->arch].name, cg_arch[cg->arch].features);
  pthread_mutex_unlock(&cg->lib_lock);
}

static bool cg_uses_libdevice(LLVMModuleRef mod, char *first, size_t n) {
  for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f)) {
    size_t len = 0;
    const char *name = LLVMGetValueName2(f, &len);
    if (LLVMIsDeclaration(f) && len > 5 && strncmp(name, "__nv_", 5) == 0) {
      snprintf(first, n, "%s", name);
      return true;
    }
  }
  return false;
}

hj_status cuda_link_libdevice(cuda_codegen *cg, LLVMModuleRef mod, cuda_error *e) {
  char first[128];
  if (!cg_uses_libdevice(mod, first, sizeof first)) return HJ_OK;
  pthread_mutex_lock(&cg->lib_lock);
  if (!cg->libdevice_tried) cg_read_libdevice(cg);
  pthread_mutex_unlock(&cg->lib_lock);
  if (!cg->libdevice)
    return cuda_error_set(e, HJ_ERR_UNSUPPORTED,
                          "kernel calls %s but libdevice.10.bc was not found ($HLOJIT_LIBDEVICE, "
                          "$CUDA_HOME/nvvm/libdevice, /usr/local/cuda/nvvm/libdevice)", first);
  LLVMContextRef c = LLVMGetModuleContext(mod);
  LLVMMemoryBufferRef buf =
      LLVMCreateMemoryBufferWithMemoryRange(cg->libdevice, cg->libdevice_len, "libdevice", 0);
  LLVMModuleRef lib = NULL;
  if (LLVMGetBitcodeModuleInContext2(c, buf, &lib)) {   /* |lib| owns |buf| from here */
    return cuda_error_set(e, HJ_ERR_BACKEND, "LLVM could not read %s", cg->libdevice_path);
  }
  LLVMSetTarget(lib, LLVMGetTarget(mod));
  LLVMSetDataLayout(lib, LLVMGetDataLayoutStr(mod));
  for (LLVMValueRef f = LLVMGetFirstFunction(lib); f; f = LLVMGetNextFunction(f))
    if (!LLVMIsDeclaration(f)) LLVMSetLinkage(f, LLVMLinkOnceODRLinkage);
  for (LLVMValueRef g = LLVMGetFirstGlobal(lib); g; g = LLVMGetNextGlobal(g))
    if (!LLVMIsDeclaration(g)) LLVMSetLinkage(g, LLVMLinkOnceODRLinkage);
  if (LLVMLinkModules2(mod, lib))   /* consumes |lib| */
    return cuda_error_set(e, HJ_ERR_BACKEND, "LLVM could not link %s", cg->libdevice_path);
  return HJ_OK;
}

/* ---- optimisation and emission --------------------------------------------------------------- */
static void cg_internalize(LLVMModuleRef mod) {
  for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f))
    if (!LLVMIsDeclaration(f) && LLVMGetFunctionCallConv(f) != LLVMPTXKernelCallConv) {
      LLVMSetLinkage(f, LLVMInternalLinkage);
      LLVMSetVisibility(f, LLVMDefaultVisibility);
    }
  for (LLVMValueRef g = LLVMGetFirstGlobal(mod); g; g = LLVMGetNextGlobal(g))
    if (!LLVMIsDeclaration(g)) {
      LLVMSetLinkage(g, LLVMInternalLinkage);
      LLVMSetVisibility(g, LLVMDefaultVisibility);
    }
}

hj_status cuda_optimize(cuda_codegen *cg, LLVMModuleRef mod, cuda_error *e) {
  char *msg = NULL;
  if (LLVMVerifyModule(mod, LLVMReturnStatusAction, &msg)) {
    hj_status st = cuda_error_set(e, HJ_ERR_BACKEND, "LLVM: module does not verify: %.1800s",
                                  msg ? msg : "?");
    LLVMDisposeMessage(msg);
    return st;
  }
  LLVMDisposeMessage(msg);
  cg_internalize(mod);
  LLVMPassBuilderOptionsRef opt = LLVMCreatePassBuilderOptions();
  LLVMPassBuilderOptionsSetLoopVectorization(opt, 1);
  LLVMPassBuilderOptionsSetSLPVectorization(opt, 1);
  pthread_mutex_lock(&cg->lock);
  LLVMErrorRef err = LLVMRunPasses(mod, "default<O3>", cg->tm, opt);
  pthread_mutex_unlock(&cg->lock);
  LLVMDisposePassBuilderOptions(opt);
  if (err) {
    char *m = LLVMGetErrorMessage(err);
    hj_status st = cuda_error_set(e, HJ_ERR_BACKEND, "LLVM: O3: %s", m);
    LLVMDisposeErrorMessage(m);
    return st;
  }
  return HJ_OK;
}

hj_status cuda_emit_ptx(cuda_codegen *cg, LLVMModuleRef mod, char **ptx, cuda_error *e) {
  *ptx = NULL;
  char *msg = NULL;
  LLVMMemoryBufferRef buf = NULL;
  pthread_mutex_lock(&cg->lock);
  LLVMBool bad = LLVMTargetMachineEmitToMemoryBuffer(cg->tm, mod, LLVMAssemblyFile, &msg, &buf);
  pthread_mutex_unlock(&cg->lock);
  if (bad) {
    hj_status st = cuda_error_set(e, HJ_ERR_BACKEND, "LLVM: NVPTX emission (%s): %s",
                                  cg_arch[cg->arch].name, msg ? msg : "?");
    LLVMDisposeMessage(msg);
    return st;
  }
  size_t n = LLVMGetBufferSize(buf);
  char *out = malloc(n + 1);
  if (out) {
    memcpy(out, LLVMGetBufferStart(buf), n);
    out[n] = 0;
  }
  LLVMDisposeMemoryBuffer(buf);
  if (!out) return cuda_error_set(e, HJ_ERR_OOM, "cuda_emit_ptx: out of host memory");
  *ptx = out;
  return HJ_OK;
}

hj_status cuda_compile_ptx(cuda_codegen *cg, LLVMModuleRef mod, char **ptx, cuda_error *e) {
  *ptx = NULL;
  hj_status st = cuda_link_libdevice(cg, mod, e);
  if (st == HJ_OK) st = cuda_optimize(cg, mod, e);
  if (st == HJ_OK) st = cuda_emit_ptx(cg, mod, ptx, e);
  return st;
}
