/* gpt2_wcheck.c — loads a GPT-2 checkpoint (weights.h) and describes it; the loader tests
   (tests/gpt2/test_weights.py) drive it, and it tells a person what a file holds.

     gpt2_wcheck FILE [--config CONFIG_JSON] [--dump OUT]
   prints
     format llmc|safetensors maxT=.. V=.. Vp=.. L=.. NH=.. C=.. copied=N
     tensor NAME DTYPE LAYOUT D0[xD1] mapped|copied
   one line per tensor in gpt2_weights_get's order; --dump writes every tensor's bytes, as
   stored, back to back in that order. Exit status 0, or 1 with the loader's message. */
#include <stdlib.h>
#include <string.h>

#include "weights_priv.h"

int main(int argc, char **argv) {
  const char *path = NULL, *config = NULL, *dump = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--config") && i + 1 < argc) config = argv[++i];
    else if (!strcmp(argv[i], "--dump") && i + 1 < argc) dump = argv[++i];
    else if (!path && argv[i][0] != '-') path = argv[i];
    else {
      fprintf(stderr, "usage: gpt2_wcheck FILE [--config CONFIG_JSON] [--dump OUT]\n");
      return 2;
    }
  }
  if (!path) {
    fprintf(stderr, "usage: gpt2_wcheck FILE [--config CONFIG_JSON] [--dump OUT]\n");
    return 2;
  }
  gpt2_weights *w;
  gpt2_err err;
  int rc = config ? gpt2_weights_load_safetensors(path, config, &w, &err)
                  : gpt2_weights_load(path, &w, &err);
  if (rc) {
    fprintf(stderr, "gpt2_wcheck: %s\n", err.msg);
    return 1;
  }
  const gpt2_config *c = &w->cfg;
  printf("format %s maxT=%d V=%d Vp=%d L=%d NH=%d C=%d copied=%d\n",
         w->format == GPT2_FORMAT_LLMC ? "llmc" : "safetensors", c->max_T, c->V, c->Vp, c->L,
         c->NH, c->C, w->n_copied);
  static const char *const lay[] = {"vector", "rows", "out_in", "in_out", "panels"};
  FILE *f = dump ? fopen(dump, "wb") : NULL;
  if (dump && !f) {
    fprintf(stderr, "gpt2_wcheck: cannot write %s\n", dump);
    gpt2_weights_free(w);
    return 1;
  }
  const char *lo = w->priv->map, *hi = lo + w->priv->size;
  for (int i = 0; i < gpt2_weights_count(w); i++) {
    const gpt2_tensor *t = gpt2_weights_get(w, i);
    size_t bytes = (size_t)t->shape[0] * (size_t)(t->ndim == 2 ? t->shape[1] : 1) *
                   gpt2_dtype_size(t->dtype);
    const char *d = t->data;
    int mapped = d >= lo && d + bytes <= hi;
    printf("tensor %s %s %s %lld", t->name, t->dtype == GPT2_F32 ? "f32" : "bf16",
           lay[t->layout], (long long)t->shape[0]);
    if (t->ndim == 2) printf("x%lld", (long long)t->shape[1]);
    printf(" %s\n", mapped ? "mapped" : "copied");
    if (f && fwrite(d, 1, bytes, f) != bytes) {
      fprintf(stderr, "gpt2_wcheck: short write to %s\n", dump);
      rc = 1;
      break;
    }
  }
  if (f) fclose(f);
  gpt2_weights_free(w);
  return rc;
}
