/* literal.c — literals: dense, row-major values of an array or tuple shape.

   Ownership: a literal made here (new, clone) is one malloc'd struct that owns
     - its data (64-byte aligned, hj__alloc with no context, so plain free() releases it),
     - its tuple element literals and the array holding them,
     - a malloc'd deep copy of its shape's tuple element shapes (shape.tuple),
   so it stays valid after the module it came from is gone. hlo_literal_free releases all
   of that when |owned| is set, and the struct itself always. A view (hlo_literal_view) is
   a value, not a pointer, owns nothing and is never passed to hlo_literal_free.
   Tuple element pointers may be NULL while the evaluator moves elements out; free
   skips them. */
#include "ir.h"
#include <stdlib.h>

/* Deep copy of the tuple element shapes of |s| into malloc'd memory (arrays: shallow). */
static bool lit_shape_copy(hlo_shape *dst, const hlo_shape *s) {
  *dst = *s;
  dst->tuple = NULL;
  if (s->type != HLO_TUPLE || s->ntuple == 0) return true;
  dst->tuple = calloc((size_t)s->ntuple, sizeof(hlo_shape));
  if (!dst->tuple) {
    dst->ntuple = 0;
    return false;
  }
  for (int i = 0; i < s->ntuple; i++)
    if (!lit_shape_copy(&dst->tuple[i], &s->tuple[i])) return false;
  return true;
}

static void lit_shape_release(hlo_shape *s) {
  if (s->type != HLO_TUPLE || !s->tuple) return;
  for (int i = 0; i < s->ntuple; i++) lit_shape_release(&s->tuple[i]);
  free(s->tuple);
  s->tuple = NULL;
}

void hlo_literal_free(hlo_literal *l) {
  if (!l) return;
  if (l->owned) {
    free(l->data);
    for (int i = 0; i < l->nelems; i++) hlo_literal_free(l->elems[i]);
    free(l->elems);
    lit_shape_release(&l->shape);
  }
  free(l);
}

/* A literal of |shape|; with |zero|, array data is zeroed. Tuples get element literals. */
static hlo_literal *lit_make(const hlo_shape *shape, bool zero) {
  hlo_literal *l = calloc(1, sizeof *l);
  if (!l) return NULL;
  l->owned = true;
  if (!lit_shape_copy(&l->shape, shape)) goto fail;
  if (shape->type == HLO_TUPLE) {
    l->nelems = shape->ntuple;
    l->elems = calloc(shape->ntuple > 0 ? (size_t)shape->ntuple : 1, sizeof *l->elems);
    if (!l->elems) {
      l->nelems = 0;
      goto fail;
    }
    for (int i = 0; i < shape->ntuple; i++)
      if (!(l->elems[i] = lit_make(&shape->tuple[i], zero))) goto fail;
  } else if (shape->type != HLO_TOKEN) {
    l->nbytes = hlo_shape_bytes(shape);
    l->data = hj__alloc(NULL, (size_t)l->nbytes);
    if (!l->data) goto fail;
    if (zero) memset(l->data, 0, (size_t)l->nbytes);
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
  hlo_literal *l = lit_make(shape, true);
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
  hlo_literal *c = lit_make(&l->shape, false);
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
  hlo_literal *l = calloc(1, sizeof *l);
  if (!l) goto oom;
  l->owned = true;
  l->shape.type = HLO_TUPLE;
  l->elems = calloc((size_t)(n > 0 ? n : 1), sizeof *l->elems);
  l->shape.tuple = calloc((size_t)(n > 0 ? n : 1), sizeof(hlo_shape));
  if (!l->elems || !l->shape.tuple) goto oom;
  l->nelems = n;
  l->shape.ntuple = n;
  for (int i = 0; i < n; i++) {
    l->elems[i] = elems[i];
    elems[i] = NULL;
    if (!lit_shape_copy(&l->shape.tuple[i], &l->elems[i]->shape)) goto oom;
  }
  return l;
oom:
  for (int i = 0; i < n; i++) hlo_literal_free(elems[i]);
  hlo_literal_free(l);
  hj__err(ctx, HJ_ERR_OOM, "out of memory building a tuple literal of %d elements", n);
  return NULL;
}
