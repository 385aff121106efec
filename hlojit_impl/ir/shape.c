/* shape.c — element types (ir.h's HLO_TYPES table), shapes (construction, layouts,
   printing, strides, leaves) and the checked shape
   arithmetic: the one place where element counts, byte sizes, strides and the extents that
   attributes give (slice, pad, windows) are computed, so that no attribute value can
   overflow int64 anywhere (ir.h says which helper does what). */
#include "ir.h"

/* ---- element types ---------------------------------------------------------------------- */

static const struct { const char *name; int size; hlo_type_class cls; } type_table[] = {
#define X(e, s, b, c) { s, b, c },
  HLO_TYPES(X)
#undef X
};

const char *hlo_type_name(hlo_type t) { return (unsigned)t < HLO_TYPE_COUNT ? type_table[t].name : "?"; }
int hlo_type_size(hlo_type t) { return (unsigned)t < HLO_TYPE_COUNT ? type_table[t].size : 0; }
hlo_type_class hlo_type_class_of(hlo_type t) {
  return (unsigned)t < HLO_TYPE_COUNT ? type_table[t].cls : HLO_CLASS_OTHER;
}
bool hlo_type_is_float(hlo_type t) { return hlo_type_class_of(t) == HLO_CLASS_FLOAT; }
bool hlo_type_is_int(hlo_type t) {
  hlo_type_class c = hlo_type_class_of(t);
  return c == HLO_CLASS_SINT || c == HLO_CLASS_UINT;
}

bool hlo_type_from_name(const char *s, size_t n, hlo_type *out) {
  for (int i = 0; i < HLO_TYPE_COUNT; i++)
    if (strlen(type_table[i].name) == n && memcmp(type_table[i].name, s, n) == 0) {
      *out = (hlo_type)i;
      return true;
    }
  return false;
}

/* ---- shapes ----------------------------------------------------------------------------- */

void hlo_shape_set_default_layout(hlo_shape *s) {
  /* A fixed trip count (entries past the rank are 0): gcc 12 at -O3 misreads the
     rank-bounded loop as overflowing the array once inlined into callers. */
  for (int i = 0; i < HLO_MAX_RANK; i++)
    s->minor_to_major[i] = (int8_t)(i < s->rank ? s->rank - 1 - i : 0);
  s->has_layout = true;
}

hlo_shape hlo_shape_array(hlo_type t, int rank, const int64_t *dims) {
  hlo_shape s = { .type = t, .rank = rank };
  for (int i = 0; i < rank; i++) s.dims[i] = dims[i];
  hlo_shape_set_default_layout(&s);
  return s;
}

hlo_shape hlo_shape_scalar(hlo_type t) { return hlo_shape_array(t, 0, NULL); }

bool hlo_shape_is_array(const hlo_shape *s) { return s->type < HLO_TUPLE; }

int64_t hlo_shape_numel(const hlo_shape *s) {
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++)
    if (s->dims[i] == 0) return 0;
  for (int i = 0; i < s->rank && i < HLO_MAX_RANK; i++)
    if (!hlo_mul_ok(n, s->dims[i], &n)) return INT64_MAX;
  return n;
}

int64_t hlo_shape_bytes(const hlo_shape *s) {
  int64_t b;
  return hlo_mul_ok(hlo_shape_numel(s), hlo_type_size(s->type), &b) ? b : INT64_MAX;
}

bool hlo_shape_compatible(const hlo_shape *a, const hlo_shape *b) {
  if (a->type != b->type) return false;
  if (a->type == HLO_TUPLE) {
    if (a->ntuple != b->ntuple) return false;
    for (int i = 0; i < a->ntuple; i++)
      if (!hlo_shape_compatible(&a->tuple[i], &b->tuple[i])) return false;
    return true;
  }
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i] || a->dynamic[i] != b->dynamic[i]) return false;
  return true;
}

bool hlo_shape_equal(const hlo_shape *a, const hlo_shape *b) {
  if (!hlo_shape_compatible(a, b)) return false;
  if (a->type == HLO_TUPLE) {
    for (int i = 0; i < a->ntuple; i++)
      if (!hlo_shape_equal(&a->tuple[i], &b->tuple[i])) return false;
    return true;
  }
  if (a->has_layout && b->has_layout)
    for (int i = 0; i < a->rank; i++)
      if (a->minor_to_major[i] != b->minor_to_major[i]) return false;
  return true;
}

