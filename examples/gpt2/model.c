/* model.c — GPT-2's layers as graph-building functions, and gpt2_build, which assembles
   them into the prefill and decode graphs (model.h has the network, the attention scheme
   and the parameter / output order; this file follows it line by line).

   // L layers, C channels, NH heads, hs head size, n rows, T prefill bucket, Tc cache entries

   Every function takes and returns hj_tensor_t values and never fails loudly: a bad shape
   poisons the result, the graph records the first error, and gpt2_build returns
   hj_graph_status(). */
#include "model.h"

#include <math.h>

hj_tensor_t gpt2_embed(hj_tensor_t wte, hj_tensor_t wpe_rows, hj_tensor_t ids) {
  return hj_add(hj_embedding(wte, ids), wpe_rows); // (n, C)
}

hj_tensor_t gpt2_norm(hj_tensor_t x, hj_tensor_t w, hj_tensor_t b) {
  return hj_layer_norm(x, w, b, GPT2_LN_EPS);
}

hj_tensor_t gpt2_linear(hj_tensor_t x, hj_tensor_t w, hj_tensor_t b, gpt2_layout layout) {
  return hj_linear(x, w, b, layout == GPT2_OUT_IN ? HJ_LINEAR_OUT_IN : HJ_LINEAR_IN_OUT);
}

hj_tensor_t gpt2_mlp(hj_tensor_t h, const gpt2_lparams *p) {
  hj_tensor_t f = hj_gelu_tanh(gpt2_linear(h, p->fcw, p->fcb, p->lay_fc)); // (n, 4C)
  return gpt2_linear(f, p->fcprojw, p->fcprojb, p->lay_fcproj);                // (n, C)
}

/* (T, C) -> (NH, T, hs), or (NH, hs, T) with |perm| {1, 2, 0}. */
static hj_tensor_t heads(hj_tensor_t t, int64_t T, int NH, const int64_t *perm) {
  int64_t C = hj_tensor_shape(t).dims[1];
  return hj_transpose(hj_reshape(t, HJ_SHAPE(T, NH, C / NH)), perm, 3);
}

static hj_tensor_t scale_scores(hj_tensor_t s, int64_t hs) {
  hj_graph_t *g = s.graph;
  return hj_mul(s, hj_scalar(g, HJ_F32, 1.0 / sqrt((double)hs)));
}

