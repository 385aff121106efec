/* runtime/code_key.c — the key of an emitted LLVM module's machine code, for code caches
   (runtime.h, "code_key.c"; the CPU backend's cpu_code_cache.c and the CUDA backend's PTX
   cache, cuda_code_cache.c). LLVM-C core only: no target headers.

   The key is what determines the machine code: the emitted IR before optimisation, plus the
   target's identity string (CPU: LLVM version, triple, CPU name and features; CUDA: sm_XX,
   PTX ISA, LLVM version) and a format tag. Keying on the IR rather than on the HLO means that
   any change of the emitters (another hlojit) changes the key, so code made by another build
   is never loaded; and everything the runtime derives from emission (kernel kinds, ranges,
   matmul plans) is made in this process from the same IR, so it always matches the code.

   Names. The emitters name kernels from a per-JIT counter ("hjk.57"), which differs from
   process to process. So every defined function and global is renamed, in module order:
   first to neutral names ("f0", "g3") for the hash (the module identifier and source file
   name set to constants for it, then restored for dumps), then to "hj<digest>.f<i>" /
   "hj<digest>.g<i>" — unique in a JIT, since the digest is the content — and every kernel
   thunk's symbol and matmul-plan kernel name follows. Worked example: kernels hjk.3, hjk.4
   and shared micro-kernel hjs.2.ukr8_8x48 become f0, f1, f2 for the hash (IR digest d), then
   hj<k>.f0 .. hj<k>.f2 with k the digest of "hlojit code cache v1; ...; ir d". */
#include "runtime.h"
#include "../emitters/matmul_plan.h"
#include <stdlib.h>

typedef struct { char *key; char *value; } rck_name;   /* stb_ds string map: old -> new */

static bool rck_defined_fn(LLVMValueRef f) { return !LLVMIsDeclaration(f); }
static bool rck_defined_global(LLVMValueRef g) { return LLVMGetInitializer(g) != NULL; }

/* Renames every defined function ("PREFIX.f<i>") and global ("PREFIX.g<i>") in module order;
   |orig| (may be NULL) receives the functions' names before (strdup'd, module order). */
static void rck_rename(LLVMModuleRef mod, const char *prefix, char ***orig) {
  char name[160];
  int i = 0;
  for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f)) {
    if (!rck_defined_fn(f)) continue;
    snprintf(name, sizeof name, "%s%sf%d", prefix, *prefix ? "." : "", i++);
    if (orig) {
      size_t len;
      const char *old = LLVMGetValueName2(f, &len);
      arrput(*orig, strndup(old, len));
    }
    LLVMSetValueName2(f, name, strlen(name));
  }
  i = 0;
  for (LLVMValueRef g = LLVMGetFirstGlobal(mod); g; g = LLVMGetNextGlobal(g)) {
    if (!rck_defined_global(g)) continue;
    snprintf(name, sizeof name, "%s%sg%d", prefix, *prefix ? "." : "", i++);
    LLVMSetValueName2(g, name, strlen(name));
  }
}

/* |s| (a char array of |n|) through |map|; unchanged when absent. */
static void rck_apply(rck_name *map, char *s, size_t n) {
  if (!s[0]) return;
  char *v = shget(map, s);
  if (v) snprintf(s, n, "%s", v);
}

static void rck_rename_thunks(rt_exec *x, rck_name *map) {
  for (ptrdiff_t i = 0; x && i < arrlen(x->kernels); i++) {
    th_thunk *t = x->kernels[i];
    rck_apply(map, t->sym, sizeof t->sym);
    if (!t->matmul) continue;
    for (int u = 0; u < 2; u++) rck_apply(map, t->matmul->ukr_name[u], sizeof t->matmul->ukr_name[u]);
    rck_apply(map, t->matmul->gemv_name, sizeof t->matmul->gemv_name);
    rck_apply(map, t->matmul->epi_name, sizeof t->matmul->epi_name);
  }
}

/* The IR's hash, with neutral names when |rename| (module identifier and source name constant
   meanwhile); |orig| as rck_rename's. */
static void rck_ir_digest(LLVMModuleRef mod, bool rename, char ***orig, char out[33]) {
  size_t idlen;
  const char *id0 = LLVMGetModuleIdentifier(mod, &idlen);
  char *id = strndup(id0, idlen);
  if (rename) rck_rename(mod, "", orig);
  LLVMSetModuleIdentifier(mod, "hlojit", 6);
  LLVMSetSourceFileName(mod, "hlojit", 6);
  char *ir = LLVMPrintModuleToString(mod);
  rt_dcache_digest(ir, strlen(ir), out);
  LLVMDisposeMessage(ir);
  if (id) {
    LLVMSetModuleIdentifier(mod, id, idlen);
    LLVMSetSourceFileName(mod, id, idlen);
    free(id);
  }
}

/* The key material and its digest from the target and the IR's hash. */
static hj_status rck_key(hj_ctx_t *ctx, const char *target_id, const char *irh, rt_code_key *out) {
  char *k = NULL;
  sb_printf(&k, "hlojit code cache v1; hlojit %d.%d; %s; ir %s", HJ_VERSION_MAJOR, HJ_VERSION_MINOR, target_id, irh);
  out->len = (size_t)arrlen(k) - 1;
  out->key = malloc(out->len + 1);
  if (out->key) memcpy(out->key, k, out->len + 1);
  arrfree(k);
  if (!out->key) return hj__err(ctx, HJ_ERR_OOM, "code cache: out of memory");
  rt_dcache_digest(out->key, out->len, out->digest);
  return HJ_OK;
}

hj_status rt_code_key_make(hj_ctx_t *ctx, LLVMModuleRef mod, const char *target_id, rt_exec *x, rt_code_key *out) {
  memset(out, 0, sizeof *out);
  char **orig = NULL, irh[33], prefix[40], name[160];
  rck_ir_digest(mod, true, &orig, irh);
  hj_status st = rck_key(ctx, target_id, irh, out);
  if (st == HJ_OK) {
    snprintf(prefix, sizeof prefix, "hj%s", out->digest);
    rck_rename(mod, prefix, NULL);
    rck_name *map = NULL;   /* original -> final: the final names follow module order too */
    sh_new_strdup(map);
    for (ptrdiff_t i = 0; i < arrlen(orig); i++) {
      snprintf(name, sizeof name, "%s.f%d", prefix, (int)i);
      shput(map, orig[i], strdup(name));
    }
    rck_rename_thunks(x, map);
    for (ptrdiff_t i = 0; i < shlen(map); i++) free(map[i].value);
    shfree(map);
  }
  for (ptrdiff_t i = 0; i < arrlen(orig); i++) free(orig[i]);
  arrfree(orig);
  return st;
}

/* For modules whose names are already canonical (the same content has the same names in
   every process: the CUDA backend's per-module "hjk_0", ...): nothing is renamed. */
hj_status rt_code_key_make_named(hj_ctx_t *ctx, LLVMModuleRef mod, const char *target_id, rt_code_key *out) {
  memset(out, 0, sizeof *out);
  char irh[33];
  rck_ir_digest(mod, false, NULL, irh);
  return rck_key(ctx, target_id, irh, out);
}

void rt_code_key_free(rt_code_key *k) {
  if (!k) return;
  free(k->key);
  memset(k, 0, sizeof *k);
}
