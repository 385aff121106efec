/* api/builder_conv.c — convolution and pooling in hlojit.h (section "convolution and
   pooling"): hj_conv_general (XLA's convolution, every field), and the layers a C user
   writes with it: hj_conv (NHWC/NCHW, stride, "same"/"valid"/explicit padding, dilation,
   groups, bias), hj_conv_transpose (jax.lax.conv_transpose's definition), hj_max_pool and
   hj_avg_pool (reduce-window). Every shape is checked here or by shape inference, with
   messages that name the function and the shapes.

   Padding "same" (XLA's and TensorFlow's rule): out = ceil(in / stride), the total padding
   max((out - 1) * stride + dilated window - in, 0) split with the extra element at the
   end. conv_transpose: the input is dilated by the stride, the kernel not transposed
   (transpose_kernel=False), pads per dim from jax's _conv_transpose_padding on the dilated
   kernel size k: "same": total k + s - 2, low k - 1 when s > k - 1 else ceil(total / 2);
   "valid": total k + s - 2 + max(k - s, 0), low k - 1. */
#include "api.h"

static bool bcv_has(hj_tensor_t t) { return t.graph != NULL; }
static hj_tensor_t bcv_poison(hj_graph_t *g) { return (hj_tensor_t){ g, -1 }; }

/* Spatial dims and pads of an NHWC / NCHW input of rank |r|. */
static void bcv_layout(hj_conv_layout_t l, int r, int64_t *in_spatial, int64_t *batch, int64_t *feat) {
  *batch = 0;
  *feat = l == HJ_NCHW ? 1 : r - 1;
  for (int i = 0; i < r - 2; i++) in_spatial[i] = l == HJ_NCHW ? 2 + i : 1 + i;
}

static int64_t bcv_at(const int64_t *v, int i, int64_t dflt) { return v ? v[i] : dflt; }

/* lo/hi of |mode| for one dim: input |in|, dilated window |k|, stride |s|; false when the
   arithmetic overflows (absurd strides or windows). */
static bool bcv_pads(hj_pad_mode_t mode, int64_t in, int64_t k, int64_t s, const int64_t *plo,
                     const int64_t *phi, int i, int64_t *lo, int64_t *hi) {
  *lo = *hi = 0;
  if (mode == HJ_PAD_EXPLICIT) {
    *lo = bcv_at(plo, i, 0), *hi = bcv_at(phi, i, 0);
  } else if (mode == HJ_PAD_SAME) {
    int64_t out = in / s + (in % s != 0), total;
    if (out < 1) return true;
    if (!hlo_mul_ok(out - 1, s, &total) || !hlo_add_ok(total, k - in, &total)) return false;
    if (total < 0) total = 0;
    *lo = total / 2, *hi = total - total / 2;
  }
  return true;
}

/* (n - 1) * d + 1 for n >= 1, checked. */
static bool bcv_dilated(int64_t n, int64_t d, int64_t *out) {
  return n >= 1 && hlo_mul_ok(n - 1, d, out) && hlo_add_ok(*out, 1, out);
}

