/* npy.c — NumPy .npy files: one array literal per file, read and written.

   Format (numpy.lib.format): the magic "\x93NUMPY", a version byte pair (1.0, 2.0 or 3.0),
   the header length (2 bytes little-endian in 1.0, 4 bytes in 2.0/3.0), the header — a
   Python dict literal such as
       {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
   padded with spaces and ended by '\n' — then the raw elements.

   Element types (descr): '|b1' pred; '|i1' '<i2' '<i4' '<i8'; '|u1' '<u2' '<u4' '<u8';
   '<f2' f16; '<f4'; '<f8'; bf16 as '|V2' or '<V2' (two raw bytes, the bfloat16 bit pattern:
   what ml_dtypes' bfloat16 saves, or `arr.view('V2')`). Writing bf16 uses '|V2'. '=' (native)
   is read as little-endian; big-endian data ('>') and structured dtypes are rejected.

   fortran_order True is accepted: the data is transposed into row-major order on reading,
   because literals are row-major. Writing always produces C order.

   Robustness: every file may be hostile. The header is bounded (NPY_MAX_HEADER bytes), the
   parser never reads past its end, dims are checked for overflow, and the element count
   times the element size must equal the bytes that follow the header exactly, before any
   data buffer is allocated. Messages start with the file's path: "x.npy: ...". */
#include "api.h"
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>

#define NPY_MAX_HEADER (1 << 20)  /* numpy itself refuses headers over 10000 bytes by default */
#define NPY_ALIGN 64              /* numpy pads the preamble+header to a multiple of this */

/* ---- header dict parsing ---------------------------------------------------------------- */

typedef struct {
  const char *p, *end, *start;
  const char *path;
  hj_ctx_t *ctx;
} npy_lex;

typedef struct {
  char descr[32];
  bool have_descr, have_order, have_shape;
  bool fortran;
  int rank;
  int64_t dims[HJ_MAX_RANK];
} npy_header;

static hj_status npy_bad(npy_lex *lx, const char *what) {
  return hj__err(lx->ctx, HJ_ERR_PARSE, "%s: bad .npy header: %s (at byte %ld of the header)",
                 lx->path, what, (long)(lx->p - lx->start));
}

static void npy_skip_ws(npy_lex *lx) {
  while (lx->p < lx->end && (*lx->p == ' ' || *lx->p == '\t' || *lx->p == '\n' || *lx->p == '\r'))
    lx->p++;
}

static bool npy_accept(npy_lex *lx, char c) {
  npy_skip_ws(lx);
  if (lx->p < lx->end && *lx->p == c) {
    lx->p++;
    return true;
  }
  return false;
}

/* A quoted Python string ('...' or "...") of printable ASCII without escapes (all our keys
   and descrs are) into |buf|: messages quote it, so nothing else may come through. */
static bool npy_string(npy_lex *lx, char *buf, size_t n) {
  npy_skip_ws(lx);
  if (lx->p >= lx->end || (*lx->p != '\'' && *lx->p != '"')) return false;
  char q = *lx->p++;
  size_t k = 0;
  while (lx->p < lx->end && *lx->p != q) {
    if (*lx->p == '\\' || *lx->p < 0x20 || *lx->p > 0x7e || k + 1 >= n) return false;
    buf[k++] = *lx->p++;
  }
  if (lx->p >= lx->end) return false;
  lx->p++;
  buf[k] = 0;
  return true;
}

static bool npy_word(npy_lex *lx, const char *w) {
  npy_skip_ws(lx);
  size_t n = strlen(w);
  if ((size_t)(lx->end - lx->p) >= n && memcmp(lx->p, w, n) == 0) {
    lx->p += n;
    return true;
  }
  return false;
}

