/* safetensors.c — Hugging Face GPT2LMHeadModel checkpoints: model.safetensors plus the
   config.json beside it (format and names in weights.h).

   Order of checks, each before anything depends on it:
     0. The file is a non-empty regular file (gpt2_w_map).
     1. config.json: the five dims, as positive integers (cJSON parses it).
     2. The 8-byte header length fits in the file; the header is one JSON object with only
        whitespace after it (safetensors pads with spaces).
     3. Per entry: dtype known, shape of non-negative integers, data_offsets two integers
        with begin <= end <= data size, end - begin == elements x dtype size.
     4. Sorted by begin, the entries tile [0, data size): an entry starting before the
        previous one ended overlaps it, one starting after leaves a hole.
     5. Names map to slots (see gpt2_weights_get's order); every slot filled once, with the
        shape config.json implies and dtype F32 or BF16.
   Only then are views made, so every pointer is base + 8 + N + begin with end inside the
   file. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "weights_priv.h"

#define MAX_NDIM 8
#define MAX_HEADER (100u << 20) /* the safetensors library's own limit */
#define EXACT_DOUBLE (9007199254740992.0) /* 2^53: larger JSON numbers are not exact */

typedef struct {
  const char *name;
  const char *dtype;
  size_t esize;
  int ndim;
  int64_t shape[MAX_NDIM];
  uint64_t begin, end;
} st_entry;

static const struct { const char *name; size_t size; } k_dtypes[] = {
    {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2},
    {"I8", 1},  {"U64", 8}, {"U32", 4}, {"U16", 2},  {"U8", 1},  {"BOOL", 1},
    {"F8_E4M3", 1}, {"F8_E5M2", 1},
};

/* The 12 per-layer names in gpt2_layer's order, and their (d0, d1) in units of C (d1 0:
   a vector). */
static const struct { const char *suffix; int d0, d1; gpt2_layout layout; } k_layer[12] = {
    {"ln_1.weight", 1, 0, GPT2_VECTOR},        {"ln_1.bias", 1, 0, GPT2_VECTOR},
    {"attn.c_attn.weight", 1, 3, GPT2_IN_OUT}, {"attn.c_attn.bias", 3, 0, GPT2_VECTOR},
    {"attn.c_proj.weight", 1, 1, GPT2_IN_OUT}, {"attn.c_proj.bias", 1, 0, GPT2_VECTOR},
    {"ln_2.weight", 1, 0, GPT2_VECTOR},        {"ln_2.bias", 1, 0, GPT2_VECTOR},
    {"mlp.c_fc.weight", 1, 4, GPT2_IN_OUT},    {"mlp.c_fc.bias", 4, 0, GPT2_VECTOR},
    {"mlp.c_proj.weight", 4, 1, GPT2_IN_OUT},  {"mlp.c_proj.bias", 1, 0, GPT2_VECTOR},
};

/* A JSON number that is an exact integer in [0, max]; -1 otherwise. */
static int64_t json_uint(const cJSON *v, double max) {
  if (!cJSON_IsNumber(v)) return -1;
  double d = v->valuedouble;
  if (!(d >= 0 && d <= max) || d != (double)(int64_t)d) return -1;
  return (int64_t)d;
}

static char *read_small_file(const char *path, size_t *len, gpt2_err *err) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    gpt2_errf(err, "%s: cannot open (a safetensors checkpoint needs its config.json)", path);
    return NULL;
  }
  size_t cap = 1 << 12, n = 0;
  char *p = malloc(cap + 1);
  while (p) {
    if (n == cap) {
      char *q = cap < (1u << 24) ? realloc(p, 2 * cap + 1) : NULL;
      if (!q) { free(p); p = NULL; gpt2_errf(err, "%s: too large for a config", path); break; }
      p = q;
      cap *= 2;
    }
    size_t got = fread(p + n, 1, cap - n, f);
    n += got;
    if (got == 0) break;
  }
  fclose(f);
  if (p) { p[n] = 0; *len = n; }
  return p;
}

