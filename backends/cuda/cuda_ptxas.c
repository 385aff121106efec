/* cuda_ptxas.c — runs NVIDIA's ptxas on PTX text, for tests: the PTX we generate must
   assemble for its target, and `ptxas -v` says what each kernel costs (registers, spills,
   shared memory), which structural tests check. Not used at run time (the driver JITs PTX
   itself, cuModuleLoadData).

   Algorithm: find the program ($HLOJIT_PTXAS, $CUDA_HOME/bin/ptxas, /usr/local/cuda/bin/
   ptxas — not PATH, so results do not depend on the caller's shell); write the PTX to a
   temporary file; posix_spawn `ptxas -arch=ARCH -v -o /dev/null FILE` with stdout and
   stderr into a second temporary file; wait; read the log back and parse -v's lines:
     ptxas info    : Compiling entry function 'k' for 'sm_80'
         0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
     ptxas info    : Used 94 registers, used 1 barriers, 16896 bytes smem, 380 bytes cmem[0]
   Invariants: SKIPPED only when there is no ptxas; FAILED for any non-zero exit (or a
   failure to run it, with the reason in the log). */
#define _GNU_SOURCE
#include "cuda_codegen.h"
#include <errno.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static bool px_find(char *buf, size_t n) {
  const char *env = getenv("HLOJIT_PTXAS"), *home = getenv("CUDA_HOME");
  struct stat st;
  if (env) {
    snprintf(buf, n, "%s", env);
    return stat(buf, &st) == 0;
  }
  if (home) {
    snprintf(buf, n, "%s/bin/ptxas", home);
    if (stat(buf, &st) == 0) return true;
  }
  snprintf(buf, n, "/usr/local/cuda/bin/ptxas");
  return stat(buf, &st) == 0;
}

static void px_parse(cuda_ptxas_info *info) {
  cuda_ptxas_kernel *k = NULL;
  for (char *line = info->log; line && *line;) {
    char *nl = strchr(line, '\n');
    if (nl) *nl = 0;
    char *p;
    if ((p = strstr(line, "Compiling entry function '")) && info->nkernels < 32) {
      k = &info->kernels[info->nkernels++];
      memset(k, 0, sizeof *k);
      p += strlen("Compiling entry function '");
      size_t len = strcspn(p, "'");
      snprintf(k->name, sizeof k->name, "%.*s", (int)(len < 127 ? len : 127), p);
    } else if (k && strstr(line, "bytes stack frame")) {
      sscanf(line, " %d bytes stack frame, %d bytes spill stores, %d bytes spill loads",
             &k->stack_bytes, &k->spill_stores, &k->spill_loads);
    } else if (k && (p = strstr(line, "Used "))) {
      k->registers = atoi(p + 5);
      char *s = strstr(line, "bytes smem");
      if (s) {
        while (s > line && s[-1] == ' ') s--;
        while (s > line && s[-1] >= '0' && s[-1] <= '9') s--;
        k->shared_bytes = atoi(s);
      }
    }
    if (nl) *nl = '\n';
    line = nl ? nl + 1 : NULL;
  }
}

cuda_ptxas_result cuda_ptxas(const char *ptx, const char *arch, cuda_ptxas_info *info) {
  memset(info, 0, sizeof *info);
  if (!px_find(info->ptxas, sizeof info->ptxas)) {
    char tried[sizeof info->ptxas];
    snprintf(tried, sizeof tried, "%s", info->ptxas);
    snprintf(info->ptxas, sizeof info->ptxas, "no ptxas (tried %.400s)", tried);
    return CUDA_PTXAS_SKIPPED;
  }
  const char *tmp = getenv("TMPDIR");
  char src[512], logf[512];
  snprintf(src, sizeof src, "%s/hlojit-XXXXXX.ptx", tmp ? tmp : "/tmp");
  snprintf(logf, sizeof logf, "%s/hlojit-XXXXXX.log", tmp ? tmp : "/tmp");
  int fd = mkstemps(src, 4), lfd = fd >= 0 ? mkstemps(logf, 4) : -1;
  cuda_ptxas_result res = CUDA_PTXAS_FAILED;
  if (fd < 0 || lfd < 0) {
    snprintf(info->log, sizeof info->log, "cuda_ptxas: cannot make temporary files in %s",
             tmp ? tmp : "/tmp");
    goto out;
  }
  size_t len = strlen(ptx);
  if (write(fd, ptx, len) != (ssize_t)len) {
    snprintf(info->log, sizeof info->log, "cuda_ptxas: cannot write %s", src);
    goto out;
  }
  char archarg[64];
  snprintf(archarg, sizeof archarg, "-arch=%s", arch);
  char *argv[] = { info->ptxas, archarg, "-v", "-o", "/dev/null", src, NULL };
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, lfd, 1);
  posix_spawn_file_actions_adddup2(&fa, lfd, 2);
  pid_t pid;
  int rc = posix_spawn(&pid, info->ptxas, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    snprintf(info->log, sizeof info->log, "cuda_ptxas: cannot run %.400s: %s", info->ptxas,
             strerror(rc));
    goto out;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  ssize_t got = pread(lfd, info->log, sizeof info->log - 1, 0);
  info->log[got > 0 ? got : 0] = 0;
  px_parse(info);
  res = WIFEXITED(status) && WEXITSTATUS(status) == 0 ? CUDA_PTXAS_OK : CUDA_PTXAS_FAILED;
out:
  if (fd >= 0) { close(fd); unlink(src); }
  if (lfd >= 0) { close(lfd); unlink(logf); }
  return res;
}
