/* model.c — GPT-2's layers as graph-building functions, and gpt2_build, which assembles
   them into the prefill and decode graphs (model.h has the network, the attention scheme
   and the parameter / output order; this file follows it line by line).

   // L layers, C channels, NH heads, hs head size, n rows, T prefill bucket, Tc cache entries

   Every function takes and returns hj_tensor_t values and never fails loudly: a bad shape
   poisons the result, the graph records the first error, and gpt2_build returns
   hj_graph_status(). */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

hj_tensor_t gpt2_embed(hj_tensor_t wte, hj_tensor_t wpe_rows, hj_tensor_t ids) {
  return hj_add(hj_embedding(wte, ids), wpe_rows); // (n, C)
}

hj_tensor_t gpt2_norm(hj_tensor_t x, hj_tensor_t w, hj_tensor_t b) {
  return hj_layer_norm(x, w, b, GPT2_LN_EPS);
}

hj_tensor_t gpt2_linear(hj_tensor_t x, hj_tensor_t w, hj_tensor_t b, gpt2_layout layout) {
  return hj_linear(x, w, b, layout == GPT2_OUT_IN   ? HJ_LINEAR_OUT_IN
                            : layout == GPT2_PANELS ? HJ_LINEAR_PANELS
                                                    : HJ_LINEAR_IN_OUT);
}

hj_tensor_t gpt2_mlp(hj_tensor_t h, const gpt2_lparams *p) {
  hj_tensor_t f = hj_gelu_tanh(gpt2_linear(h, p->fcw, p->fcb, p->lay_fc)); // (n, 4C)
  return gpt2_linear(f, p->fcprojw, p->fcprojb, p->lay_fcproj);                // (n, C)
}

/* (T, C) -> (NH, T, hs), or (NH, hs, T) with |perm| {1, 2, 0}. T may be a dynamic dim
   (the JIT's): reshape targets are static, so it is written -1 (inferred). */
static hj_tensor_t heads(hj_tensor_t t, int NH, const int64_t *perm) {
  int64_t C = hj_tensor_shape(t).dims[1];
  return hj_transpose(hj_reshape(t, HJ_SHAPE(-1, NH, C / NH)), perm, 3);
}

static hj_tensor_t scale_scores(hj_tensor_t s, int64_t hs) {
  hj_graph_t *g = s.graph;
  return hj_mul(s, hj_scalar(g, HJ_F32, 1.0 / sqrt((double)hs)));
}

hj_tensor_t gpt2_attn_prefill(hj_tensor_t qkv, int NH, hj_tensor_t *k, hj_tensor_t *v) {
  hj_graph_t *g = qkv.graph;
  hj_shape_t s = hj_tensor_shape(qkv);
  int64_t T = llabs(s.dims[0]), C = s.dims[1] / 3, hs = C / NH; // T: the bucket
  hj_tensor_t part[3] = {HJ_NONE, HJ_NONE, HJ_NONE};
  const int64_t sizes[3] = {C, C, C};
  if (hj_unpack(hj_split(qkv, 1, sizes, 3), part, 3)) return part[0];
  static const int64_t hd[3] = {1, 0, 2}, kt[3] = {1, 2, 0};
  hj_tensor_t q = heads(part[0], NH, hd); // (NH, T, hs)
  *k = heads(part[1], NH, kt);            // (NH, hs, T)
  *v = heads(part[2], NH, hd);            // (NH, T, hs)
  hj_tensor_t att = scale_scores(hj_matmul(q, *k), hs); // (NH, T, T)
  att = hj_select(hj_causal_mask(g, T), att, hj_scalar(g, HJ_F32, -INFINITY));
  att = hj_softmax(att, 2);
  hj_tensor_t y = hj_matmul(att, *v); // (NH, T, hs)
  return hj_reshape(hj_transpose(y, hd, 3), HJ_SHAPE(-1, C));
}