static int read_config(const char *path, gpt2_config *c, gpt2_err *err) {
  size_t len;
  char *buf = read_small_file(path, &len, err);
  if (!buf) return -1;
  int rc = -1;
  cJSON *root = cJSON_ParseWithLength(buf, len);
  if (!root || !cJSON_IsObject(root)) {
    gpt2_errf(err, "%s: not a JSON object (bad JSON)", path);
    goto done;
  }
  static const char *const names[] = {"n_layer", "n_head", "n_embd", "vocab_size",
                                      "n_positions"};
  int v[5];
  for (int i = 0; i < 5; i++) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, names[i]);
    if (!it && i == 4) it = cJSON_GetObjectItemCaseSensitive(root, "n_ctx");
    if (!it) { gpt2_errf(err, "%s: '%s' is missing", path, names[i]); goto done; }
    int64_t x = json_uint(it, GPT2_MAX_DIM);
    if (x <= 0) {
      gpt2_errf(err, "%s: '%s' is not an integer in 1..%d", path, names[i], GPT2_MAX_DIM);
      goto done;
    }
    v[i] = (int)x;
  }
  *c = (gpt2_config){.L = v[0], .NH = v[1], .C = v[2], .V = v[3], .Vp = v[3], .max_T = v[4]};
  static const char *const fields[6] = {"n_positions", "vocab_size", "vocab_size",
                                        "n_layer", "n_head", "n_embd"};
  rc = gpt2_w_check_config(c, path, fields, err);
done:
  cJSON_Delete(root);
  free(buf);
  return rc;
}

/* Reads one header entry into |e|; |data_size| bounds the offsets. */
static int parse_entry(const cJSON *it, uint64_t data_size, st_entry *e, const char *path,
                       gpt2_err *err) {
  const char *name = it->string;
  e->name = name;
  if (!cJSON_IsObject(it)) return gpt2_errf(err, "%s: header entry '%s' is not an object", path, name);
  const cJSON *dt = cJSON_GetObjectItemCaseSensitive(it, "dtype");
  const cJSON *sh = cJSON_GetObjectItemCaseSensitive(it, "shape");
  const cJSON *off = cJSON_GetObjectItemCaseSensitive(it, "data_offsets");
  if (!cJSON_IsString(dt)) return gpt2_errf(err, "%s: tensor '%s': 'dtype' is missing or not a string", path, name);
  e->esize = 0;
  for (size_t i = 0; i < sizeof k_dtypes / sizeof k_dtypes[0]; i++)
    if (strcmp(dt->valuestring, k_dtypes[i].name) == 0) e->esize = k_dtypes[i].size;
  if (!e->esize) return gpt2_errf(err, "%s: tensor '%s': unknown dtype '%.20s'", path, name, dt->valuestring);
  e->dtype = dt->valuestring;
  if (!cJSON_IsArray(sh) || cJSON_GetArraySize(sh) > MAX_NDIM)
    return gpt2_errf(err, "%s: tensor '%s': 'shape' is missing or not an array of at most %d "
                     "dims", path, name, MAX_NDIM);
  e->ndim = 0;
  double elems = 1;
  for (const cJSON *d = sh->child; d; d = d->next) {
    int64_t x = json_uint(d, (double)GPT2_MAX_DIM * GPT2_MAX_C);
    if (x < 0) return gpt2_errf(err, "%s: tensor '%s': shape dim %d is not a non-negative integer", path, name, e->ndim);
    e->shape[e->ndim++] = x;
    elems *= (double)x;
  }
  if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2)
    return gpt2_errf(err, "%s: tensor '%s': 'data_offsets' is not [begin, end]", path, name);
  int64_t b = json_uint(off->child, EXACT_DOUBLE), en = json_uint(off->child->next, EXACT_DOUBLE);
  if (b < 0 || en < 0 || b > en)
    return gpt2_errf(err, "%s: tensor '%s': data_offsets [%.17g, %.17g] are not integers "
                     "with begin <= end", path, name, off->child->valuedouble,
                     off->child->next->valuedouble);
  if ((uint64_t)en > data_size)
    return gpt2_errf(err, "%s: tensor '%s': data_offsets [%lld, %lld] run past the end of "
                     "the data (%llu bytes after the header)", path, name, (long long)b,
                     (long long)en, (unsigned long long)data_size);
  e->begin = (uint64_t)b;
  e->end = (uint64_t)en;
  /* elems is exact while below 2^53; past that it cannot equal a span inside the file. */
  if (elems * (double)e->esize != (double)(e->end - e->begin))
    return gpt2_errf(err, "%s: tensor '%s': shape with %.17g elements of %s needs %.17g "
                     "bytes, data_offsets [%llu, %llu] give %llu", path, name, elems,
                     e->dtype, elems * (double)e->esize, (unsigned long long)e->begin,
                     (unsigned long long)e->end, (unsigned long long)(e->end - e->begin));
  return 0;
}

