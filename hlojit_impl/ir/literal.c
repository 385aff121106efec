/* literal.c — literals: dense, row-major values of an array or tuple shape.

   Ownership: a literal made here (new, clone, tuple) is one struct that owns
     - its data (64-byte aligned),
     - its tuple element literals and the array holding them,
     - a deep copy of its shape's tuple element shapes (shape.tuple),
   all from the allocator of the context it was made in (hj_ctx_options_t.allocator; a
   copy of it is kept in |alloc|, so the literal stays valid after the module and even the
   context it came from are gone; without one, posix_memalign/calloc and free).
   hlo_literal_free releases all of that when |owned| is set, and the struct itself always. A view (hlo_literal_view) is
   a value, not a pointer, owns nothing and is never passed to hlo_literal_free.
   Tuple element pointers may be NULL while the evaluator moves elements out; free
   skips them. */
#include "ir.h"
#include <stdlib.h>

/* |n| bytes (at least 1) from allocator |a|, 64-byte aligned; zeroed when |zero|. */
static void *lit_alloc(const hj_allocator_t *a, size_t n, bool zero) {
  if (n == 0) n = 1;
  void *p = a->alloc ? a->alloc(a->user, n, 64) : hj__alloc(NULL, n);
  if (p && zero) memset(p, 0, n);
  return p;
}

static void lit_free(const hj_allocator_t *a, void *p) {
  if (!p) return;
  if (a->free) a->free(a->user, p);
  else free(p);
}

static hj_allocator_t lit_allocator(const hj_ctx_t *ctx) {
  return ctx ? ctx->opt.allocator : (hj_allocator_t){ 0 };
}

/* Deep copy of the tuple element shapes of |s| (arrays: shallow). */
static bool lit_shape_copy(const hj_allocator_t *a, hlo_shape *dst, const hlo_shape *s) {
  *dst = *s;
  dst->tuple = NULL;
  if (s->type != HLO_TUPLE || s->ntuple == 0) return true;
  dst->tuple = lit_alloc(a, sizeof(hlo_shape) * (size_t)s->ntuple, true);
  if (!dst->tuple) {
    dst->ntuple = 0;
    return false;
  }
  for (int i = 0; i < s->ntuple; i++)
    if (!lit_shape_copy(a, &dst->tuple[i], &s->tuple[i])) {
      dst->ntuple = i + 1;   /* what the release below must walk */
      return false;
    }
  return true;
}

static void lit_shape_release(const hj_allocator_t *a, hlo_shape *s) {
  if (s->type != HLO_TUPLE || !s->tuple) return;
  for (int i = 0; i < s->ntuple; i++) lit_shape_release(a, &s->tuple[i]);
  lit_free(a, s->tuple);
  s->tuple = NULL;
}

void hlo_literal_free(hlo_literal *l) {
  if (!l) return;
  hj_allocator_t a = l->alloc;
  if (l->owned) {
    lit_free(&a, l->data);
    for (int i = 0; i < l->nelems; i++) hlo_literal_free(l->elems[i]);
    lit_free(&a, l->elems);
    lit_shape_release(&a, &l->shape);
  }
  lit_free(&a, l);
}

/* A literal of |shape|; with |zero|, array data is zeroed. Tuples get element literals. */
static hlo_literal *lit_make(const hj_allocator_t *a, const hlo_shape *shape, bool zero) {
  hlo_literal *l = lit_alloc(a, sizeof *l, true);
  if (!l) return NULL;
  l->owned = true;
  l->alloc = *a;
  if (!lit_shape_copy(a, &l->shape, shape)) goto fail;
  if (shape->type == HLO_TUPLE) {
    l->nelems = shape->ntuple;
    l->elems = lit_alloc(a, sizeof *l->elems * (size_t)(shape->ntuple > 0 ? shape->ntuple : 1), true);
    if (!l->elems) {
      l->nelems = 0;
      goto fail;
    }
    for (int i = 0; i < shape->ntuple; i++)
      if (!(l->elems[i] = lit_make(a, &shape->tuple[i], zero))) goto fail;
  } else if (shape->type != HLO_TOKEN) {
    l->nbytes = hlo_shape_bytes(shape);
    if (l->nbytes < 0 || l->nbytes == INT64_MAX) goto fail;   /* a shape no valid IR has */
    l->data = lit_alloc(a, (size_t)l->nbytes, zero);
    if (!l->data) goto fail;
  }
  return l;
fail:
  hlo_literal_free(l);
  return NULL;
}

hlo_literal *hlo_literal_new(hj_ctx_t *ctx, const hlo_shape *shape) {
  char buf[256];
  if (shape->type != HLO_TUPLE && shape->type != HLO_TOKEN) {
    for (int i = 0; i < shape->rank; i++)
      if (shape->dims[i] < 0) {
        hj__err(ctx, HJ_ERR_INVALID_ARG, "literal: negative dim in %s",
                hlo_shape_str(shape, buf, sizeof buf));
        return NULL;
      }
  }
  hj_allocator_t a = lit_allocator(ctx);
  hlo_literal *l = lit_make(&a, shape, true);
  if (!l) hj__err(ctx, HJ_ERR_OOM, "out of memory allocating a literal of %s",
                  hlo_shape_str(shape, buf, sizeof buf));
  return l;
}

