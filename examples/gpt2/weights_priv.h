/* weights_priv.h — what weights.c (mapping, views, llm.c) and safetensors.c share; not part
   of the example's API. */
#ifndef GPT2_WEIGHTS_PRIV_H
#define GPT2_WEIGHTS_PRIV_H

#include "weights.h"

/* Dimension limits of a config, so every size product fits in int64 with room to spare. */
#define GPT2_MAX_DIM (1 << 24) /* maxT, V, Vp */
#define GPT2_MAX_C (1 << 16)
#define GPT2_MAX_L 4096

struct gpt2_weights_priv {
  void *map;     /* the read-only mapping of the file */
  size_t size;
  void **copies; /* malloc'd copies of misaligned tensors */
  int n_copies;
};

/* Maps |path| read-only (reads it into the heap under ASan; see weights.c); fails on a
   missing, empty or non-regular file. gpt2_w_unmap releases it. */
int gpt2_w_map(const char *path, void **map, size_t *size, gpt2_err *err);
void gpt2_w_unmap(void *map, size_t size);

/* A zeroed gpt2_weights with |L| layers that owns |map| (unmapped by gpt2_weights_free,
   also when this fails). */
int gpt2_w_new(int L, void *map, size_t size, gpt2_weights **out, gpt2_err *err);

/* Checks the dims of |c| (positive, within the limits above, C divisible by NH, Vp >= V);
   |names| are the fields' names in the file, for maxT, V, Vp, L, NH, C in that order. */
int gpt2_w_check_config(const gpt2_config *c, const char *path,
                        const char *const names[6], gpt2_err *err);

/* Fills |t| with a view of |data| (copied if misaligned for |dt|). |d1| < 0: a vector. */
int gpt2_w_view(gpt2_weights *w, gpt2_tensor *t, const char *name, const void *data,
                gpt2_dtype dt, int64_t d0, int64_t d1, gpt2_layout layout, const char *path,
                gpt2_err *err);

#endif