static hj_tensor_t bcv_general(const char *op, hj_tensor_t x, hj_tensor_t w, const hj_conv_general_t *p) {
  hj_graph_t *g;
  hlo_instr *a[2];
  hj_tensor_t xw[2] = { x, w };
  if (!hj__operands(op, xw, 2, &g, a)) return bcv_poison(g);
  int ns = p ? p->n_spatial : -1;
  if (!p || ns < 0 || ns > HJ_MAX_RANK - 2)
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: %s", op, p ? "n_spatial must be 0 to 6" : "NULL parameters");
  for (int i = 0; i < ns; i++)
    if (p->stride[i] < 0 || p->lhs_dilation[i] < 0 || p->rhs_dilation[i] < 0)
      return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: stride and dilations of spatial dim %d must be >= 1 (0: 1)", op, i);
  hlo_instr *ins = hj__op_begin(g, op, HLO_OP_CONVOLUTION, NULL, a, 2);
  if (!ins) return bcv_poison(g);
  hlo_module *m = g->m;
  int64_t size[HJ_MAX_RANK], st[HJ_MAX_RANK], ld[HJ_MAX_RANK], rd[HJ_MAX_RANK], rv[HJ_MAX_RANK];
  const hlo_shape *ks = &a[1]->shape;
  for (int i = 0; i < ns; i++) {
    int64_t kd = p->k_spatial[i];
    size[i] = kd >= 0 && kd < ks->rank ? ks->dims[kd] : 1;   /* a bad dim: shape inference says so */
    st[i] = p->stride[i] ? p->stride[i] : 1;
    ld[i] = p->lhs_dilation[i] ? p->lhs_dilation[i] : 1;
    rd[i] = p->rhs_dilation[i] ? p->rhs_dilation[i] : 1;
    rv[i] = p->reversal[i] ? 1 : 0;
  }
  hlo_window *hw = &ins->window;
  hw->size = hlo_ints_dup(m, size, ns);
  hw->stride = hlo_ints_dup(m, st, ns);
  hw->pad_lo = hlo_ints_dup(m, p->pad_lo, ns);
  hw->pad_hi = hlo_ints_dup(m, p->pad_hi, ns);
  hw->base_dilation = hlo_ints_dup(m, ld, ns);
  hw->window_dilation = hlo_ints_dup(m, rd, ns);
  hw->reversal = hlo_ints_dup(m, rv, ns);
  hlo_conv_dims *cd = &ins->conv;
  cd->in_batch = p->in_batch, cd->in_feature = p->in_feature;
  cd->k_in = p->k_in, cd->k_out = p->k_out;
  cd->out_batch = p->out_batch, cd->out_feature = p->out_feature;
  cd->in_spatial = hlo_ints_dup(m, p->in_spatial, ns);
  cd->k_spatial = hlo_ints_dup(m, p->k_spatial, ns);
  cd->out_spatial = hlo_ints_dup(m, p->out_spatial, ns);
  cd->feature_groups = p->feature_group_count ? p->feature_group_count : 1;
  cd->batch_groups = p->batch_group_count ? p->batch_group_count : 1;
  if (ns > 0 && (!hw->size.v || !hw->stride.v || !hw->pad_lo.v || !hw->pad_hi.v || !hw->base_dilation.v ||
                 !hw->window_dilation.v || !hw->reversal.v || !cd->in_spatial.v || !cd->k_spatial.v ||
                 !cd->out_spatial.v))
    return hj__graph_fail(g, HJ_ERR_OOM, "%s: out of memory", op);
  return hj__op_finish(g, op, ins);
}

hj_tensor_t hj_conv_general(hj_tensor_t x, hj_tensor_t w, const hj_conv_general_t *p) {
  return bcv_general("hj_conv_general", x, w, p);
}

/* The general parameters of an NHWC/NCHW convolution of |x| (rank r) with |w|; pads from
   |o| with the dilated kernel sizes; lhs dilation |ld| (conv_transpose's stride) or NULL. */
