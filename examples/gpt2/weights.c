/* weights.c — GPT-2 checkpoints: the llm.c loader, the mapping and tensor views both
   formats use, the format dispatch, iteration and freeing (see weights.h for the formats).

   Invariants: a view's bytes lie inside the mapping (or in an owned copy); every size is
   computed in int64 from dims bounded by weights_priv.h's limits, so no product overflows;
   the llm.c file's length is compared with what its header implies before any view is
   made, which is what keeps every later pointer in range. */
#define _DEFAULT_SOURCE /* MAP_PRIVATE and friends under -std=c11 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "weights_priv.h"

#define LLMC_MAGIC 20240326
#define LLMC_HEADER_BYTES 1024

static int host_is_little_endian(void) {
  const uint16_t one = 1;
  return *(const unsigned char *)&one == 1;
}

/* Under AddressSanitizer the file is read into a heap block of exactly its size instead of
   mapped: ASan puts a redzone after heap blocks but none after a mapping's last page, so
   this is what lets the tests catch a read past the end of the file. */
#if defined(__SANITIZE_ADDRESS__)
#define GPT2_W_HEAP 1
#else
#define GPT2_W_HEAP 0
#endif

void gpt2_w_unmap(void *map, size_t size) {
  if (!map) return;
  if (GPT2_W_HEAP) free(map);
  else munmap(map, size);
}

static int read_whole(int fd, size_t n, void **out, const char *path, gpt2_err *err) {
  char *p = malloc(n);
  if (!p) return gpt2_errf(err, "%s: out of memory for %zu bytes", path, n);
  for (size_t at = 0; at < n;) {
    ssize_t got = read(fd, p + at, n - at);
    if (got <= 0) {
      free(p);
      return gpt2_errf(err, "%s: read error: %s", path, got ? strerror(errno) : "short read");
    }
    at += (size_t)got;
  }
  *out = p;
  return 0;
}

int gpt2_w_map(const char *path, void **map, size_t *size, gpt2_err *err) {
  *map = NULL;
  *size = 0;
  if (!host_is_little_endian())
    return gpt2_errf(err, "%s: checkpoints are little-endian; this host is not", path);
  int fd = open(path, O_RDONLY);
  if (fd < 0) return gpt2_errf(err, "%s: cannot open: %s", path, strerror(errno));
  struct stat st;
  int rc = -1;
  if (fstat(fd, &st) != 0) {
    gpt2_errf(err, "%s: cannot stat: %s", path, strerror(errno));
  } else if (!S_ISREG(st.st_mode)) {
    gpt2_errf(err, "%s: not a regular file", path);
  } else if (st.st_size == 0) {
    gpt2_errf(err, "%s: empty file (0 bytes: not even a header)", path);
  } else if (GPT2_W_HEAP) {
    if (read_whole(fd, (size_t)st.st_size, map, path, err) == 0) {
      *size = (size_t)st.st_size;
      rc = 0;
    }
  } else {
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      gpt2_errf(err, "%s: cannot map %lld bytes: %s", path, (long long)st.st_size,
                strerror(errno));
    } else {
      *map = p;
      *size = (size_t)st.st_size;
      rc = 0;
    }
  }
  close(fd);
  return rc;
}

int gpt2_w_new(int L, void *map, size_t size, gpt2_weights **out, gpt2_err *err) {
  *out = NULL;
  gpt2_weights *w = calloc(1, sizeof *w);
  struct gpt2_weights_priv *p = calloc(1, sizeof *p);
  gpt2_layer *layer = calloc((size_t)L, sizeof *layer);
  if (!w || !p || !layer) {
    free(w);
    free(p);
    free(layer);
    gpt2_w_unmap(map, size);
    return gpt2_errf(err, "out of memory for %d layers", L);
  }
  p->map = map;
  p->size = size;
  w->priv = p;
  w->release = gpt2_weights_release;
  w->layer = layer;
  w->cfg.L = L;
  *out = w;
  return 0;
}

void gpt2_weights_free(gpt2_weights *w) {
  if (!w) return;
  if (w->priv) {
    for (int i = 0; i < w->priv->n_copies; i++) free(w->priv->copies[i]);
    free(w->priv->copies);
    gpt2_w_unmap(w->priv->map, w->priv->size);
    free(w->priv);
  }
  free(w->layer);
  free(w);
}

int gpt2_w_check_config(const gpt2_config *c, const char *path,
                        const char *const names[6], gpt2_err *err) {
  const int v[6] = {c->max_T, c->V, c->Vp, c->L, c->NH, c->C};
  const int max[6] = {GPT2_MAX_DIM, GPT2_MAX_DIM, GPT2_MAX_DIM, GPT2_MAX_L, GPT2_MAX_C,
                      GPT2_MAX_C};
  for (int i = 0; i < 6; i++)
    if (v[i] <= 0 || v[i] > max[i])
      return gpt2_errf(err, "%s: %s = %d is outside 1..%d", path, names[i], v[i], max[i]);
  if (c->C % c->NH)
    return gpt2_errf(err, "%s: %s = %d is not divisible by %s = %d", path, names[5], c->C,
                     names[4], c->NH);
  if (c->Vp < c->V)
    return gpt2_errf(err, "%s: %s = %d is less than %s = %d", path, names[2], c->Vp,
                     names[1], c->V);
  return 0;
}