bool hlo_shape_layout_is_default(const hlo_shape *s) {
  if (!s->has_layout) return true;
  for (int i = 0; i < s->rank; i++)
    if (s->minor_to_major[i] != s->rank - 1 - i) return false;
  return true;
}

void hlo_shape_print(char **sb, const hlo_shape *s, bool with_layout) {
  if (s->type == HLO_TUPLE) {
    sb_puts(sb, "(");
    for (int i = 0; i < s->ntuple; i++) {
      if (i) sb_puts(sb, ", ");
      hlo_shape_print(sb, &s->tuple[i], with_layout);
    }
    sb_puts(sb, ")");
    return;
  }
  if (s->type == HLO_TOKEN) {
    sb_puts(sb, "token[]");
    return;
  }
  sb_printf(sb, "%s[", hlo_type_name(s->type));
  for (int i = 0; i < s->rank; i++)
    sb_printf(sb, "%s%s%lld", i ? "," : "", s->dynamic[i] ? "<=" : "", (long long)s->dims[i]);
  sb_puts(sb, "]");
  if (with_layout && s->rank > 0) {
    hlo_shape d = *s;
    if (!s->has_layout) hlo_shape_set_default_layout(&d);
    sb_puts(sb, "{");
    for (int i = 0; i < d.rank; i++) sb_printf(sb, "%s%d", i ? "," : "", d.minor_to_major[i]);
    sb_puts(sb, "}");
  }
}

const char *hlo_shape_str(const hlo_shape *s, char *buf, size_t n) {
  char *sb = NULL;
  hlo_shape_print(&sb, s, false);
  snprintf(buf, n, "%s", sb ? sb : "");
  arrfree(sb);
  return buf;
}

void hlo_shape_strides(const hlo_shape *s, int64_t *strides) {
  bool empty = hlo_shape_numel(s) == 0;
  int64_t st = 1;
  for (int i = s->rank - 1; i >= 0; i--) {
    strides[i] = empty ? 0 : st;
    if (!empty && !hlo_mul_ok(st, s->dims[i], &st)) st = INT64_MAX;   /* invalid shapes only */
  }
}

bool hlo_shape_layout_strides(const hlo_shape *s, int64_t *strides) {
  if (!s->has_layout) {
    hlo_shape_strides(s, strides);
    return true;
  }
  bool seen[HLO_MAX_RANK] = { false }, empty = hlo_shape_numel(s) == 0;
  int64_t st = 1;
  for (int k = 0; k < s->rank; k++) {
    int d = s->minor_to_major[k];
    if (d < 0 || d >= s->rank || seen[d]) return false;
    seen[d] = true;
    strides[d] = empty ? 0 : st;
    if (!empty && !hlo_mul_ok(st, s->dims[d], &st)) st = INT64_MAX;   /* invalid shapes only */
  }
  return true;
}

void hlo_shape_leaves(const hlo_shape *s, const hlo_shape ***out) {
  if (s->type == HLO_TUPLE) {
    for (int i = 0; i < s->ntuple; i++) hlo_shape_leaves(&s->tuple[i], out);
  } else {
    arrput(*out, s);
  }
}

