/* passes/conv_lower.c — convolutions as im2col + one dot, so that they run on the packed
   matmul (the CPU's register-blocked kernel, the GPU's tiled matmul or cuBLAS) instead of
   the elemental kernel's one-output-at-a-time loops (emitters/elemental_window.c), which
   stay for the forms this pass leaves alone.

   Input-dilated convolutions (lhs_dilate: transposed convolutions, input gradients) are
   first split into one ordinary convolution per output phase (cvl_phases, below).
   Rewritten: feature_group_count == batch_group_count == 1, f32/bf16/f16 operands and
   result (computed in f32: bf16 and f16 operands are converted first, the result converted
   once at the end, XLA:CPU's own practice), a window with at least 16 multiply-adds per
   output (kernel taps x input features; below that the elemental kernel wins), and at most
   CVL_MAX_SLICES slices to build the patch matrix from (below).

   The rewrite, with B the batch, C the input features, O the output features, T the
   window's taps and Q the output's spatial positions:
     x  = transpose(lhs) to [B, spatial..., C]        (skipped when already so)
     xp = pad(x, 0) with pad_lo/pad_hi on the spatial dims
     patches [B, Q, T, C] — built from whichever is fewer:
       T slices, one per tap t: slice(xp, start t*rhs_dilate, stride = window stride)
         = [B, out..., C], reshaped [B, out..., 1, C], concatenated on that axis; or
       Q slices, one per output position q: slice(xp, start q*stride, stride rhs_dilate)
         = [B, window..., C], reshaped [B, 1, T, C], concatenated on axis 1
       (a forward 3x3 convolution has T = 9; its weight gradient, whose "window" is the
       whole image, has T = H*W but Q = 9)
     w  = transpose(reverse(rhs)) to [window..., C, O] -> reshape [T*C, O]
     y  = dot(reshape(patches) [B*Q, T*C], w) -> [B*Q, O] -> reshape [B, out..., O] ->
          transpose to the output's dim order.
   With fewer than 8 input features (an RGB stem) the same is built channel-major, x as
   [C, B, spatial...], the patches transposed, [T*C, B*Q], and the dot w^T [O, T*C] x
   patches, transposed back: rows of the output width instead of rows of C floats.
   The patch matrix is a concatenate fusion (loop.c writes one row loop per slice), read
   once by the matmul's packing: memory T times the input's, the cost of going through the
   packed matmul. Taps sum in (tap, feature) order, as the evaluator's loops do. */
#include "passes.h"

#define CVL_MAX_SLICES 64
#define CVL_MIN_TAPS 16
#define CVL_CMAJOR_C 8   /* below this many input features: channel-major patches */

typedef struct cvl {
  hlo_comp *c;
  const hlo_instr *before;
  hj_status st;
} cvl;

static hlo_instr *cvl_new(cvl *L, hlo_opcode op, const hlo_shape *s, hlo_instr **ops, int n) {
  if (L->st) return NULL;
  hlo_instr *i = hlo_instr_new_before(L->c, L->before, op, NULL, s, ops, n);
  if (!i) L->st = HJ_ERR_OOM;
  return i;
}

static hlo_ints cvl_ints(cvl *L, const int64_t *v, int n) {
  hlo_ints r = hlo_ints_dup(L->c->module, v, n);
  if (n > 0 && !r.v) L->st = HJ_ERR_OOM;
  return r;
}

static hlo_instr *cvl_reshape(cvl *L, hlo_instr *x, int rank, const int64_t *dims) {
  if (!x) return NULL;
  bool same = x->shape.rank == rank;
  for (int i = 0; same && i < rank; i++) same = x->shape.dims[i] == dims[i];
  if (same) return x;
  hlo_shape s = hlo_shape_array(x->shape.type, rank, dims);
  return cvl_new(L, HLO_OP_RESHAPE, &s, &x, 1);
}

/* result dim i = x's dim perm[i]; skipped for the identity. */
static hlo_instr *cvl_transpose(cvl *L, hlo_instr *x, const int64_t *perm) {
  if (!x) return NULL;
  int r = x->shape.rank;
  bool id = true;
  int64_t d[HLO_MAX_RANK];
  for (int i = 0; i < r; i++) id &= perm[i] == i, d[i] = x->shape.dims[perm[i]];
  if (id) return x;
  hlo_shape s = hlo_shape_array(x->shape.type, r, d);
  hlo_instr *t = cvl_new(L, HLO_OP_TRANSPOSE, &s, &x, 1);
  if (t) t->dims = cvl_ints(L, perm, r);
  return t;
}