int gpt2_w_view(gpt2_weights *w, gpt2_tensor *t, const char *name, const void *data,
                gpt2_dtype dt, int64_t d0, int64_t d1, gpt2_layout layout, const char *path,
                gpt2_err *err) {
  memset(t, 0, sizeof *t);
  snprintf(t->name, sizeof t->name, "%s", name);
  t->dtype = dt;
  t->ndim = d1 < 0 ? 1 : 2;
  t->shape[0] = d0;
  t->shape[1] = d1 < 0 ? 0 : d1;
  t->layout = layout;
  t->data = data;
  size_t es = gpt2_dtype_size(dt);
  if ((uintptr_t)data % es == 0) return 0;
  /* Misaligned in the file: one aligned copy, so the model can read it as float/uint16. */
  size_t bytes = (size_t)d0 * (size_t)(d1 < 0 ? 1 : d1) * es;
  struct gpt2_weights_priv *p = w->priv;
  void **cs = realloc(p->copies, (size_t)(p->n_copies + 1) * sizeof *cs);
  if (!cs) return gpt2_errf(err, "%s: out of memory", path);
  p->copies = cs;
  void *c = malloc(bytes ? bytes : 1);
  if (!c) return gpt2_errf(err, "%s: out of memory copying tensor %s", path, name);
  memcpy(c, data, bytes);
  p->copies[p->n_copies++] = c;
  t->data = c;
  w->n_copied++;
  return 0;
}

/* ---- llm.c ------------------------------------------------------------------------ */

/* The 16 parameter kinds in file order: the 12 per-layer ones are gpt2_layer's fields. */
enum { K_WTE, K_WPE, K_LAYER0, K_LNFW = K_LAYER0 + 12, K_LNFB, K_COUNT };
static const size_t k_layer_field[12] = {
    offsetof(gpt2_layer, ln1w),     offsetof(gpt2_layer, ln1b),
    offsetof(gpt2_layer, qkvw),     offsetof(gpt2_layer, qkvb),
    offsetof(gpt2_layer, attprojw), offsetof(gpt2_layer, attprojb),
    offsetof(gpt2_layer, ln2w),     offsetof(gpt2_layer, ln2b),
    offsetof(gpt2_layer, fcw),      offsetof(gpt2_layer, fcb),
    offsetof(gpt2_layer, fcprojw),  offsetof(gpt2_layer, fcprojb),
};
static const char *const k_llmc_name[K_COUNT] = {
    "wte",  "wpe",  "ln1w", "ln1b", "qkvw",    "qkvb",    "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw",  "fcb",  "fcprojw", "fcprojb", "lnfw",     "lnfb"};

static gpt2_tensor *layer_tensor(gpt2_layer *l, int k) {
  return (gpt2_tensor *)((char *)l + k_layer_field[k]);
}