hj_tensor_t gpt2_attn_decode(hj_tensor_t qkv, hj_tensor_t kc, hj_tensor_t vc, hj_tensor_t pos,
                             int NH, hj_tensor_t *kc_new, hj_tensor_t *vc_new) {
  hj_graph_t *g = qkv.graph;
  int64_t C = hj_tensor_shape(qkv).dims[1] / 3, hs = C / NH;
  int64_t Tc = hj_tensor_shape(vc).dims[1];
  const int64_t q0[2] = {0, 0}, q1[2] = {1, C}, k0[2] = {0, C}, k1[2] = {1, 2 * C};
  const int64_t v0[2] = {0, 2 * C}, v1[2] = {1, 3 * C};
  hj_tensor_t q = hj_reshape(hj_slice(qkv, q0, q1, NULL), HJ_SHAPE(NH, 1, hs)); // (NH, 1, hs)
  hj_tensor_t kn = hj_reshape(hj_slice(qkv, k0, k1, NULL), HJ_SHAPE(NH, hs, 1));
  hj_tensor_t vn = hj_reshape(hj_slice(qkv, v0, v1, NULL), HJ_SHAPE(NH, 1, hs));
  hj_tensor_t zero = hj_scalar(g, HJ_S32, 0);
  hj_tensor_t at_k[3] = {zero, zero, pos}, at_v[3] = {zero, pos, zero};
  *kc_new = hj_dynamic_update_slice(kc, kn, at_k);                  // (NH, hs, Tc)
  *vc_new = hj_dynamic_update_slice(vc, vn, at_v);                  // (NH, Tc, hs)
  hj_tensor_t s = scale_scores(hj_matmul(q, *kc_new), hs);          // (NH, 1, Tc)
  hj_tensor_t j = hj_iota(g, HJ_S32, HJ_SHAPE(NH, 1, Tc), 2);       // key position
  s = hj_select(hj_compare(j, pos, HJ_CMP_LE), s, hj_scalar(g, HJ_F32, -INFINITY));
  hj_tensor_t y = hj_matmul(hj_softmax(s, 2), *vc_new);             // (NH, 1, hs)
  return hj_reshape(y, HJ_SHAPE(1, C));
}

hj_tensor_t gpt2_block_prefill(hj_tensor_t x, const gpt2_lparams *p, int NH, hj_tensor_t *k,
                               hj_tensor_t *v) {
  hj_tensor_t qkv = gpt2_linear(gpt2_norm(x, p->ln1w, p->ln1b), p->qkvw, p->qkvb, p->lay_qkv);
  hj_tensor_t y = gpt2_attn_prefill(qkv, NH, k, v);
  x = hj_add(x, gpt2_linear(y, p->attprojw, p->attprojb, p->lay_attproj));
  return hj_add(x, gpt2_mlp(gpt2_norm(x, p->ln2w, p->ln2b), p));
}

hj_tensor_t gpt2_block_decode(hj_tensor_t x, const gpt2_lparams *p, int NH, hj_tensor_t kc,
                              hj_tensor_t vc, hj_tensor_t pos, hj_tensor_t *kc_new,
                              hj_tensor_t *vc_new) {
  hj_tensor_t qkv = gpt2_linear(gpt2_norm(x, p->ln1w, p->ln1b), p->qkvw, p->qkvb, p->lay_qkv);
  hj_tensor_t y = gpt2_attn_decode(qkv, kc, vc, pos, NH, kc_new, vc_new);
  x = hj_add(x, gpt2_linear(y, p->attprojw, p->attprojb, p->lay_attproj));
  return hj_add(x, gpt2_mlp(gpt2_norm(x, p->ln2w, p->ln2b), p));
}

hj_tensor_t gpt2_head(hj_tensor_t x, hj_tensor_t lnfw, hj_tensor_t lnfb, hj_tensor_t lm_head,
                      gpt2_layout layout) {
  return gpt2_linear(gpt2_norm(x, lnfw, lnfb), lm_head, HJ_NONE, layout); // (1, Vp)
}

/* ---- graphs ---------------------------------------------------------------------------- */

static hj_shape_t shape_of(const gpt2_tensor *t) {
  if (t->layout == GPT2_PANELS) // (in/kc, out/nr, kc, nr)
    return HJ_SHAPE(t->shape[0] / t->panel[0], t->shape[1] / t->panel[1], t->panel[0], t->panel[1]);
  return t->ndim == 2 ? HJ_SHAPE(t->shape[0], t->shape[1]) : HJ_SHAPE(t->shape[0]);
}

/* A weight's parameter type: the session keeps some matrices in bf16 (session.h, WEIGHTS). */
static hj_dtype_t dtype_of(const gpt2_tensor *t) { return t->dtype == GPT2_BF16 ? HJ_BF16 : HJ_F32; }

static void decl(gpt2_param *d, int *n, const char *name, hj_dtype_t t, hj_shape_t s) {
  if (d) {
    snprintf(d[*n].name, sizeof d[*n].name, "%s", name);
    d[*n].dtype = t;
    d[*n].shape = s;
  }
  (*n)++;
}