bool hlo_same_dims(const hlo_shape *a, const hlo_shape *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

bool hlo_ints_has(hlo_ints v, int64_t x) {
  for (int i = 0; i < v.n; i++)
    if (v.v[i] == x) return true;
  return false;
}

/* ---- checked shape arithmetic (ir.h) ---------------------------------------------------- */

bool hlo_add_ok(int64_t a, int64_t b, int64_t *r) {
  int64_t t;
  if (__builtin_add_overflow(a, b, &t)) return false;
  *r = t;
  return true;
}

bool hlo_mul_ok(int64_t a, int64_t b, int64_t *r) {
  int64_t t;
  if (__builtin_mul_overflow(a, b, &t)) return false;
  *r = t;
  return true;
}

bool hlo_dims_numel(int rank, const int64_t *dims, int64_t *n) {
  if (rank < 0 || rank > HLO_MAX_RANK) return false;
  bool zero = false;
  for (int i = 0; i < rank; i++) {
    if (dims[i] < 0) return false;
    zero |= dims[i] == 0;
  }
  int64_t p = 1;
  for (int i = 0; i < rank && !zero; i++)
    if (!hlo_mul_ok(p, dims[i], &p) || p > HLO_MAX_NUMEL) return false;
  *n = zero ? 0 : p;
  return true;
}

static const char *core_shape_check(const hlo_shape *s, int depth) {
  if (s->type == HLO_TOKEN) return NULL;
  if (s->type == HLO_TUPLE) {
    if (depth > 64) return "nests tuples more than 64 deep";
    if (s->ntuple < 0 || (s->ntuple > 0 && !s->tuple)) return "is a malformed tuple";
    for (int i = 0; i < s->ntuple; i++) {
      const char *why = core_shape_check(&s->tuple[i], depth + 1);
      if (why) return why;
    }
    return NULL;
  }
  if ((unsigned)s->type >= HLO_TUPLE) return "has a bad element type";
  if (s->rank < 0 || s->rank > HLO_MAX_RANK) return "has a rank outside [0, 8]";
  for (int i = 0; i < s->rank; i++)
    if (s->dims[i] < 0) return "has a negative dimension";
  int64_t n;
  if (!hlo_dims_numel(s->rank, s->dims, &n)) return "has more than 2^53 elements";
  return NULL;
}

const char *hlo_shape_check(const hlo_shape *s) { return core_shape_check(s, 0); }

int64_t hlo_slice_count(int64_t start, int64_t limit, int64_t stride) {
  if (limit <= start || stride < 1) return 0;
  /* limit - start - 1 fits: 0 <= start < limit. (n + stride - 1) / stride would not. */
  return (limit - start - 1) / stride + 1;
}

bool hlo_pad_dim(int64_t dim, int64_t lo, int64_t hi, int64_t interior, int64_t *out) {
  int64_t grown, d, edges;
  if (dim < 0 || interior < 0) return false;
  if (!hlo_mul_ok(dim > 0 ? dim - 1 : 0, interior, &grown) || !hlo_add_ok(dim, grown, &d))
    return false;
  /* lo + hi first: d >= 0, so when lo + hi overflows the padded size is outside
     [0, INT64_MAX] anyway, and when it does not, d + (lo + hi) overflows only if the size
     does (lo = -INT64_MAX, hi = INT64_MAX is a valid pair). */
  if (!hlo_add_ok(lo, hi, &edges) || !hlo_add_ok(d, edges, &d) || d < 0) return false;
  *out = d;
  return true;
}

int64_t hlo_pad_step(int64_t dim, int64_t interior) {
  return dim > 1 && interior >= 0 && interior < INT64_MAX ? interior + 1 : 1;
}

void hlo_pad_range(int64_t dim, int64_t lo, int64_t step, int64_t out_dim, int64_t *i0,
                   int64_t *i1, int64_t *first) {
  /* position(i) = lo + i * step, which can leave int64 on the way (lo = INT64_MIN) even
     when the positions that land in the output do not: 128-bit arithmetic. */
  __int128 L = lo, S = step > 0 ? step : 1, a = 0, b;
  if (L < 0) a = (-L + S - 1) / S;                   /* first i with lo + i*step >= 0 */
  __int128 room = (__int128)out_dim - L;             /* i*step < out_dim - lo */
  b = room <= 0 ? 0 : (room + S - 1) / S;
  if (a > dim) a = dim;
  if (b > dim) b = dim;
  if (b < a) b = a;
  *i0 = (int64_t)a;
  *i1 = (int64_t)b;
  *first = a < b ? (int64_t)(L + a * S) : 0;
}

/* (bound - 1) * dil + 1, or 0 for bound 0. */
static bool core_dilated(int64_t bound, int64_t dil, int64_t *out) {
  if (bound == 0) { *out = 0; return true; }
  int64_t t;
  return bound > 0 && dil >= 1 && hlo_mul_ok(bound - 1, dil, &t) && hlo_add_ok(t, 1, out);
}

bool hlo_window_dim(int64_t dim, int64_t size, int64_t stride, int64_t lo, int64_t hi,
                    int64_t base_dil, int64_t win_dil, int64_t *out) {
  int64_t base, win, edges;
  if (size < 1 || stride < 1 || !core_dilated(dim, base_dil, &base) ||
      !core_dilated(size, win_dil, &win) || !hlo_add_ok(lo, hi, &edges) ||
      !hlo_add_ok(base, edges, &base) || base < 0)   /* XLA: the padded bound is >= 0 */
    return false;
  *out = win > base ? 0 : (base - win) / stride + 1;   /* base - win >= 0: no overflow */
  return true;
}

int hlo_rng_split_dim(const hlo_shape *s) {   /* XLA's SplitShapeIntoHalves */
  for (int d = 0; d < s->rank; d++)
    if (s->dims[d] % 2 == 0) return d;
  int best = 0;
  for (int d = 1; d < s->rank; d++)
    if (s->dims[d] > s->dims[best]) best = d;
  return best;
}