static bool bcv_params(hj_graph_t *g, const char *op, hj_tensor_t x, hj_tensor_t w, const hj_conv_opts_t *o,
                       bool transpose, hj_conv_general_t *p) {
  char b0[96], b1[96];
  hj_shape_t xs = hj_tensor_shape(x), ws = hj_tensor_shape(w);
  int r = xs.rank, ns = r - 2;
  memset(p, 0, sizeof *p);
  if (r < 3 || ws.rank != r || (o->layout != HJ_NHWC && o->layout != HJ_NCHW) ||
      (o->padding != HJ_PAD_VALID && o->padding != HJ_PAD_SAME && o->padding != HJ_PAD_EXPLICIT) ||
      o->groups < 0) {
    hj__graph_fail(g, HJ_ERR_SHAPE, "%s: x %s and w %s must both have rank 3 to 8 (batch, features and 1 to 6 "
                   "spatial dims); layout, padding and groups must be valid", op, hj__tensor_str(x, b0, sizeof b0),
                   hj__tensor_str(w, b1, sizeof b1));
    return false;
  }
  p->n_spatial = ns;
  bcv_layout(o->layout, r, p->in_spatial, &p->in_batch, &p->in_feature);
  p->out_batch = p->in_batch, p->out_feature = p->in_feature;
  memcpy(p->out_spatial, p->in_spatial, sizeof p->in_spatial);
  for (int i = 0; i < ns; i++) p->k_spatial[i] = o->layout == HJ_NCHW ? 2 + i : i;   /* HWIO / OIHW */
  p->k_in = o->layout == HJ_NCHW ? 1 : ns;
  p->k_out = o->layout == HJ_NCHW ? 0 : ns + 1;
  p->feature_group_count = o->groups ? o->groups : 1;
  for (int i = 0; i < ns; i++) {
    int64_t s = bcv_at(o->stride, i, 1), d = bcv_at(o->dilation, i, 1);
    if (s < 1 || d < 1) {
      hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: stride %lld and dilation %lld of spatial dim %d must be >= 1", op,
                     (long long)s, (long long)d, i);
      return false;
    }
    int64_t k, in = xs.dims[p->in_spatial[i]], total = 0;
    bool ok = bcv_dilated(ws.dims[p->k_spatial[i]], d, &k);
    p->rhs_dilation[i] = d;
    if (ok && !transpose) {
      p->stride[i] = s;
      ok = bcv_pads(o->padding, in, k, s, o->pad_lo, o->pad_hi, i, &p->pad_lo[i], &p->pad_hi[i]);
    } else if (ok) {
      p->lhs_dilation[i] = s;
      ok = hlo_add_ok(k, s, &total) && hlo_add_ok(total, o->padding == HJ_PAD_VALID && k > s ? k - s - 2 : -2, &total);
      int64_t lo = o->padding == HJ_PAD_SAME && s <= k - 1 ? total / 2 + total % 2 : k - 1;
      if (o->padding == HJ_PAD_EXPLICIT) ok = hlo_add_ok(lo = bcv_at(o->pad_lo, i, 0), bcv_at(o->pad_hi, i, 0), &total);
      p->pad_lo[i] = lo, p->pad_hi[i] = total - lo;
    }
    if (!ok) {
      hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: the window of spatial dim %d (kernel %lld, stride %lld, dilation "
                     "%lld, input %lld) overflows", op, i, (long long)ws.dims[p->k_spatial[i]], (long long)s,
                     (long long)d, (long long)in);
      return false;
    }
  }
  return true;
}

static hj_tensor_t bcv_conv(const char *op, hj_tensor_t x, hj_tensor_t w, const hj_conv_opts_t *opts, bool transpose) {
  hj_conv_opts_t dflt;
  memset(&dflt, 0, sizeof dflt);
  const hj_conv_opts_t *o = opts ? opts : &dflt;
  hj_graph_t *g;
  hlo_instr *a[3];
  hj_tensor_t xwb[3] = { x, w, o->bias };
  if (!hj__operands(op, xwb, bcv_has(o->bias) ? 3 : 2, &g, a)) return bcv_poison(g);
  hj_conv_general_t p;
  if (!bcv_params(g, op, x, w, o, transpose, &p)) return bcv_poison(g);
  hj_tensor_t y = bcv_general(op, x, w, &p);
  if (!bcv_has(o->bias) || y.id < 0) return y;
  hj_shape_t bs = hj_tensor_shape(o->bias), ys = hj_tensor_shape(y);
  char b0[96], b1[96];
  if (bs.rank != 1 || bs.dims[0] != ys.dims[p.out_feature] || hj_tensor_dtype(o->bias) != hj_tensor_dtype(y))
    return hj__graph_fail(g, HJ_ERR_SHAPE, "%s: the bias %s must be a vector of the %lld output features, of the "
                          "output's type (output %s)", op, hj__tensor_str(o->bias, b0, sizeof b0),
                          (long long)ys.dims[p.out_feature], hj__tensor_str(y, b1, sizeof b1));
  int64_t fd = p.out_feature;
  return hj_add(y, hj_broadcast_in_dim(o->bias, ys, &fd, 1));
}