static hlo_instr *cvl_convert(cvl *L, hlo_instr *x, hlo_type t) {
  if (!x || x->shape.type == t) return x;
  hlo_shape s = x->shape;
  s.type = t;
  return cvl_new(L, HLO_OP_CONVERT, &s, &x, 1);
}

static hlo_instr *cvl_slice(cvl *L, hlo_instr *x, const int64_t *start, const int64_t *limit,
                            const int64_t *stride) {
  int r = x->shape.rank;
  int64_t d[HLO_MAX_RANK];
  for (int i = 0; i < r; i++) d[i] = hlo_slice_count(start[i], limit[i], stride[i]);
  hlo_shape s = hlo_shape_array(x->shape.type, r, d);
  hlo_instr *y = cvl_new(L, HLO_OP_SLICE, &s, &x, 1);
  if (y) {
    y->slice_start = cvl_ints(L, start, r);
    y->slice_limit = cvl_ints(L, limit, r);
    y->slice_stride = cvl_ints(L, stride, r);
  }
  return y;
}

static int64_t cvl_at(hlo_ints v, int i, int64_t dflt) { return i < v.n ? v.v[i] : dflt; }

/* A scalar zero of |t| before the convolution. */
static hlo_instr *cvl_zero(cvl *L, hlo_type t) {
  if (L->st) return NULL;
  hlo_shape zs = hlo_shape_scalar(t);
  hlo_literal *zl = hlo_literal_new(L->c->module->ctx, &zs);
  hlo_instr *z = zl ? hlo_constant_new_before(L->c, L->before, zl) : NULL;
  hlo_literal_free(zl);
  if (!z) L->st = HJ_ERR_OOM;
  return z;
}

static bool cvl_float(hlo_type t) { return t == HLO_F32 || t == HLO_BF16 || t == HLO_F16; }

/* The patch matrix count (slices) this convolution needs, or 0 when it stays elemental. */
static int64_t cvl_plan(const hlo_instr *cv, int64_t *T, int64_t *Q) {
  const hlo_conv_dims *cd = &cv->conv;
  const hlo_shape *l = &cv->operands[0]->shape, *k = &cv->operands[1]->shape, *o = &cv->shape;
  int ns = cd->in_spatial.n;
  if (cd->feature_groups != 1 || cd->batch_groups != 1 || !cvl_float(l->type) || !cvl_float(k->type) ||
      !cvl_float(o->type) || cv->window.size.n != ns || hlo_shape_numel(o) == 0 || hlo_shape_numel(l) == 0 ||
      !hlo_shape_layout_is_default(o))
    return 0;
  *T = 1, *Q = 1;
  for (int i = 0; i < ns; i++) {
    if (cvl_at(cv->window.base_dilation, i, 1) != 1) return 0;   /* cvl_phases first */
    *T *= cv->window.size.v[i], *Q *= o->dims[cd->out_spatial.v[i]];
  }
  if (*T * k->dims[cd->k_in] < CVL_MIN_TAPS) return 0;
  int64_t n = *T < *Q ? *T : *Q;
  return n <= CVL_MAX_SLICES ? n : 0;
}