static int by_begin(const void *a, const void *b) {
  const st_entry *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  return x->end < y->end ? -1 : x->end > y->end;
}

/* Checks the entries tile [0, data_size) exactly (sorts |e|). */
static int check_tiling(st_entry *e, int n, uint64_t data_size, const char *path,
                        gpt2_err *err) {
  qsort(e, (size_t)n, sizeof *e, by_begin);
  uint64_t at = 0;
  const st_entry *last = NULL;
  for (int i = 0; i < n; i++) {
    if (e[i].begin < at)
      return gpt2_errf(err, "%s: tensors '%s' [%llu, %llu) and '%s' [%llu, %llu) overlap",
                       path, last->name, (unsigned long long)last->begin,
                       (unsigned long long)last->end, e[i].name,
                       (unsigned long long)e[i].begin, (unsigned long long)e[i].end);
    if (e[i].begin > at)
      return gpt2_errf(err, "%s: data bytes [%llu, %llu) before tensor '%s' belong to no "
                       "tensor", path, (unsigned long long)at,
                       (unsigned long long)e[i].begin, e[i].name);
    if (e[i].end > at || !last) { at = e[i].end; last = &e[i]; }
  }
  if (at != data_size)
    return gpt2_errf(err, "%s: data bytes [%llu, %llu) after the last tensor belong to no "
                     "tensor", path, (unsigned long long)at, (unsigned long long)data_size);
  return 0;
}

/* The slot (gpt2_weights_get order) of a tensor name, -2 for names ignored, -1 with an error
   for names that are not GPT-2's. */
static int slot_of(const char *name, const gpt2_config *c, int *kind, const char *path,
                   gpt2_err *err) {
  const char *n = strncmp(name, "transformer.", 12) == 0 ? name + 12 : name;
  int L = c->L;
  *kind = -1;
  if (!strcmp(n, "wte.weight")) return 0;
  if (!strcmp(n, "wpe.weight")) return 1;
  if (!strcmp(n, "ln_f.weight")) return 2 + 12 * L;
  if (!strcmp(n, "ln_f.bias")) return 3 + 12 * L;
  if (!strcmp(name, "lm_head.weight")) return -2;
  if (n[0] == 'h' && n[1] == '.' && n[2] >= '0' && n[2] <= '9') {
    char *end;
    long l = strtol(n + 2, &end, 10);
    if (*end == '.') {
      const char *suffix = end + 1;
      if (!strcmp(suffix, "attn.bias") || !strcmp(suffix, "attn.masked_bias")) return -2;
      for (int k = 0; k < 12; k++) {
        if (strcmp(suffix, k_layer[k].suffix)) continue;
        if (l >= L) {
          gpt2_errf(err, "%s: tensor '%s' is for layer %ld, but config.json has n_layer = %d",
                    path, name, l, L);
          return -1;
        }
        *kind = k;
        return 2 + k * L + (int)l;
      }
    }
  }
  gpt2_errf(err, "%s: unexpected tensor '%s' (not a GPT2LMHeadModel weight)", path, name);
  return -1;
}