hj_tensor_t hj_conv(hj_tensor_t x, hj_tensor_t w, const hj_conv_opts_t *opts) {
  return bcv_conv("hj_conv", x, w, opts, false);
}

hj_tensor_t hj_conv_transpose(hj_tensor_t x, hj_tensor_t w, const hj_conv_opts_t *opts) {
  return bcv_conv("hj_conv_transpose", x, w, opts, true);
}

/* ---- pooling ---------------------------------------------------------------------------- */

static hj_tensor_t bcv_pool(const char *op, hj_tensor_t x, const hj_pool_opts_t *o, bool avg) {
  hj_graph_t *g;
  hlo_instr *a;
  char b0[96];
  if (!hj__operands(op, &x, 1, &g, &a)) return bcv_poison(g);
  hj_shape_t xs = hj_tensor_shape(x);
  int r = xs.rank;
  if (!o || !o->window || r < 3 || (o->layout != HJ_NHWC && o->layout != HJ_NCHW) ||
      (o->padding != HJ_PAD_VALID && o->padding != HJ_PAD_SAME && o->padding != HJ_PAD_EXPLICIT))
    return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: needs options with a window, a valid layout and padding, "
                          "and x of rank 3 to 8 (x %s)", op, hj__tensor_str(x, b0, sizeof b0));
  int64_t sp[HJ_MAX_RANK], batch, feat, win[HJ_MAX_RANK], st[HJ_MAX_RANK], lo[HJ_MAX_RANK] = { 0 },
          hi[HJ_MAX_RANK] = { 0 };
  bcv_layout(o->layout, r, sp, &batch, &feat);
  for (int d = 0; d < r; d++) win[d] = st[d] = 1;
  for (int i = 0; i < r - 2; i++) {
    int64_t d = sp[i], k = o->window[i], s = bcv_at(o->stride, i, k);
    if (k < 1 || s < 1)
      return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: window %lld and stride %lld of spatial dim %d must be >= 1",
                            op, (long long)k, (long long)s, i);
    win[d] = k, st[d] = s;
    if (!bcv_pads(o->padding, xs.dims[d], k, s, o->pad_lo, o->pad_hi, i, &lo[d], &hi[d]))
      return hj__graph_fail(g, HJ_ERR_INVALID_ARG, "%s: the window %lld / stride %lld of spatial dim %d overflows",
                            op, (long long)k, (long long)s, i);
  }
  hj_dtype_t t = hj_tensor_dtype(x);
  if (!avg) return hj_reduce_window(x, HJ_RED_MAX, win, st, lo, hi);
  if (t != HJ_F16 && t != HJ_BF16 && t != HJ_F32 && t != HJ_F64)
    return hj__graph_fail(g, HJ_ERR_SHAPE, "%s: average pooling needs a float x, got %s", op,
                          hj__tensor_str(x, b0, sizeof b0));
  hj_tensor_t sum = hj_reduce_window(x, HJ_RED_SUM, win, st, lo, hi);
  if (!o->exclude_pad) {
    double n = 1;
    for (int d = 0; d < r; d++) n *= (double)win[d];
    return hj_div(sum, hj_broadcast_to(hj_scalar(g, t, n), hj_tensor_shape(sum)));
  }
  /* divide by the taps inside the input: the same window over ones */
  hj_tensor_t cnt = hj_reduce_window(hj_full(g, t, xs, 1.0), HJ_RED_SUM, win, st, lo, hi);
  return hj_div(sum, cnt);
}

hj_tensor_t hj_max_pool(hj_tensor_t x, const hj_pool_opts_t *opts) { return bcv_pool("hj_max_pool", x, opts, false); }
hj_tensor_t hj_avg_pool(hj_tensor_t x, const hj_pool_opts_t *opts) { return bcv_pool("hj_avg_pool", x, opts, true); }
