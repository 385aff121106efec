/* backend.h — the backend table (DESIGN.md section 6; after ggml-backend-impl.h).

   A backend is one hlo_backend, filled with designated initialisers in its own file under
   backends/ and listed once in backends/backends.c. The API (api/exec.c) dispatches only
   through this table and names no backend's functions; a backend, in turn, reaches the
   compiler through runtime/runtime.h (the compile driver) and knows nothing of the API.

   HJ_BACKEND_AUTO walks hlo_backends in its order (cuda, cpu, then interp) and takes the
   first whose per-context state can be made and whose compile succeeds; each skipped
   backend's reason is kept in the executable's hj_exec_stats().note.

   Buffers are host pointers: run() receives the flattened leaves of the entry's parameters
   and results (tuples depth first), as the caller's hj_buffer_t data. The API guarantees
   that no output aliases an input or another output (it computes into a temporary when the
   caller passes such buffers), except the pairs of the module's input_output_alias
   (hlo_alias_flat): for those out[k] == in[i], the same memory, and the backend must
   compute the output in it correctly (buffer assignment plans that: runtime.h); and that
   runs of one executable do not overlap. */
#ifndef HLOJIT_BACKEND_H
#define HLOJIT_BACKEND_H

#include "ir/ir.h"

typedef struct hlo_backend {
  const char *name;                    /* "cpu", "interp": messages */
  hj_backend_t kind;
  /* Optional (NULL: the backend keeps no per-context state). Makes the state the first
     time a context compiles for this backend; a failure means the backend cannot run here
     (LLVM cannot start, no CUDA device), with the reason in the context. */
  hj_status (*ctx_create)(hj_ctx_t *ctx, void **state);
  void (*ctx_destroy)(hj_ctx_t *ctx, void *state);     /* optional, with ctx_create */
  /* Compiles |m| into *exec; |m| is the caller's and is not kept. */
  hj_status (*compile)(hj_ctx_t *ctx, void *state, const hlo_module *m, void **exec);
  hj_status (*run)(void *exec, void *const *in, int nin, void *const *out, int nout);
  /* Optional: what the compiler made (kernel counts, times); zeroed when NULL. */
  void (*stats)(const void *exec, hj_exec_stats_t *s);
  void (*exec_free)(void *exec);       /* NULL is fine */
  /* Optional, all three or none (issue 10): per-thunk run times. set_profiling turns the
     timing of later runs on or off; profile appends one entry per thunk (names pointing
     into the executable) to the stb_ds array *out; profile_reset zeroes the counts. Without
     them the API times whole runs only. */
  void (*set_profiling)(void *exec, bool on);
  hj_status (*profile)(const void *exec, hj_profile_entry_t **out);
  void (*profile_reset)(void *exec);
  /* Optional: the code |m| compiles to, as text, made without running anything and without
     a device (CUDA: the PTX of every kernel for |target| "sm_80" / "sm_90a"; NULL: the
     backend's default). *text is malloc'd. hj_module_to_ptx uses it. */
  hj_status (*code_text)(hj_ctx_t *ctx, const hlo_module *m, const char *target, char **text);
  /* Optional: buffer storage the backend's kernels can use directly (CUDA: managed memory,
     readable by the host through the same pointer). buffer_alloc makes |bytes| (16-byte
     aligned at least); buffer_free takes it back; buffer_host runs before the host reads or
     writes it through hj_buffer_host_ptr (CUDA: prefetch to the host). The API uses them
     for the buffers of a context whose backend has them (api.c). */
  hj_status (*buffer_alloc)(hj_ctx_t *ctx, void *state, size_t bytes, void **out);
  void (*buffer_free)(hj_ctx_t *ctx, void *state, void *p);
  void (*buffer_host)(hj_ctx_t *ctx, void *state, void *p, size_t bytes);
  /* Optional: the panel order (hj_linear_panels) in which the backend's matmul reads an
     (in, out) weight in place: *kc divides |in|, *nr |out|; HJ_ERR_UNSUPPORTED with a
     message when there is none for this shape. NULL: no panel order. */
  hj_status (*linear_panels)(hj_ctx_t *ctx, void *state, int64_t in, int64_t out, int64_t *kc,
                             int64_t *nr);
} hlo_backend;

/* backends/backends.c: every backend built in, in the order AUTO tries them, NULL last. */
extern const hlo_backend *const hlo_backends[];
/* The backend of |kind| (HJ_BACKEND_AUTO: none), NULL when it is not built in. */
const hlo_backend *hlo_backend_find(hj_backend_t kind);

#endif /* HLOJIT_BACKEND_H */