int gpt2_params(const gpt2_weights *w, const gpt2_spec *sp, gpt2_param *d, gpt2_sig *sig) {
  const int64_t C = w->cfg.C, NH = w->cfg.NH, hs = C / NH;
  const int64_t n = sp->phase == GPT2_PREFILL ? sp->n : 1;
  const int64_t rows = sp->phase == GPT2_PREFILL && sp->dyn_rows ? HJ_DYN(n) : n;
  const gpt2_layer *lw = &w->layer[0]; // every layer has layer 0's shapes
  const gpt2_tensor *t[GPT2_LAYER_PARAMS] = {
      &lw->ln1w, &lw->ln1b, &lw->qkvw, &lw->qkvb, &lw->attprojw, &lw->attprojb,
      &lw->ln2w, &lw->ln2b, &lw->fcw,  &lw->fcb,  &lw->fcprojw,  &lw->fcprojb};
  static const char *const nm[GPT2_LAYER_PARAMS] = {
      "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
      "ln2w", "ln2b", "fcw",  "fcb",  "fcprojw",  "fcprojb"};
  int k = 0;
  char name[40];
  *sig = (gpt2_sig){.x_in = -1, .pos = -1, .wte = -1, .wpe = -1, .lnfw = -1, .lnfb = -1,
                    .lm_head = -1, .layer0 = -1, .cache0 = -1, .main_out = -1, .kv0 = -1,
                    .emb = -1, .res0 = -1};
  sig->x_in = k;
  if (sp->embed) decl(d, &k, "ids", HJ_S32, HJ_SHAPE(rows));
  else decl(d, &k, "x", HJ_F32, HJ_SHAPE(rows, C));
  sig->pos = k;
  decl(d, &k, "pos", HJ_S32, HJ_SCALAR);
  if (sp->embed || (sp->head && !sp->lm_head_t)) {
    sig->wte = k;
    decl(d, &k, "wte", dtype_of(&w->wte), shape_of(&w->wte));
  }
  if (sp->embed) {
    sig->wpe = k;
    decl(d, &k, "wpe", dtype_of(&w->wpe), shape_of(&w->wpe));
  }
  if (sp->head) {
    sig->lnfw = k;
    decl(d, &k, "lnfw", HJ_F32, shape_of(&w->lnfw));
    sig->lnfb = k;
    decl(d, &k, "lnfb", HJ_F32, shape_of(&w->lnfb));
    if (sp->lm_head_t) {
      sig->lm_head = k;
      const int64_t Vp = w->wte.shape[0], kc = sp->lm_head_panel[0], nr = sp->lm_head_panel[1];
      decl(d, &k, "lm_head", sp->lm_head_bf16 ? HJ_BF16 : HJ_F32,
           kc ? HJ_SHAPE(C / kc, Vp / nr, kc, nr) : HJ_SHAPE(C, Vp));
    }
  }
  sig->layer0 = k;
  for (int b = 0; b < sp->n_blocks; b++)
    for (int i = 0; i < GPT2_LAYER_PARAMS; i++) {
      snprintf(name, sizeof name, "b%d.%s", b, nm[i]);
      decl(d, &k, name, dtype_of(t[i]), shape_of(t[i]));
    }
  if (sp->phase == GPT2_DECODE) {
    sig->cache0 = k;
    for (int b = 0; b < sp->n_blocks; b++) {
      snprintf(name, sizeof name, "b%d.kc", b);
      decl(d, &k, name, HJ_F32, HJ_SHAPE(NH, hs, sp->Tc));
      snprintf(name, sizeof name, "b%d.vc", b);
      decl(d, &k, name, HJ_F32, HJ_SHAPE(NH, sp->Tc, hs));
    }
  }
  sig->nin = k;
  // Outputs: main, the blocks' k and v (or updated caches), then emb and the residuals.
  int o = 0;
  sig->main_out = o++;
  sig->kv0 = o;
  o += 2 * sp->n_blocks;
  if (sp->verify) {
    if (sp->embed) sig->emb = o++;
    sig->res0 = o;
    o += sp->n_blocks;
  }
  sig->nout = o;
  return k;
}

/* Block |b|'s parameter tensors and its matrices' layouts (|w|'s layer 0). */
static void block_params(const gpt2_weights *w, const hj_tensor_t *p, gpt2_lparams *lp) {
  const gpt2_layer *lw = &w->layer[0];
  *lp = (gpt2_lparams){.ln1w = p[0], .ln1b = p[1], .qkvw = p[2], .qkvb = p[3],
                       .attprojw = p[4], .attprojb = p[5], .ln2w = p[6], .ln2b = p[7],
                       .fcw = p[8], .fcb = p[9], .fcprojw = p[10], .fcprojb = p[11],
                       .lay_qkv = lw->qkvw.layout, .lay_attproj = lw->attprojw.layout,
                       .lay_fc = lw->fcw.layout, .lay_fcproj = lw->fcprojw.layout};
}