int gpt2_weights_load_llmc(const char *path, gpt2_weights **out, gpt2_err *err) {
  *out = NULL;
  void *map;
  size_t size;
  if (gpt2_w_map(path, &map, &size, err)) return -1;
  if (size < LLMC_HEADER_BYTES) {
    gpt2_w_unmap(map, size);
    return gpt2_errf(err, "%s: %zu bytes, shorter than llm.c's %d-byte header (truncated?)",
                     path, size, LLMC_HEADER_BYTES);
  }
  int32_t h[8]; /* copied out: the messages below outlive the mapping */
  memcpy(h, map, sizeof h);
  gpt2_config c = {.max_T = h[2], .V = h[3], .L = h[4], .NH = h[5], .C = h[6], .Vp = h[7]};
  if (h[0] != LLMC_MAGIC || (h[1] != 3 && h[1] != 5)) {
    gpt2_w_unmap(map, size);
    if (h[0] != LLMC_MAGIC)
      return gpt2_errf(err, "%s: bad magic %d in header int 0 (an llm.c checkpoint starts "
                       "with %d)", path, (int)h[0], LLMC_MAGIC);
    return gpt2_errf(err, "%s: unknown version %d in header int 1 (3: f32, 5: bf16)", path,
                     (int)h[1]);
  }
  gpt2_dtype dt = h[1] == 3 ? GPT2_F32 : GPT2_BF16;
  static const char *const names[6] = {"header int 2 (maxT)", "header int 3 (V)",
                                       "header int 7 (Vp)",   "header int 4 (L)",
                                       "header int 5 (NH)",   "header int 6 (C)"};
  if (gpt2_w_check_config(&c, path, names, err)) {
    gpt2_w_unmap(map, size);
    return -1;
  }
  int64_t L = c.L, C = c.C;
  /* Per kind: elements of one layer's tensor (the whole tensor for wte, wpe, lnf) and its
     2-D shape (d1 < 0: a vector). */
  const int64_t dims[K_COUNT][2] = {
      {c.Vp, C}, {c.max_T, C}, {C, -1}, {C, -1}, {3 * C, C}, {3 * C, -1}, {C, C}, {C, -1},
      {C, -1},   {C, -1},      {4 * C, C}, {4 * C, -1}, {C, 4 * C}, {C, -1}, {C, -1}, {C, -1}};
  int64_t elems = 0;
  for (int k = 0; k < K_COUNT; k++) {
    int64_t n = dims[k][0] * (dims[k][1] < 0 ? 1 : dims[k][1]);
    elems += (k >= K_LAYER0 && k < K_LNFW) ? L * n : n;
  }
  int64_t need = LLMC_HEADER_BYTES + elems * (int64_t)gpt2_dtype_size(dt);
  if ((int64_t)size != need) {
    gpt2_w_unmap(map, size);
    return gpt2_errf(err, "%s: %zu bytes, but its header (version %d, maxT=%d V=%d Vp=%d L=%d "
                     "NH=%d C=%d) implies %lld%s", path, size, (int)h[1], c.max_T, c.V, c.Vp,
                     c.L, c.NH, c.C, (long long)need,
                     (int64_t)size < need ? " (truncated?)" : " (trailing bytes)");
  }
  gpt2_weights *w;
  if (gpt2_w_new(c.L, map, size, &w, err)) return -1;
  w->cfg = c;
  w->format = GPT2_FORMAT_LLMC;
  const char *p = (const char *)map + LLMC_HEADER_BYTES;
  size_t es = gpt2_dtype_size(dt);
  int rc = 0;
  for (int k = 0; k < K_COUNT && rc == 0; k++) {
    int64_t d0 = dims[k][0], d1 = dims[k][1];
    size_t bytes = (size_t)(d0 * (d1 < 0 ? 1 : d1)) * es;
    gpt2_layout lay = d1 < 0 ? GPT2_VECTOR : k <= K_WPE ? GPT2_ROWS : GPT2_OUT_IN;
    if (k >= K_LAYER0 && k < K_LNFW) {
      for (int l = 0; l < c.L && rc == 0; l++) {
        char name[32];
        snprintf(name, sizeof name, "%s[%d]", k_llmc_name[k], l);
        rc = gpt2_w_view(w, layer_tensor(&w->layer[l], k - K_LAYER0), name, p, dt, d0, d1,
                         lay, path, err);
        p += bytes;
      }
    } else {
      gpt2_tensor *t = k == K_WTE ? &w->wte : k == K_WPE ? &w->wpe : k == K_LNFW ? &w->lnfw
                                                                                : &w->lnfb;
      rc = gpt2_w_view(w, t, k_llmc_name[k], p, dt, d0, d1, lay, path, err);
      p += bytes;
    }
  }
  if (rc) {
    gpt2_weights_free(w);
    return -1;
  }
  *out = w;
  return 0;
}

/* ---- dispatch and iteration ------------------------------------------------------- */

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

int gpt2_weights_load(const char *path, gpt2_weights **out, gpt2_err *err) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return gpt2_errf(err, "%s: cannot open: %s", path, strerror(errno));
  unsigned char m[4] = {0};
  size_t got = fread(m, 1, 4, f);
  fclose(f);
  int32_t magic = (int32_t)((uint32_t)m[0] | (uint32_t)m[1] << 8 | (uint32_t)m[2] << 16 |
                            (uint32_t)m[3] << 24);
  /* A .bin that is not llm.c's gets llm.c's "bad magic" rather than a safetensors error. */
  if ((got == 4 && magic == LLMC_MAGIC) || ends_with(path, ".bin"))
    return gpt2_weights_load_llmc(path, out, err);
  return gpt2_weights_load_safetensors(path, NULL, out, err);
}

void gpt2_weights_release(const gpt2_weights *w, const gpt2_tensor *t) {
  if (GPT2_W_HEAP || !w || !w->priv || !t || !t->data) return;
  const char *map = w->priv->map, *b = t->data;
  size_t bytes = gpt2_dtype_size(t->dtype) * (size_t)t->shape[0] *
                 (size_t)(t->ndim == 2 ? t->shape[1] : 1);
  if (b < map || b >= map + w->priv->size || bytes > (size_t)(map + w->priv->size - b))
    return;   /* a copy of a misaligned tensor */
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t lo = ((uintptr_t)b + page - 1) / page * page, hi = ((uintptr_t)b + bytes) / page * page;
  if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);   /* advice: its failure changes nothing */
}

int gpt2_weights_count(const gpt2_weights *w) { return 4 + 12 * w->cfg.L; }

const gpt2_tensor *gpt2_weights_get(const gpt2_weights *w, int i) {
  int L = w->cfg.L;
  if (i < 0 || i >= 4 + 12 * L) return NULL;
  if (i == 0) return &w->wte;
  if (i == 1) return &w->wpe;
  if (i == 2 + 12 * L) return &w->lnfw;
  if (i == 3 + 12 * L) return &w->lnfb;
  int k = (i - 2) / L, l = (i - 2) % L;
  return layer_tensor(&w->layer[l], k);
}
