/* jit/jit_run.c — a call of a cached entry: inputs padded to their buckets, the real sizes
   written into the s32[] size inputs, the executable run, the outputs cut back to their
   real sizes.

   Inputs: a parameter whose dynamic dims are all at their bucket goes in as it is; any
   other is copied into the entry's padded buffer of the bucket shape, with every padded
   lane zeroed on each call (the padder's contract: a sum or a dot over a parameter's padded
   lanes then needs no mask; and a shorter call must not see a longer call's data).

   Outputs, each with dynamic dims (real sizes from a size parameter, known before the run,
   or a size output, known after):
     - when the caller passed no buffer, the sizes are known before the run, and the real
       data is a row-major prefix of the padded array (every dim before the first cut one is
       1, every dim after it uncut: [<=T, C] cut to [t, C]), the executable writes a new
       padded buffer that then simply gets the real shape: no copy;
     - otherwise it writes the entry's padded scratch, and the real block is copied out
       into the caller's buffer or a new one.
   Static outputs go straight to the caller's buffer (or a new one made by hj_exec_run).
   Buffers made for a failed call are destroyed again. */
#include "jit.h"
#include <stdlib.h>

/* Copies |src| (dims |r|) into |dst| (dims |b| >= r), zeroing dst's lanes outside r
   (|zero|) or leaving them (cut copies go the other way: |src| padded, |dst| real; then
   |r| are the dst dims and |b| the src dims and |pad_dst| is false). */
static void jrn_copy(uint8_t *dst, const uint8_t *src, const int64_t *r, const int64_t *b, int rank, int d,
                     size_t es, bool pad_dst) {
  if (rank == 0) {
    memcpy(dst, src, es);
    return;
  }
  size_t rs = es, bs = es;   /* bytes of one step of dim d: real and padded */
  bool tail_same = true;
  for (int k = d + 1; k < rank; k++) {
    rs *= (size_t)r[k];
    bs *= (size_t)b[k];
    tail_same &= r[k] == b[k];
  }
  uint8_t *dp = dst;
  const uint8_t *sp = src;
  if (tail_same) {   /* the first r[d] steps are one contiguous block on both sides */
    memcpy(dp, sp, (size_t)r[d] * rs);
  } else {
    size_t dstep = pad_dst ? bs : rs, sstep = pad_dst ? rs : bs;
    for (int64_t i = 0; i < r[d]; i++) jrn_copy(dp + (size_t)i * dstep, sp + (size_t)i * sstep, r, b, rank, d + 1, es, pad_dst);
  }
  if (pad_dst && b[d] > r[d]) memset(dst + (size_t)r[d] * bs, 0, (size_t)(b[d] - r[d]) * bs);
}

/* Is the real block |r| a row-major prefix of |b|? */
static bool jrn_prefix(const int64_t *r, const int64_t *b, int rank) {
  int k = 0;
  while (k < rank && r[k] == b[k]) k++;
  for (int d = 0; d < k; d++)
    if (b[d] != 1) return k == rank;
  for (int d = k + 1; d < rank; d++)
    if (r[d] != b[d]) return false;
  return true;
}

static hj_status jrn_padded_input(hj_jit_t *j, jit_entry *e, int i, hj_buffer_t *b, const int64_t *real,
                                  const int64_t *bucket) {
  hj_shape_t s = { .rank = b->shape.rank };
  bool same = true;
  for (int d = 0; d < s.rank; d++) {
    s.dims[d] = bucket[d];
    same &= bucket[d] == real[d];
  }
  if (same) {
    e->ins[i] = b;
    return HJ_OK;
  }
  if (!e->in_pad[i]) {
    hj_status st = hj__buffer_new(j->ctx, "hj_jit_call", b->dtype, s, &e->in_pad[i]);
    if (st != HJ_OK) return st;
  }
  jrn_copy(e->in_pad[i]->data, b->data, real, bucket, s.rank, 0, hj_dtype_size(b->dtype), true);
  e->ins[i] = e->in_pad[i];
  return HJ_OK;
}