hj_status gpt2_body(hj_graph_t *g, const gpt2_weights *w, const gpt2_spec *sp,
                    const hj_tensor_t *p, const gpt2_sig *sig) {
  const int64_t C = w->cfg.C, NH = w->cfg.NH;
  const int nb = sp->n_blocks;
  const hj_tensor_t none = HJ_NONE;
  hj_tensor_t x_in = p[sig->x_in], pos = p[sig->pos];
  hj_tensor_t wte = sig->wte >= 0 ? p[sig->wte] : none, wpe = sig->wpe >= 0 ? p[sig->wpe] : none;
  // Rows fed: the bucket, also when the JIT made the dim dynamic (its shape is -bucket).
  const int64_t n = llabs(hj_tensor_shape(x_in).dims[0]);
  hj_tensor_t x = x_in, zero = hj_scalar(g, HJ_S32, 0);
  if (sp->embed) {
    hj_tensor_t rows;
    if (sp->phase == GPT2_DECODE) { // the row of position pos
      hj_tensor_t st[2] = {pos, zero};
      const int64_t sz[2] = {1, C};
      rows = hj_dynamic_slice(wpe, st, sz);
    } else { // positions 0..n-1
      const int64_t s0[2] = {0, 0}, s1[2] = {n, C};
      rows = hj_slice(wpe, s0, s1, NULL);
    }
    x = gpt2_embed(wte, rows, x_in); // (n, C)
  }
  hj_tensor_t emb = x, k[nb > 0 ? nb : 1], v[nb > 0 ? nb : 1], res[nb > 0 ? nb : 1];
  for (int b = 0; b < nb; b++) {
    gpt2_lparams lp;
    block_params(w, p + sig->layer0 + GPT2_LAYER_PARAMS * b, &lp);
    x = sp->phase == GPT2_PREFILL
            ? gpt2_block_prefill(x, &lp, (int)NH, &k[b], &v[b])
            : gpt2_block_decode(x, &lp, (int)NH, p[sig->cache0 + 2 * b],
                                p[sig->cache0 + 2 * b + 1], pos, &k[b], &v[b]);
    res[b] = x;
  }
  hj_tensor_t out = x;
  if (sp->head) {
    hj_tensor_t row = x;
    if (sp->phase == GPT2_PREFILL) { // the row asked for
      hj_tensor_t st[2] = {pos, zero};
      const int64_t one_row[2] = {1, C};
      row = hj_dynamic_slice(x, st, one_row); // (1, C)
    }
    hj_tensor_t lnfw = p[sig->lnfw], lnfb = p[sig->lnfb];
    const gpt2_layout lay = sp->lm_head_panel[0] ? GPT2_PANELS : GPT2_IN_OUT;
    out = sp->lm_head_t ? gpt2_head(row, lnfw, lnfb, p[sig->lm_head], lay) // (1, Vp)
                        : gpt2_head(row, lnfw, lnfb, wte, GPT2_OUT_IN);
  }

  // Outputs, in the order gpt2_params gave |sig|.
  hj_status st = hj_graph_output(g, out);
  for (int b = 0; b < nb && !st; b++) { // decode: the caches, updated in place
    if (sp->phase == GPT2_DECODE) {
      st = hj_graph_output_aliased(g, k[b], p[sig->cache0 + 2 * b]);
      if (!st) st = hj_graph_output_aliased(g, v[b], p[sig->cache0 + 2 * b + 1]);
    } else {
      st = hj_graph_output(g, k[b]);
      if (!st) st = hj_graph_output(g, v[b]);
    }
  }
  if (sp->verify && !st) {
    if (sp->embed) st = hj_graph_output(g, emb);
    for (int b = 0; b < nb && !st; b++) st = hj_graph_output(g, res[b]);
  }
  hj_status gs = hj_graph_status(g);
  return gs ? gs : st;
}

hj_status gpt2_build(hj_graph_t *g, const gpt2_weights *w, const gpt2_spec *sp, gpt2_sig *sig) {
  int n = gpt2_params(w, sp, NULL, sig);
  gpt2_param *d = malloc(sizeof *d * (size_t)n);
  hj_tensor_t *p = malloc(sizeof *p * (size_t)n);
  hj_status st = HJ_ERR_OOM;
  if (d && p) {
    gpt2_params(w, sp, d, sig);
    for (int i = 0; i < n; i++) p[i] = hj_param(g, d[i].dtype, d[i].shape, d[i].name);
    st = gpt2_body(g, w, sp, p, sig);
  }
  free(d);
  free(p);
  return st;
}
