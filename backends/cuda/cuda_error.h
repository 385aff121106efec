/* cuda_error.h — how the CUDA backend's lower layers (driver loader, NVPTX code generation,
   ptxas) report failure: an hj_status plus a message in a caller-owned buffer, so they need
   no hj_ctx and know nothing of the library's internals. The backend copies the message
   into the context where it calls them: hj__err(ctx, e.status, "%s", e.msg).

   Invariants: a function taking a cuda_error * either returns HJ_OK and leaves it alone, or
   returns e->status (never HJ_OK) with e->msg set. |e| may be NULL: the status alone. */
#ifndef HLOJIT_CUDA_ERROR_H
#define HLOJIT_CUDA_ERROR_H

#include "../../hlojit.h"
#include <stdarg.h>
#include <stdio.h>

typedef struct cuda_error {
  hj_status status;
  char msg[2048];
} cuda_error;

static inline hj_status cuda_error_vset(cuda_error *e, hj_status s, const char *fmt, va_list ap) {
  if (e) {
    e->status = s;
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
  }
  return s;
}

static inline hj_status cuda_error_set(cuda_error *e, hj_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline hj_status cuda_error_set(cuda_error *e, hj_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  cuda_error_vset(e, s, fmt, ap);
  va_end(ap);
  return s;
}

#endif /* HLOJIT_CUDA_ERROR_H */