hj_tensor_t gpt2_attn_prefill(hj_tensor_t qkv, int NH, hj_tensor_t *k, hj_tensor_t *v) {
  hj_graph_t *g = qkv.graph;
  hj_shape_t s = hj_tensor_shape(qkv);
  int64_t T = s.dims[0], C = s.dims[1] / 3, hs = C / NH;
  hj_tensor_t part[3] = {HJ_NONE, HJ_NONE, HJ_NONE};
  const int64_t sizes[3] = {C, C, C};
  if (hj_unpack(hj_split(qkv, 1, sizes, 3), part, 3)) return part[0];
  static const int64_t hd[3] = {1, 0, 2}, kt[3] = {1, 2, 0};
  hj_tensor_t q = heads(part[0], T, NH, hd); // (NH, T, hs)
  *k = heads(part[1], T, NH, kt);            // (NH, hs, T)
  *v = heads(part[2], T, NH, hd);            // (NH, T, hs)
  hj_tensor_t att = scale_scores(hj_matmul(q, *k), hs); // (NH, T, T)
  att = hj_select(hj_causal_mask(g, T), att, hj_scalar(g, HJ_F32, -INFINITY));
  att = hj_softmax(att, 2);
  hj_tensor_t y = hj_matmul(att, *v); // (NH, T, hs)
  return hj_reshape(hj_transpose(y, hd, 3), HJ_SHAPE(T, C));
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

static hj_tensor_t param_like(hj_graph_t *g, const gpt2_tensor *t, const char *name) {
  hj_shape_t s = t->ndim == 2 ? HJ_SHAPE(t->shape[0], t->shape[1]) : HJ_SHAPE(t->shape[0]);
  return hj_param(g, HJ_F32, s, name);
}

/* Block |b|'s 12 parameters, with layer 0's shapes (every layer has the same). */
static void declare_block(hj_graph_t *g, const gpt2_layer *lw, int b, gpt2_lparams *p) {
  const gpt2_tensor *t[GPT2_LAYER_PARAMS] = {
      &lw->ln1w, &lw->ln1b, &lw->qkvw, &lw->qkvb, &lw->attprojw, &lw->attprojb,
      &lw->ln2w, &lw->ln2b, &lw->fcw,  &lw->fcb,  &lw->fcprojw,  &lw->fcprojb};
  hj_tensor_t *dst[GPT2_LAYER_PARAMS] = {
      &p->ln1w, &p->ln1b, &p->qkvw, &p->qkvb, &p->attprojw, &p->attprojb,
      &p->ln2w, &p->ln2b, &p->fcw,  &p->fcb,  &p->fcprojw,  &p->fcprojb};
  static const char *const nm[GPT2_LAYER_PARAMS] = {
      "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
      "ln2w", "ln2b", "fcw",  "fcb",  "fcprojw",  "fcprojb"};
  char name[32];
  for (int i = 0; i < GPT2_LAYER_PARAMS; i++) { // one statement each: parameter order
    snprintf(name, sizeof name, "b%d.%s", b, nm[i]);
    *dst[i] = param_like(g, t[i], name);
  }
  p->lay_qkv = lw->qkvw.layout, p->lay_attproj = lw->attprojw.layout;
  p->lay_fc = lw->fcw.layout, p->lay_fcproj = lw->fcprojw.layout;
}

hj_status gpt2_build(hj_graph_t *g, const gpt2_weights *w, const gpt2_spec *sp, gpt2_sig *sig) {
  const gpt2_config *c = &w->cfg;
  const int64_t C = c->C, NH = c->NH, hs = C / NH;
  const int64_t n = sp->phase == GPT2_PREFILL ? sp->n : 1;
  const int nb = sp->n_blocks;
  int nin = 0, nout = 0;
  *sig = (gpt2_sig){.x_in = -1, .pos = -1, .wte = -1, .wpe = -1, .lnfw = -1, .lnfb = -1,
                    .lm_head = -1, .layer0 = -1, .cache0 = -1, .main_out = -1, .kv0 = -1, .emb = -1,
                    .res0 = -1};
  // Parameters, in model.h's order (each hj_param its own statement: C leaves the order
  // of arguments unspecified).
  hj_tensor_t x_in = sp->embed ? hj_param(g, HJ_S32, HJ_SHAPE(n), "ids")
                               : hj_param(g, HJ_F32, HJ_SHAPE(n, C), "x");
  sig->x_in = nin++;
  hj_tensor_t pos = hj_param(g, HJ_S32, HJ_SCALAR, "pos");
  sig->pos = nin++;
  hj_tensor_t wte = HJ_NONE, wpe = HJ_NONE, lnfw = HJ_NONE, lnfb = HJ_NONE, lm = HJ_NONE;
  if (sp->embed || (sp->head && !sp->lm_head_t)) {
    wte = param_like(g, &w->wte, "wte");
    sig->wte = nin++;
  }
  if (sp->embed) {
    wpe = param_like(g, &w->wpe, "wpe");
    sig->wpe = nin++;
  }
  if (sp->head) {
    lnfw = param_like(g, &w->lnfw, "lnfw");
    sig->lnfw = nin++;
    lnfb = param_like(g, &w->lnfb, "lnfb");
    sig->lnfb = nin++;
    if (sp->lm_head_t) {
      lm = hj_param(g, HJ_F32, HJ_SHAPE(C, w->wte.shape[0]), "lm_head");
      sig->lm_head = nin++;
    }
  }
  gpt2_lparams lp[nb > 0 ? nb : 1];
  sig->layer0 = nin;
  for (int b = 0; b < nb; b++, nin += GPT2_LAYER_PARAMS) declare_block(g, &w->layer[0], b, &lp[b]);
  hj_tensor_t kc[nb > 0 ? nb : 1], vc[nb > 0 ? nb : 1];
  if (sp->phase == GPT2_DECODE) {
    sig->cache0 = nin;
    char name[32];
    for (int b = 0; b < nb; b++, nin += 2) {
      snprintf(name, sizeof name, "b%d.kc", b);
      kc[b] = hj_param(g, HJ_F32, HJ_SHAPE(NH, hs, sp->Tc), name);
      snprintf(name, sizeof name, "b%d.vc", b);
      vc[b] = hj_param(g, HJ_F32, HJ_SHAPE(NH, sp->Tc, hs), name);
    }
  }
  sig->nin = nin;

  // The network.
  hj_tensor_t x = x_in, zero = hj_scalar(g, HJ_S32, 0);
  if (sp->embed) {
    hj_tensor_t st[2] = {sp->phase == GPT2_DECODE ? pos : zero, zero};
    const int64_t rows[2] = {n, C};
    x = gpt2_embed(wte, hj_dynamic_slice(wpe, st, rows), x_in); // (n, C)
  }
  hj_tensor_t emb = x, k[nb > 0 ? nb : 1], v[nb > 0 ? nb : 1], res[nb > 0 ? nb : 1];
  for (int b = 0; b < nb; b++) {
    x = sp->phase == GPT2_PREFILL
            ? gpt2_block_prefill(x, &lp[b], (int)NH, &k[b], &v[b])
            : gpt2_block_decode(x, &lp[b], (int)NH, kc[b], vc[b], pos, &k[b], &v[b]);
    res[b] = x;
  }
  hj_tensor_t out = x;
  if (sp->head) {
    hj_tensor_t row = x;
    if (n > 1) {
      hj_tensor_t st[2] = {pos, zero};
      const int64_t one_row[2] = {1, C};
      row = hj_dynamic_slice(x, st, one_row); // (1, C)
    }
    out = sp->lm_head_t ? gpt2_head(row, lnfw, lnfb, lm, GPT2_IN_OUT)   // (1, Vp)
                        : gpt2_head(row, lnfw, lnfb, wte, GPT2_OUT_IN);
  }

  // Outputs.
  hj_status st = hj_graph_output(g, out);
  sig->main_out = nout++;
  sig->kv0 = nout;
  for (int b = 0; b < nb && !st; b++, nout += 2) { // decode: the caches, updated in place
    bool dec = sp->phase == GPT2_DECODE;
    st = dec ? hj_graph_output_aliased(g, k[b], kc[b]) : hj_graph_output(g, k[b]);
    if (!st) st = dec ? hj_graph_output_aliased(g, v[b], vc[b]) : hj_graph_output(g, v[b]);
  }
  if (sp->verify && !st) {
    if (sp->embed) {
      st = hj_graph_output(g, emb);
      sig->emb = nout++;
    }
    sig->res0 = nout;
    for (int b = 0; b < nb && !st; b++, nout++) st = hj_graph_output(g, res[b]);
  }
  sig->nout = nout;
  hj_status gs = hj_graph_status(g);
  return gs ? gs : st;
}