/* Matches entries to slots, checks dtypes and shapes, and makes the views. */
static int make_views(gpt2_weights *w, st_entry *e, int n, const char *data,
                      const char *path, const char *cfg_path, gpt2_err *err) {
  const gpt2_config *c = &w->cfg;
  int ns = gpt2_weights_count(w);
  int *slot = malloc((size_t)ns * sizeof *slot);
  if (!slot) return gpt2_errf(err, "%s: out of memory", path);
  for (int i = 0; i < ns; i++) slot[i] = -1;
  int rc = -1;
  for (int i = 0; i < n; i++) {
    int kind, s = slot_of(e[i].name, c, &kind, path, err);
    if (s == -2) continue;
    if (s < 0) goto done;
    if (slot[s] >= 0) {
      gpt2_errf(err, "%s: tensors '%s' and '%s' are the same weight", path, e[slot[s]].name,
                e[i].name);
      goto done;
    }
    slot[s] = i;
  }
  for (int s = 0; s < ns; s++) {
    gpt2_tensor *t = (gpt2_tensor *)gpt2_weights_get(w, s);
    int64_t d0, d1;
    gpt2_layout lay;
    const char *want;
    if (s == 0) { d0 = c->V; d1 = c->C; lay = GPT2_ROWS; want = "wte.weight"; }
    else if (s == 1) { d0 = c->max_T; d1 = c->C; lay = GPT2_ROWS; want = "wpe.weight"; }
    else if (s >= 2 + 12 * c->L) {
      d0 = c->C; d1 = -1; lay = GPT2_VECTOR;
      want = s == 2 + 12 * c->L ? "ln_f.weight" : "ln_f.bias";
    } else {
      int k = (s - 2) / c->L;
      d0 = (int64_t)k_layer[k].d0 * c->C;
      d1 = k_layer[k].d1 ? (int64_t)k_layer[k].d1 * c->C : -1;
      lay = k_layer[k].layout;
      want = k_layer[k].suffix;
    }
    if (slot[s] < 0) {
      if (s >= 2 && s < 2 + 12 * c->L)
        gpt2_errf(err, "%s: tensor 'h.%d.%s' is missing", path, (s - 2) % c->L, want);
      else
        gpt2_errf(err, "%s: tensor '%s' is missing", path, want);
      goto done;
    }
    const st_entry *x = &e[slot[s]];
    gpt2_dtype dt;
    if (!strcmp(x->dtype, "F32")) dt = GPT2_F32;
    else if (!strcmp(x->dtype, "BF16")) dt = GPT2_BF16;
    else {
      gpt2_errf(err, "%s: tensor '%s': dtype %s is not supported (F32 or BF16)", path,
                x->name, x->dtype);
      goto done;
    }
    int nd = d1 < 0 ? 1 : 2;
    if (x->ndim != nd || x->shape[0] != d0 || (nd == 2 && x->shape[1] != d1)) {
      char got[128] = "", need[64];
      for (int i = 0, at = 0; i < x->ndim && at < (int)sizeof got - 24; i++)
        at += snprintf(got + at, sizeof got - (size_t)at, "%s%lld", i ? ", " : "",
                       (long long)x->shape[i]);
      if (nd == 2) snprintf(need, sizeof need, "%lld, %lld", (long long)d0, (long long)d1);
      else snprintf(need, sizeof need, "%lld", (long long)d0);
      gpt2_errf(err, "%s: tensor '%s' has shape [%s], but %s (n_layer=%d n_head=%d n_embd=%d "
                "vocab_size=%d n_positions=%d) needs [%s]", path, x->name, got, cfg_path,
                c->L, c->NH, c->C, c->V, c->max_T, need);
      goto done;
    }
    if (gpt2_w_view(w, t, x->name, data + x->begin, dt, d0, d1, lay, path, err)) goto done;
  }
  rc = 0;
done:
  free(slot);
  return rc;
}