static hj_status cvl_rewrite(hlo_comp *c, hlo_instr *cv) {
  const hlo_conv_dims *cd = &cv->conv;
  const hlo_window *w = &cv->window;
  int ns = cd->in_spatial.n, r = ns + 2;
  int64_t T, Q;
  if (!cvl_plan(cv, &T, &Q)) return HJ_OK;
  cvl L = { c, cv, HJ_OK };
  hlo_instr *lhs = cv->operands[0], *rhs = cv->operands[1];
  int64_t B = lhs->shape.dims[cd->in_batch], C = lhs->shape.dims[cd->in_feature],
          O = rhs->shape.dims[cd->k_out], out[HLO_MAX_RANK], perm[HLO_MAX_RANK];
  for (int i = 0; i < ns; i++) out[i] = cv->shape.dims[cd->out_spatial.v[i]];
  /* x = [B, spatial..., C] in f32 and padded; channel-major [C, B, spatial...] when C is
     small and the patches go by tap: rows of C floats would be short, rows of the output
     width are not (a 7x7 stem on RGB: 3 vs 112) */
  bool cm = T <= Q && C < CVL_CMAJOR_C;
  int pb = cm ? 1 : 0, pc = cm ? 0 : r - 1, ps0 = cm ? 2 : 1;
  perm[pb] = cd->in_batch, perm[pc] = cd->in_feature;
  for (int i = 0; i < ns; i++) perm[ps0 + i] = cd->in_spatial.v[i];
  hlo_instr *x = cvl_transpose(&L, cvl_convert(&L, lhs, HLO_F32), perm);
  int64_t lo[HLO_MAX_RANK] = { 0 }, hi[HLO_MAX_RANK] = { 0 }, interior[HLO_MAX_RANK] = { 0 };
  bool pad = false;
  for (int i = 0; i < ns; i++) {
    lo[ps0 + i] = cvl_at(w->pad_lo, i, 0), hi[ps0 + i] = cvl_at(w->pad_hi, i, 0);
    pad |= lo[ps0 + i] || hi[ps0 + i];
  }
  hlo_instr *z = pad ? cvl_zero(&L, HLO_F32) : NULL;
  if (pad && x && z) {
    hlo_shape ps = x->shape;
    for (int d = 0; d < r; d++)
      if (!hlo_pad_dim(x->shape.dims[d], lo[d], hi[d], 0, &ps.dims[d])) return HJ_ERR_SHAPE;
    hlo_instr *ops[2] = { x, z };
    x = cvl_new(&L, HLO_OP_PAD, &ps, ops, 2);
    if (x) {
      x->pad_lo = cvl_ints(&L, lo, r);
      x->pad_hi = cvl_ints(&L, hi, r);
      x->pad_interior = cvl_ints(&L, interior, r);
    }
  }
  if (!x) return L.st ? L.st : HJ_ERR_OOM;
  /* the patches [B, Q, T, C] */
  bool by_tap = T <= Q;
  int64_t n = by_tap ? T : Q, pos[HLO_MAX_RANK] = { 0 }, count[HLO_MAX_RANK];
  for (int i = 0; i < ns; i++) count[i] = by_tap ? w->size.v[i] : out[i];
  hlo_instr **parts = NULL;
  for (int64_t j = 0; j < n && !L.st; j++) {
    int64_t start[HLO_MAX_RANK] = { 0 }, limit[HLO_MAX_RANK], stride[HLO_MAX_RANK], pd[HLO_MAX_RANK + 1];
    limit[pb] = B, limit[pc] = C, stride[pb] = stride[pc] = 1;
    for (int i = 0; i < ns; i++) {
      int64_t st = cvl_at(w->stride, i, 1), wd = cvl_at(w->window_dilation, i, 1), a = ps0 + i;
      start[a] = by_tap ? pos[i] * wd : pos[i] * st;
      stride[a] = by_tap ? st : wd;
      limit[a] = start[a] + ((by_tap ? out[i] : w->size.v[i]) - 1) * stride[a] + 1;
    }
    hlo_instr *s = cvl_slice(&L, x, start, limit, stride);
    if (cm) {       /* [1, C, B, out...] */
      pd[0] = 1, pd[1] = C, pd[2] = B;
      for (int i = 0; i < ns; i++) pd[3 + i] = out[i];
      s = cvl_reshape(&L, s, r + 1, pd);
    } else if (by_tap) {   /* [B, out..., 1, C] */
      pd[0] = B, pd[ns + 1] = 1, pd[ns + 2] = C;
      for (int i = 0; i < ns; i++) pd[1 + i] = out[i];
      s = cvl_reshape(&L, s, r + 1, pd);
    } else {        /* [B, 1, T, C] */
      int64_t d4[4] = { B, 1, T, C };
      s = cvl_reshape(&L, s, 4, d4);
    }
    arrput(parts, s);
    for (int i = ns - 1; i >= 0 && ++pos[i] == count[i]; i--) pos[i] = 0;
  }
  hlo_instr *pm = parts ? parts[0] : NULL;
  if (n > 1 && !L.st) {
    hlo_shape cs = parts[0]->shape;
    int axis = cm ? 0 : by_tap ? ns + 1 : 1;
    cs.dims[axis] = n;
    pm = cvl_new(&L, HLO_OP_CONCATENATE, &cs, parts, (int)n);
    if (pm) {
      int64_t a = axis;
      pm->dims = cvl_ints(&L, &a, 1);
    }
  }
  arrfree(parts);
  int64_t m2[2] = { B * Q, T * C }, m2t[2] = { T * C, B * Q };
  pm = cvl_reshape(&L, pm, 2, cm ? m2t : m2);
  /* the kernel [T*C, O] */
  hlo_instr *k = cvl_convert(&L, rhs, HLO_F32);
  int64_t rev[HLO_MAX_RANK], nrev = 0;
  for (int i = 0; i < ns; i++)
    if (cvl_at(w->reversal, i, 0)) rev[nrev++] = cd->k_spatial.v[i];
  if (nrev && k) {
    hlo_instr *kr = cvl_new(&L, HLO_OP_REVERSE, &k->shape, &k, 1);
    if (kr) kr->dims = cvl_ints(&L, rev, (int)nrev);
    k = kr;
  }
  int k0 = cm ? 1 : 0;   /* [spatial..., C, O] or, channel-major, [O, spatial..., C] */
  for (int i = 0; i < ns; i++) perm[k0 + i] = cd->k_spatial.v[i];
  perm[k0 + ns] = cd->k_in, perm[cm ? 0 : ns + 1] = cd->k_out;
  int64_t k2[2] = { T * C, O }, k2t[2] = { O, T * C };
  k = cvl_reshape(&L, cvl_transpose(&L, k, perm), 2, cm ? k2t : k2);
  /* the dot and the way back */
  hlo_instr *y = NULL;
  if (pm && k) {
    int64_t yd[2] = { B * Q, O }, ydt[2] = { O, B * Q }, one = 1, zero = 0;
    hlo_shape ys = hlo_shape_array(HLO_F32, 2, cm ? ydt : yd);
    hlo_instr *ops[2] = { cm ? k : pm, cm ? pm : k };
    y = cvl_new(&L, HLO_OP_DOT, &ys, ops, 2);
    if (y) {
      y->dot.lhs_contract = cvl_ints(&L, &one, 1);
      y->dot.rhs_contract = cvl_ints(&L, &zero, 1);
    }
  }
  int64_t od[HLO_MAX_RANK];   /* [B, out..., O] or, channel-major, [O, B, out...] */
  od[pb] = B, od[pc] = O;
  for (int i = 0; i < ns; i++) od[ps0 + i] = out[i];
  y = cvl_convert(&L, cvl_reshape(&L, y, r, od), cv->shape.type);
  perm[cd->out_batch] = pb, perm[cd->out_feature] = pc;
  for (int i = 0; i < ns; i++) perm[cd->out_spatial.v[i]] = ps0 + i;
  y = cvl_transpose(&L, y, perm);
  if (!y) return L.st ? L.st : HJ_ERR_OOM;
  hlo_replace_all_uses(c, cv, y);
  hlo_remove_instr(c, cv);
  return HJ_OK;
}