static bool lit_copy_into(hlo_literal *dst, const hlo_literal *src) {
  if (src->shape.type == HLO_TUPLE) {
    for (int i = 0; i < src->nelems && i < dst->nelems; i++) {
      if (!src->elems[i]) continue;
      if (!lit_copy_into(dst->elems[i], src->elems[i])) return false;
    }
    return true;
  }
  int64_t n = src->nbytes < dst->nbytes ? src->nbytes : dst->nbytes;
  if (n > 0) memcpy(dst->data, src->data, (size_t)n);
  return true;
}

hlo_literal *hlo_literal_clone(hj_ctx_t *ctx, const hlo_literal *l) {
  char buf[256];
  hj_allocator_t a = lit_allocator(ctx);
  hlo_literal *c = lit_make(&a, &l->shape, false);
  if (!c) {
    hj__err(ctx, HJ_ERR_OOM, "out of memory copying a literal of %s",
            hlo_shape_str(&l->shape, buf, sizeof buf));
    return NULL;
  }
  lit_copy_into(c, l);
  return c;
}

hlo_literal hlo_literal_view(const hlo_shape *shape, void *data) {
  hlo_literal l = { .shape = *shape, .data = data, .owned = false };
  if (hlo_shape_is_array(shape)) l.nbytes = hlo_shape_bytes(shape);
  return l;
}

/* A literal of |s| viewing consecutive array leaves from *k on; tuples nest. */
hlo_literal *hlo_literal_view_tree(const hlo_shape *s, hlo_leaf_data_fn data, const void *ud,
                                   int *k, void ***scratch) {
  hlo_literal *l = calloc(1, sizeof *l);
  if (!l) return NULL;
  arrput(*scratch, l);
  if (s->type != HLO_TUPLE) {
    *l = hlo_literal_view(s, data(ud, (*k)++));
    return l;
  }
  l->shape = *s;
  l->nelems = s->ntuple;
  l->elems = calloc((size_t)s->ntuple + 1, sizeof *l->elems);
  if (!l->elems) return NULL;
  arrput(*scratch, l->elems);
  for (int i = 0; i < s->ntuple; i++)
    if (!(l->elems[i] = hlo_literal_view_tree(&s->tuple[i], data, ud, k, scratch))) return NULL;
  return l;
}

/* Appends the array leaves of |l|, depth first, to the stb_ds array *out. */
void hlo_literal_leaves(const hlo_literal *l, const hlo_literal ***out) {
  if (l->shape.type == HLO_TUPLE)
    for (int i = 0; i < l->nelems; i++) hlo_literal_leaves(l->elems[i], out);
  else
    arrput(*out, l);
}

bool hlo_literal_equal(const hlo_literal *a, const hlo_literal *b) {
  if (!a || !b) return a == b;
  if (!hlo_shape_compatible(&a->shape, &b->shape)) return false;
  if (a->shape.type == HLO_TUPLE) {
    if (a->nelems != b->nelems) return false;
    for (int i = 0; i < a->nelems; i++)
      if (!hlo_literal_equal(a->elems[i], b->elems[i])) return false;
    return true;
  }
  if (a->nbytes != b->nbytes) return false;
  return a->nbytes == 0 || memcmp(a->data, b->data, (size_t)a->nbytes) == 0;
}

hlo_literal *hlo_literal_tuple(hj_ctx_t *ctx, hlo_literal **elems, int n) {
  hj_allocator_t a = lit_allocator(ctx);
  hlo_literal *l = lit_alloc(&a, sizeof *l, true);
  if (!l) goto oom;
  l->owned = true;
  l->alloc = a;
  l->shape.type = HLO_TUPLE;
  l->elems = lit_alloc(&a, sizeof *l->elems * (size_t)(n > 0 ? n : 1), true);
  l->shape.tuple = lit_alloc(&a, sizeof(hlo_shape) * (size_t)(n > 0 ? n : 1), true);
  if (!l->elems || !l->shape.tuple) goto oom;
  l->nelems = n;
  l->shape.ntuple = n;
  for (int i = 0; i < n; i++) {
    l->elems[i] = elems[i];
    elems[i] = NULL;
    if (!lit_shape_copy(&a, &l->shape.tuple[i], &l->elems[i]->shape)) goto oom;
  }
  return l;
oom:
  for (int i = 0; i < n; i++) hlo_literal_free(elems[i]);
  hlo_literal_free(l);
  hj__err(ctx, HJ_ERR_OOM, "out of memory building a tuple literal of %d elements", n);
  return NULL;
}