int gpt2_weights_load_safetensors(const char *path, const char *config_json,
                                  gpt2_weights **out, gpt2_err *err) {
  *out = NULL;
  char cfg_path[4096];
  if (!config_json) {
    const char *slash = strrchr(path, '/');
    int dir = slash ? (int)(slash - path) : 0;
    if (snprintf(cfg_path, sizeof cfg_path, "%.*s%sconfig.json", dir, path,
                 slash ? "/" : "") >= (int)sizeof cfg_path)
      return gpt2_errf(err, "%s: path too long", path);
    config_json = cfg_path;
  }
  /* The file first: a missing, empty or non-regular model is named as such, not as a
     missing config.json. */
  void *map;
  size_t size;
  if (gpt2_w_map(path, &map, &size, err)) return -1;
  gpt2_config c;
  if (read_config(config_json, &c, err)) {
    gpt2_w_unmap(map, size);
    return -1;
  }
  gpt2_weights *w = NULL;
  if (gpt2_w_new(c.L, map, size, &w, err)) return -1;
  w->cfg = c;
  w->format = GPT2_FORMAT_SAFETENSORS;
  cJSON *root = NULL;
  st_entry *e = NULL;
  int rc = -1;
  const char *base = map;
  uint64_t n = 0;
  if (size >= 8) memcpy(&n, base, 8);
  if (size < 8) {
    gpt2_errf(err, "%s: %zu bytes, too short for safetensors' 8-byte header length", path, size);
    goto done;
  }
  if (n > size - 8) {
    gpt2_errf(err, "%s: header length %llu (bytes 0..7) runs past the end of the file (%zu "
              "bytes)", path, (unsigned long long)n, size);
    goto done;
  }
  if (n < 2 || n > MAX_HEADER) {
    gpt2_errf(err, "%s: header length %llu is not in 2..%u", path, (unsigned long long)n,
              MAX_HEADER);
    goto done;
  }
  const char *hdr = base + 8, *end = NULL;
  root = cJSON_ParseWithLengthOpts(hdr, (size_t)n, &end, 0);
  if (!root || !cJSON_IsObject(root)) {
    size_t at = root ? 0 : (end && end >= hdr && end <= hdr + n) ? (size_t)(end - hdr) : n;
    gpt2_errf(err, "%s: header is not a JSON object (bad JSON near header byte %zu of %llu)",
              path, at, (unsigned long long)n);
    goto done;
  }
  for (const char *p = end; p < hdr + n; p++) {
    if (*p != ' ' && *p != '\n' && *p != '\t' && *p != '\r') {
      gpt2_errf(err, "%s: header has bytes after its JSON object (at header byte %zu)", path,
                (size_t)(p - hdr));
      goto done;
    }
  }
  uint64_t data_size = size - 8 - n;
  int count = 0;
  for (cJSON *it = root->child; it; it = it->next) count++;
  e = calloc((size_t)count + 1, sizeof *e);
  if (!e) { gpt2_errf(err, "%s: out of memory", path); goto done; }
  int ne = 0;
  for (cJSON *it = root->child; it; it = it->next) {
    if (!strcmp(it->string, "__metadata__")) continue;
    if (parse_entry(it, data_size, &e[ne], path, err)) goto done;
    ne++;
  }
  if (check_tiling(e, ne, data_size, path, err)) goto done;
  if (make_views(w, e, ne, hdr + n, path, config_json, err)) goto done;
  *out = w;
  w = NULL;
  rc = 0;
done:
  free(e);
  cJSON_Delete(root);
  gpt2_weights_free(w);
  return rc;
}