/* A non-negative decimal integer, possibly with a trailing 'L' (numpy < 1.x on Python 2). */
static bool npy_int(npy_lex *lx, int64_t *out) {
  npy_skip_ws(lx);
  if (lx->p >= lx->end || *lx->p < '0' || *lx->p > '9') return false;
  int64_t v = 0;
  while (lx->p < lx->end && *lx->p >= '0' && *lx->p <= '9') {
    int d = *lx->p++ - '0';
    if (v > (INT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  if (lx->p < lx->end && *lx->p == 'L') lx->p++;
  *out = v;
  return true;
}

static hj_status npy_parse_shape(npy_lex *lx, npy_header *h) {
  if (!npy_accept(lx, '(')) return npy_bad(lx, "'shape' is not a tuple");
  h->rank = 0;
  while (!npy_accept(lx, ')')) {
    int64_t d;
    if (!npy_int(lx, &d)) return npy_bad(lx, "'shape' holds something other than a size");
    if (h->rank >= HJ_MAX_RANK)
      return hj__err(lx->ctx, HJ_ERR_UNSUPPORTED, "%s: rank over %d is not supported",
                     lx->path, HJ_MAX_RANK);
    h->dims[h->rank++] = d;
    if (!npy_accept(lx, ',')) {
      if (!npy_accept(lx, ')')) return npy_bad(lx, "expected ',' or ')' in 'shape'");
      break;
    }
  }
  h->have_shape = true;
  return HJ_OK;
}

static hj_status npy_parse_header(npy_lex *lx, npy_header *h) {
  if (!npy_accept(lx, '{')) return npy_bad(lx, "expected '{'");
  while (!npy_accept(lx, '}')) {
    char key[32];
    if (!npy_string(lx, key, sizeof key)) return npy_bad(lx, "expected a quoted key");
    if (!npy_accept(lx, ':')) return npy_bad(lx, "expected ':'");
    if (strcmp(key, "descr") == 0) {
      npy_skip_ws(lx);
      if (lx->p < lx->end && *lx->p == '[')
        return hj__err(lx->ctx, HJ_ERR_UNSUPPORTED, "%s: structured dtypes are not supported",
                       lx->path);
      if (!npy_string(lx, h->descr, sizeof h->descr)) return npy_bad(lx, "'descr' is not a string");
      h->have_descr = true;
    } else if (strcmp(key, "fortran_order") == 0) {
      if (npy_word(lx, "True")) h->fortran = true;
      else if (npy_word(lx, "False")) h->fortran = false;
      else return npy_bad(lx, "'fortran_order' is not True or False");
      h->have_order = true;
    } else if (strcmp(key, "shape") == 0) {
      hj_status st = npy_parse_shape(lx, h);
      if (st) return st;
    } else {
      return npy_bad(lx, "unknown key");
    }
    if (!npy_accept(lx, ',')) {
      if (!npy_accept(lx, '}')) return npy_bad(lx, "expected ',' or '}'");
      break;
    }
  }
  if (!h->have_descr || !h->have_order || !h->have_shape)
    return npy_bad(lx, "'descr', 'fortran_order' and 'shape' are all required");
  return HJ_OK;
}

/* ---- element types ---------------------------------------------------------------------- */

static const struct { char kind; int size; hlo_type type; } npy_types[] = {
  { 'b', 1, HLO_PRED }, { 'i', 1, HLO_S8 }, { 'i', 2, HLO_S16 }, { 'i', 4, HLO_S32 },
  { 'i', 8, HLO_S64 }, { 'u', 1, HLO_U8 }, { 'u', 2, HLO_U16 }, { 'u', 4, HLO_U32 },
  { 'u', 8, HLO_U64 }, { 'f', 2, HLO_F16 }, { 'f', 4, HLO_F32 }, { 'f', 8, HLO_F64 },
  { 'V', 2, HLO_BF16 },
};

static hj_status npy_descr_type(hj_ctx_t *ctx, const char *path, const char *d, hlo_type *out) {
  size_t n = strlen(d);
  char order = n ? d[0] : 0;
  if (n != 3 || !strchr("<>|=", order) || d[2] < '1' || d[2] > '8')
    return hj__err(ctx, HJ_ERR_UNSUPPORTED, "%s: unsupported dtype '%s'", path, d);
  int size = d[2] - '0';
  for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++) {
    if (npy_types[i].kind != d[1] || npy_types[i].size != size) continue;
    /* bf16's 'V2' is raw bytes: its order mark says nothing, the bits are little-endian. */
    if (order == '>' && size > 1 && d[1] != 'V')
      return hj__err(ctx, HJ_ERR_UNSUPPORTED,
                     "%s: big-endian data ('%s') is not supported; save it little-endian "
                     "(arr.astype(arr.dtype.newbyteorder('<')))", path, d);
    *out = npy_types[i].type;
    return HJ_OK;
  }
  return hj__err(ctx, HJ_ERR_UNSUPPORTED, "%s: unsupported dtype '%s' (supported: b1 i1 i2 i4 "
                 "i8 u1 u2 u4 u8 f2 f4 f8, and V2 for bf16)", path, d);
}

static const char *npy_type_descr(hlo_type t) {
  switch (t) {
  case HLO_PRED: return "|b1";
  case HLO_S8: return "|i1";
  case HLO_S16: return "<i2";
  case HLO_S32: return "<i4";
  case HLO_S64: return "<i8";
  case HLO_U8: return "|u1";
  case HLO_U16: return "<u2";
  case HLO_U32: return "<u4";
  case HLO_U64: return "<u8";
  case HLO_F16: return "<f2";
  case HLO_BF16: return "|V2";
  case HLO_F32: return "<f4";
  case HLO_F64: return "<f8";
  default: return NULL;
  }
}

/* ---- reading ---------------------------------------------------------------------------- */

static uint32_t npy_le(const unsigned char *p, int n) {
  uint32_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

/* Fortran order -> row-major: element at column-major linear index f goes to the row-major
   index of the same multi-index. */
static void npy_from_fortran(const uint8_t *src, uint8_t *dst, const hlo_shape *s, int esize) {
  int64_t n = hlo_shape_numel(s), idx[HJ_MAX_RANK] = { 0 }, strides[HJ_MAX_RANK];
  hlo_shape_strides(s, strides);
  for (int64_t f = 0; f < n; f++) {
    int64_t c = 0;
    for (int d = 0; d < s->rank; d++) c += idx[d] * strides[d];
    memcpy(dst + c * esize, src + f * esize, (size_t)esize);
    for (int d = 0; d < s->rank && ++idx[d] == s->dims[d]; d++) idx[d] = 0;  /* first dim fastest */
  }
}

/* Reads and checks the preamble and header; on success *data_off is where elements start. */
static hj_status npy_read_header(hj_ctx_t *ctx, const char *path, FILE *f, int64_t fsize,
                                 npy_header *h, int64_t *data_off) {
  unsigned char pre[12];
  if (fsize < 10 || fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0)
    return hj__err(ctx, HJ_ERR_PARSE, "%s: not a .npy file (no \\x93NUMPY magic)", path);
  int major = pre[6], minor = pre[7];
  if (major < 1 || major > 3 || minor != 0)
    return hj__err(ctx, HJ_ERR_UNSUPPORTED, "%s: .npy format version %d.%d is not supported "
                   "(1.0, 2.0, 3.0 are)", path, major, minor);
  int64_t hlen, off = 10;
  if (major == 1) {
    hlen = npy_le(pre + 8, 2);
  } else {
    if (fsize < 12 || fread(pre + 10, 1, 2, f) != 2)
      return hj__err(ctx, HJ_ERR_PARSE, "%s: truncated .npy preamble", path);
    hlen = npy_le(pre + 8, 4);
    off = 12;
  }
  if (hlen > NPY_MAX_HEADER)
    return hj__err(ctx, HJ_ERR_PARSE, "%s: .npy header of %lld bytes is over the limit of %d",
                   path, (long long)hlen, NPY_MAX_HEADER);
  if (hlen > fsize - off)
    return hj__err(ctx, HJ_ERR_PARSE, "%s: truncated .npy header (%lld bytes announced, %lld in "
                   "the file)", path, (long long)hlen, (long long)(fsize - off));
  char *text = malloc((size_t)hlen + 1);
  if (!text) return hj__err(ctx, HJ_ERR_OOM, "%s: out of memory reading the header", path);
  hj_status st = HJ_OK;
  if (fread(text, 1, (size_t)hlen, f) != (size_t)hlen) {
    st = hj__err(ctx, HJ_ERR_IO, "%s: read error in the header", path);
  } else {
    npy_lex lx = { text, text + hlen, text, path, ctx };
    st = npy_parse_header(&lx, h);
  }
  free(text);
  *data_off = off + hlen;
  return st;
}

/* The shape from the header, with the byte count checked against what the file holds. */
static hj_status npy_check_size(hj_ctx_t *ctx, const char *path, const npy_header *h, hlo_type t,
                                int64_t avail, hlo_shape *s) {
  int64_t esize = hlo_type_size(t), n = 1;
  for (int i = 0; i < h->rank; i++) {
    if (h->dims[i] != 0 && n > INT64_MAX / esize / h->dims[i])
      return hj__err(ctx, HJ_ERR_PARSE, "%s: shape too large (element count overflows)", path);
    n *= h->dims[i];
  }
  *s = hlo_shape_array(t, h->rank, h->dims);
  if (n * esize != avail) {
    char buf[128];
    return hj__err(ctx, HJ_ERR_PARSE, "%s: %s needs %lld bytes of data but the file holds %lld",
                   path, hlo_shape_str(s, buf, sizeof buf), (long long)(n * esize),
                   (long long)avail);
  }
  return HJ_OK;
}

static hj_status npy_read_file(hj_ctx_t *ctx, const char *path, FILE *f, hlo_literal **out) {
  struct stat sb;
  if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode))
    return hj__err(ctx, HJ_ERR_IO, "%s: not a regular file", path);
  npy_header h = { 0 };
  int64_t off = 0;
  hj_status st = npy_read_header(ctx, path, f, (int64_t)sb.st_size, &h, &off);
  if (st) return st;
  hlo_type t = HLO_F32;
  if ((st = npy_descr_type(ctx, path, h.descr, &t))) return st;
  hlo_shape s;
  if ((st = npy_check_size(ctx, path, &h, t, (int64_t)sb.st_size - off, &s))) return st;
  hlo_literal *l = hlo_literal_new(ctx, &s);
  if (!l) return HJ_ERR_OOM;
  uint8_t *tmp = h.fortran && s.rank > 1 && l->nbytes ? malloc((size_t)l->nbytes) : NULL;
  uint8_t *dst = tmp ? tmp : l->data;
  if (h.fortran && s.rank > 1 && l->nbytes && !tmp) {
    st = hj__err(ctx, HJ_ERR_OOM, "%s: out of memory", path);
  } else if (l->nbytes && fread(dst, 1, (size_t)l->nbytes, f) != (size_t)l->nbytes) {
    st = hj__err(ctx, HJ_ERR_IO, "%s: read error in the data", path);
  } else if (tmp) {
    npy_from_fortran(tmp, l->data, &s, hlo_type_size(t));
  }
  free(tmp);
  if (st == HJ_OK && t == HLO_PRED)  /* pred storage is 0/1; numpy bools are too, but be sure */
    for (int64_t i = 0; i < l->nbytes; i++) l->data[i] = l->data[i] != 0;
  if (st) hlo_literal_free(l);
  else *out = l;
  return st;
}

hj_status hlo_npy_read(hj_ctx_t *ctx, const char *path, hlo_literal **out) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return hj__err(ctx, HJ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  hj_status st = npy_read_file(ctx, path, f, out);
  fclose(f);
  return st;
}

/* ---- writing ---------------------------------------------------------------------------- */

hj_status hlo_npy_write(hj_ctx_t *ctx, const char *path, const hlo_literal *l) {
  if (!hlo_shape_is_array(&l->shape))
    return hj__err(ctx, HJ_ERR_UNSUPPORTED, "%s: cannot write a %s literal as .npy (one array "
                   "per file; write tuple elements one by one)", path,
                   l->shape.type == HLO_TUPLE ? "tuple" : "token");
  const char *descr = npy_type_descr(l->shape.type);
  int64_t nbytes = hlo_shape_bytes(&l->shape);
  if (!descr || l->nbytes < nbytes)
    return hj__err(ctx, HJ_ERR_INTERNAL, "%s: literal data does not match its shape", path);
  char *hdr = NULL;
  sb_printf(&hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
  for (int i = 0; i < l->shape.rank; i++)
    sb_printf(&hdr, "%lld%s", (long long)l->shape.dims[i],
              l->shape.rank == 1 ? "," : i + 1 < l->shape.rank ? ", " : "");
  sb_puts(&hdr, "), }");
  /* Pad with spaces so that preamble (10 bytes) + header + '\n' is a multiple of 64. */
  size_t len = strlen(hdr), total = (10 + len + 1 + NPY_ALIGN - 1) / NPY_ALIGN * NPY_ALIGN;
  while (10 + strlen(hdr) + 1 < total) sb_puts(&hdr, " ");
  sb_puts(&hdr, "\n");
  len = strlen(hdr);
  unsigned char pre[10] = { 0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(len & 0xff),
                            (unsigned char)(len >> 8) };
  hj_status st = HJ_OK;
  FILE *f = fopen(path, "wb");
  if (!f) {
    st = hj__err(ctx, HJ_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
  } else {
    bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(hdr, 1, len, f) == len &&
              (nbytes == 0 || fwrite(l->data, 1, (size_t)nbytes, f) == (size_t)nbytes);
    if (fclose(f) != 0) ok = false;
    if (!ok) st = hj__err(ctx, HJ_ERR_IO, "%s: write error: %s", path, strerror(errno));
  }
  arrfree(hdr);
  return st;
}

#undef NPY_MAX_HEADER
#undef NPY_ALIGN