/* Real dims of output |o|; |after|: the size outputs are there. False when a size is not
   known yet (before the run) or out of range (*bad). */
static bool jrn_out_dims(const jit_entry *e, int o, bool after, int64_t *dims, bool *bad) {
  const hj_shape_t *s = &e->out_shape[o];
  for (int d = 0; d < s->rank; d++) dims[d] = s->dims[d] < 0 ? -s->dims[d] : s->dims[d];
  for (ptrdiff_t k = 0; k < arrlen(e->info.outs); k++) {
    const pass_dyn_out *u = &e->info.outs[k];
    if (u->output != o) continue;
    const hj_buffer_t *src = u->size_param >= 0 ? e->ins[u->size_param] : after ? e->outs[u->size_output] : NULL;
    if (!src) return false;
    int32_t v = *(const int32_t *)src->data;
    if (v < 0 || v > dims[u->dim]) {
      *bad = true;
      return false;
    }
    dims[u->dim] = v;
  }
  return true;
}

static bool jrn_dynamic_output(const jit_entry *e, int o) {
  for (ptrdiff_t k = 0; k < arrlen(e->info.outs); k++)
    if (e->info.outs[k].output == o) return true;
  return false;
}

static size_t jrn_bytes(hj_dtype_t t, int rank, const int64_t *dims) {
  size_t n = hj_dtype_size(t);
  for (int d = 0; d < rank; d++) n *= (size_t)dims[d];
  return n;
}

/* After the run: output |o| at its real dims, into out[o]. */
static hj_status jrn_finish_output(hj_jit_t *j, jit_entry *e, int o, bool shrink, hj_buffer_t **out, bool *made) {
  int64_t dims[HJ_MAX_RANK];
  bool bad = false;
  const hj_shape_t *ps = &e->out_shape[o];
  if (!jrn_out_dims(e, o, true, dims, &bad))
    return hj__err(j->ctx, HJ_ERR_INTERNAL, "hj_jit_call '%s': output %d: a real size is out of range", j->name, o);
  int64_t b[HJ_MAX_RANK];
  hj_shape_t rs = { .rank = ps->rank };
  for (int d = 0; d < ps->rank; d++) {
    b[d] = ps->dims[d] < 0 ? -ps->dims[d] : ps->dims[d];
    rs.dims[d] = dims[d];
  }
  if (shrink) {   /* a new padded buffer: the real data is its prefix */
    hj_buffer_t *x = e->outs[o];
    x->shape = rs;
    x->nbytes = jrn_bytes(x->dtype, rs.rank, dims);
    out[o] = x;
    *made = true;
    return HJ_OK;
  }
  hj_buffer_t *dst = out[o];
  if (dst) {
    bool ok = dst->dtype == e->out_dtype[o] && dst->shape.rank == rs.rank;
    for (int d = 0; ok && d < rs.rank; d++) ok = dst->shape.dims[d] == rs.dims[d];
    if (!ok) {
      char b0[128], b1[128];
      hlo_shape ds = hj__buffer_hlo_shape(dst), want;
      hj__shape_to_hlo(e->out_dtype[o], rs, &want);
      return hj__err(j->ctx, HJ_ERR_SHAPE, "hj_jit_call '%s': output %d is %s, this call's result is %s", j->name, o,
                     hlo_shape_str(&ds, b0, sizeof b0), hlo_shape_str(&want, b1, sizeof b1));
    }
  } else {
    hj_status st = hj__buffer_new(j->ctx, "hj_jit_call", e->out_dtype[o], rs, &dst);
    if (st != HJ_OK) return st;
    out[o] = dst;
    *made = true;
  }
  jrn_copy(dst->data, e->out_pad[o]->data, dims, b, rs.rank, 0, hj_dtype_size(dst->dtype), false);
  return HJ_OK;
}

/* Before the run: where output |o| is computed (e->outs[o]); *shrink when it is a new
   padded buffer that will just take the real shape. */