/* A convolution whose input is dilated (lhs_dilate d > 1: a transposed convolution, the
   input gradient of a strided one) has its output positions o = q*d + r fall into d
   phases; phase r reads only the kernel taps k = k0 + j*d with (r - pad_lo + k0) % d == 0,
   at input q + (r - pad_lo + k0) / d + j: an ordinary convolution of the undilated input
   with that slice of the kernel. The phases' outputs (pads with interior d - 1 and low r)
   add up to the result; the holes the dilation made are never multiplied (none of the
   d^2 x more work of convolving the zeros, and the hole semantics of eval_window.c). Only
   for dims with stride 1 and no rhs dilation (what gradients make); the sub-convolutions go
   on to the im2col rewrite. *subs gets them. */
static hj_status cvl_phases(hlo_comp *c, hlo_instr *cv, hlo_instr ***subs) {
  const hlo_conv_dims *cd = &cv->conv;
  const hlo_window *w = &cv->window;
  int ns = cd->in_spatial.n;
  hlo_module *m = c->module;
  cvl L = { c, cv, HJ_OK };
  int64_t d[HLO_MAX_RANK], nph = 1;
  for (int i = 0; i < ns; i++) d[i] = cvl_at(w->base_dilation, i, 1), nph *= d[i];
  hlo_instr *k = cv->operands[1];
  int64_t rev[HLO_MAX_RANK], nrev = 0;
  for (int i = 0; i < ns; i++)
    if (cvl_at(w->reversal, i, 0)) rev[nrev++] = cd->k_spatial.v[i];
  if (nrev) {   /* reversal made explicit, so that kernel slices count taps forwards */
    hlo_instr *kr = cvl_new(&L, HLO_OP_REVERSE, &k->shape, &k, 1);
    if (kr) kr->dims = cvl_ints(&L, rev, (int)nrev);
    k = kr;
  }
  hlo_instr *z = cvl_zero(&L, cv->shape.type);
  hlo_instr *acc = z ? cvl_new(&L, HLO_OP_BROADCAST, &cv->shape, &z, 1) : NULL;
  if (!acc) return L.st ? L.st : HJ_ERR_OOM;
  int64_t r[HLO_MAX_RANK] = { 0 };
  for (int64_t ph = 0; ph < nph && !L.st; ph++) {
    int64_t k0[HLO_MAX_RANK], kr[HLO_MAX_RANK], cr[HLO_MAX_RANK], q[HLO_MAX_RANK];
    bool empty = false;
    for (int i = 0; i < ns; i++) {
      int64_t K = w->size.v[i], lo = cvl_at(w->pad_lo, i, 0), out = cv->shape.dims[cd->out_spatial.v[i]];
      if (d[i] == 1) {   /* an undilated dim keeps its window */
        k0[i] = 0, kr[i] = K, cr[i] = 0, q[i] = out;
        continue;
      }
      k0[i] = ((lo - r[i]) % d[i] + d[i]) % d[i];
      kr[i] = k0[i] < K ? (K - k0[i] + d[i] - 1) / d[i] : 0;
      cr[i] = (r[i] - lo + k0[i]) / d[i];
      q[i] = out > r[i] ? (out - r[i] + d[i] - 1) / d[i] : 0;
      empty |= kr[i] == 0 || q[i] == 0;
    }
    if (!empty) {
      /* the kernel's slice of this phase */
      const hlo_shape *ks = &k->shape;
      int64_t st[HLO_MAX_RANK], li[HLO_MAX_RANK], sd[HLO_MAX_RANK];
      for (int j = 0; j < ks->rank; j++) st[j] = 0, li[j] = ks->dims[j], sd[j] = 1;
      for (int i = 0; i < ns; i++) {
        int64_t kd = cd->k_spatial.v[i];
        st[kd] = k0[i], sd[kd] = d[i], li[kd] = k0[i] + (kr[i] - 1) * d[i] + 1;
      }
      hlo_instr *ksl = cvl_slice(&L, k, st, li, sd);
      hlo_shape ss = cv->shape;
      for (int i = 0; i < ns; i++) ss.dims[cd->out_spatial.v[i]] = q[i];
      hlo_instr *ops[2] = { cv->operands[0], ksl };
      hlo_instr *sub = ksl ? cvl_new(&L, HLO_OP_CONVOLUTION, &ss, ops, 2) : NULL;
      if (sub) {
        int64_t one[HLO_MAX_RANK], zero[HLO_MAX_RANK] = { 0 }, plo[HLO_MAX_RANK], phi[HLO_MAX_RANK],
                sst[HLO_MAX_RANK], swd[HLO_MAX_RANK];
        for (int i = 0; i < ns; i++) {
          int64_t in = cv->operands[0]->shape.dims[cd->in_spatial.v[i]];
          one[i] = 1, sst[i] = cvl_at(w->stride, i, 1), swd[i] = cvl_at(w->window_dilation, i, 1);
          plo[i] = -cr[i], phi[i] = q[i] - 1 + kr[i] - in - plo[i];
          if (d[i] == 1) plo[i] = cvl_at(w->pad_lo, i, 0), phi[i] = cvl_at(w->pad_hi, i, 0);
        }
        sub->conv = cv->conv;
        if (!hlo_instr_dup_lists(m, sub)) L.st = HJ_ERR_OOM;
        sub->window.size = cvl_ints(&L, kr, ns);
        sub->window.stride = cvl_ints(&L, sst, ns);
        sub->window.pad_lo = cvl_ints(&L, plo, ns);
        sub->window.pad_hi = cvl_ints(&L, phi, ns);
        sub->window.base_dilation = cvl_ints(&L, one, ns);
        sub->window.window_dilation = cvl_ints(&L, swd, ns);
        sub->window.reversal = cvl_ints(&L, zero, ns);
        arrput(*subs, sub);
        /* spread it over the result: position q*d + r */
        int rank = cv->shape.rank;
        int64_t plo2[HLO_MAX_RANK] = { 0 }, phi2[HLO_MAX_RANK] = { 0 }, pin[HLO_MAX_RANK] = { 0 };
        for (int i = 0; i < ns; i++) {
          int64_t od = cd->out_spatial.v[i], out = cv->shape.dims[od];
          plo2[od] = r[i], pin[od] = d[i] - 1, phi2[od] = out - (r[i] + (q[i] - 1) * d[i] + 1);
        }
        hlo_instr *pops[2] = { sub, z };
        hlo_instr *pd = cvl_new(&L, HLO_OP_PAD, &cv->shape, pops, 2);
        if (pd) {
          pd->pad_lo = cvl_ints(&L, plo2, rank);
          pd->pad_hi = cvl_ints(&L, phi2, rank);
          pd->pad_interior = cvl_ints(&L, pin, rank);
        }
        hlo_instr *aops[2] = { acc, pd };
        acc = pd && acc ? cvl_new(&L, HLO_OP_ADD, &cv->shape, aops, 2) : NULL;
      }
    }
    for (int i = ns - 1; i >= 0 && ++r[i] == d[i]; i--) r[i] = 0;
  }
  if (L.st || !acc) return L.st ? L.st : HJ_ERR_OOM;
  hlo_replace_all_uses(c, cv, acc);
  hlo_remove_instr(c, cv);
  return HJ_OK;
}

