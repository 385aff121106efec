/* gpt2_err.h — the error record filled in by the GPT-2 example's tokenizer and weight
   loaders (bpe.h, weights.h).

   Every fallible function of those headers returns 0 on success and -1 on failure, and on
   failure writes one line into |err| (when |err| is not NULL) naming the file and what is
   wrong with it, e.g.
       "vocab.bpe: line 7: merge 'Ġ t' makes 'Ġt', which is not in encoder.json".
   The record is a plain buffer so the example code needs nothing from hlojit. */
#ifndef GPT2_ERR_H
#define GPT2_ERR_H

#include <stdarg.h>
#include <stdio.h>

typedef struct gpt2_err {
  char msg[768];
} gpt2_err;

/* Formats the message into |err| (if not NULL) and returns -1, so a failing path can be
   written `return gpt2_errf(err, "...", ...);`. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static inline int gpt2_errf(gpt2_err *err, const char *fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
  }
  return -1;
}

#endif