static hj_status jrn_prepare_output(hj_jit_t *j, jit_entry *e, int o, hj_buffer_t *caller, bool *shrink) {
  *shrink = false;
  if (!jrn_dynamic_output(e, o)) {
    e->outs[o] = caller;
    return HJ_OK;
  }
  int64_t dims[HJ_MAX_RANK], b[HJ_MAX_RANK];
  bool bad = false;
  const hj_shape_t *ps = &e->out_shape[o];
  for (int d = 0; d < ps->rank; d++) b[d] = ps->dims[d] < 0 ? -ps->dims[d] : ps->dims[d];
  hj_shape_t bs = { .rank = ps->rank };
  memcpy(bs.dims, b, sizeof b[0] * (size_t)ps->rank);
  if (!caller && jrn_out_dims(e, o, false, dims, &bad) && jrn_prefix(dims, b, ps->rank)) {
    *shrink = true;
    return hj__buffer_new(j->ctx, "hj_jit_call", e->out_dtype[o], bs, &e->outs[o]);
  }
  if (!e->out_pad[o]) {
    hj_status st = hj__buffer_new(j->ctx, "hj_jit_call", e->out_dtype[o], bs, &e->out_pad[o]);
    if (st != HJ_OK) return st;
  }
  e->outs[o] = e->out_pad[o];
  return HJ_OK;
}

hj_status jit_run(hj_jit_t *j, jit_entry *e, hj_buffer_t *const *in, hj_buffer_t **out, int nout,
                  const int64_t *real) {
  if (nout != e->noutputs)
    return hj__err(j->ctx, HJ_ERR_INVALID_ARG, "hj_jit_call '%s': %d outputs given, the function has %d", j->name,
                   nout, e->noutputs);
  hj_status st = HJ_OK;
  int at = 1;
  for (int i = 0; i < e->nparams && st == HJ_OK; i++) {
    int rank = (int)e->key[at + 1];
    const int64_t *bucket = &e->key[at + 2];
    at += 2 + rank;
    if (e->mode == JIT_MODE_PADDED) st = jrn_padded_input(j, e, i, in[i], &real[i * HJ_MAX_RANK], bucket);
    else e->ins[i] = in[i];
  }
  for (ptrdiff_t k = 0; k < arrlen(e->info.params); k++) {
    const pass_dyn_param *p = &e->info.params[k];
    *(int32_t *)e->size_in[k]->data = (int32_t)real[p->param * HJ_MAX_RANK + p->dim];
  }
  bool small[16] = { 0 }, *shrink = e->noutputs <= 16 ? small : calloc((size_t)e->noutputs, sizeof *shrink);
  bool smade[16] = { 0 }, *made = e->noutputs <= 16 ? smade : calloc((size_t)e->noutputs, sizeof *made);
  if (!shrink || !made) st = hj__err(j->ctx, HJ_ERR_OOM, "hj_jit_call: out of memory");
  for (int o = 0; o < e->noutputs && st == HJ_OK; o++) st = jrn_prepare_output(j, e, o, out[o], &shrink[o]);
  if (st == HJ_OK) st = hj_exec_run(e->exec, e->ins, e->nin, e->outs, e->nout);
  for (int o = 0; o < e->noutputs && st == HJ_OK; o++) {
    if (jrn_dynamic_output(e, o)) st = jrn_finish_output(j, e, o, shrink[o], out, &made[o]);
    else if (!out[o]) made[o] = (out[o] = e->outs[o]) != NULL;
  }
  for (int o = 0; o < e->noutputs; o++) {
    if (st != HJ_OK && made && made[o]) {
      hj_buffer_destroy(out[o]);
      out[o] = NULL;
    } else if (st != HJ_OK && shrink && shrink[o]) {
      hj_buffer_destroy(e->outs[o]);
    }
    e->outs[o] = NULL;
  }
  if (shrink != small) free(shrink);
  if (made != smade) free(made);
  return st;
}