/* lhs-dilated (base dilation > 1 somewhere), no groups of batches, float, default layout,
   stride 1 and no rhs dilation where the input is dilated, at most 16 phases. */
static bool cvl_phased(const hlo_instr *cv) {
  const hlo_conv_dims *cd = &cv->conv;
  const hlo_window *w = &cv->window;
  int ns = cd->in_spatial.n;
  bool any = false;
  int64_t nph = 1;
  if (cd->batch_groups != 1 || !cvl_float(cv->shape.type) || w->size.n != ns ||
      !hlo_shape_layout_is_default(&cv->shape) || hlo_shape_numel(&cv->shape) == 0)
    return false;
  for (int i = 0; i < ns; i++) {
    int64_t bd = cvl_at(w->base_dilation, i, 1);
    if (bd == 1) continue;
    any = true;
    nph *= bd;
    if (cvl_at(w->stride, i, 1) != 1 || cvl_at(w->window_dilation, i, 1) != 1 || nph > 16) return false;
  }
  return any;
}

hj_status hlo_pass_conv_lower(hlo_pass_ctx *pc, hlo_module *m, bool *changed) {
  if (changed) *changed = false;
  for (ptrdiff_t ci = 0; ci < arrlen(m->comps); ci++) {
    hlo_comp *c = m->comps[ci];
    hlo_instr **convs = NULL, **phased = NULL;
    int64_t T, Q;
    for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++) {
      hlo_instr *x = c->instrs[i];
      if (x->op != HLO_OP_CONVOLUTION) continue;
      if (cvl_phased(x)) arrput(phased, x);
      else if (cvl_plan(x, &T, &Q)) arrput(convs, x);
    }
    hj_status st = HJ_OK;
    const char *nm = NULL;
    for (ptrdiff_t i = 0; i < arrlen(phased) && !st; i++) {
      nm = phased[i]->name;
      hlo_instr **subs = NULL;
      st = cvl_phases(c, phased[i], &subs);
      for (ptrdiff_t j = 0; j < arrlen(subs); j++)
        if (cvl_plan(subs[j], &T, &Q)) arrput(convs, subs[j]);
      arrfree(subs);
      if (changed) *changed = true;
    }
    for (ptrdiff_t i = 0; i < arrlen(convs) && !st; i++) {
      nm = convs[i]->name;
      st = cvl_rewrite(c, convs[i]);
      if (changed) *changed = true;
    }
    arrfree(convs);
    arrfree(phased);
    if (st)
      return hj__err(m->ctx, st, "pass conv-lower: %s rewriting '%s'",
                     st == HJ_ERR_OOM ? "out of memory" : "a shape that does not fit", nm);
  }
  return HJ_OK;
}
