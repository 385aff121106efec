/* model.h — GPT-2 as plain C functions that build hlojit graphs, one function per layer of
   the network, and the builder that puts them together into the graphs the generator
   compiles (prefill of a length bucket, decode at a runtime position).

   // L layers, C channels, NH heads, hs = C / NH head size, V vocab, Vp padded vocab,
   // maxT context, n rows fed by one graph (prefill: a bucket of T rows; decode: 1),
   // Tc entries of a decode bucket's KV cache

   THE NETWORK (what tests/reference/gpt2.py computes; every op f32)
     x = wte[ids] + wpe[pos0 .. pos0 + n)                           gpt2_embed   (n, C)
     per block:  x += attnproj(attention(qkv(ln_1(x))))               gpt2_block
                 x += fcproj(gelu_tanh(fc(ln_2(x))))
     logits = ln_f(x[row]) @ wte^T                                   gpt2_head    (1, Vp)
   Layer norm eps 1e-5 over C; attention scores scaled by 1/sqrt(hs), keys at positions <=
   the query's; the lm_head is tied to wte and covers all Vp rows (the padding rows are
   zero in llm.c files, so their logits are 0): the caller reads the first V. Reading the
   whole of wte keeps the tied matrix a plain parameter (a slice of it to V rows would be a
   154 MB copy per run at 124M). The head may instead read wte transposed, (C, Vp), as a
   parameter of its own (spec.lm_head_t): a plain x @ W, whose M = 1 kernel streams memory
   faster today than the one for x @ W^T (session.h).

   Each matrix comes in a layout of its own (gpt2_layout, weights.h; the shapes and layouts
   gpt2_build sees are those of the gpt2_weights it is given): (out, in), llm.c's, runs as
   x @ W^T through dot_general contracting both operands' last dims; (in, out),
   safetensors', as x @ W. The CPU backend has kernels for both (rhs transposed or not);
   which layout each matrix is kept in is the session's choice (session.h, LAYOUTS).
   gpt2_linear is hj_linear with the layout named as weights.h names it. Weights are f32
   parameters: bf16 files are widened once at load (session.c).

   ATTENTION
   Prefill (n = T rows at positions 0..T-1): q, v (NH, T, hs) and k transposed, (NH, hs, T),
   so both attention products are plain batched matmuls; scores (NH, T, T) with the causal
   mask, softmax, @ v. Rows past the prompt's real length are padding: causality
   keeps them out of every real row, so no length mask is needed; the caller keeps only
   the real rows of k and v and reads the logits of the last real row.
   Decode (n = 1 row at runtime position pos, an s32 scalar: no compile per token): the
   cache holds keys of positions 0..pos-1 in a (NH, hs, Tc) buffer (transposed, as the
   prefill makes them) and values in a (NH, Tc, hs) one. The graph writes the new key and
   value at pos with a dynamic-update-slice and attends over the updated cache, entries
   j > pos masked:
       Kc' = dus(Kc, k_new, [0, 0, pos])   Vc' = dus(Vc, v_new, [0, pos, 0])
       y   = softmax(q @ Kc' / sqrt(hs), masked to j <= pos) @ Vc'        (NH, 1, hs)
   Kc' and Vc' are outputs that alias Kc and Vc (donation, hj_graph_output_aliased): the
   run writes one row per head into the caller's cache buffers and copies nothing.

   GRAPHS (gpt2_build): a spec says the phase, n or Tc, which parts are in (embedding,
   some blocks, head) and whether to add the verify outputs. Parameters, in this order
   (gpt2_sig gives each one's index; -1 where absent):
     x_in    embed: ids s32[n]; else x f32[n, C] (n: HJ_DYN(n) with dyn_rows)
     pos     s32[]: prefill: the row whose logits the head computes (real length - 1);
             decode: the position fed (wpe row, cache mask)
     wte (Vp, C), wpe (maxT, C)     when embed or head (wpe only with embed; wte not for
                                    a head with lm_head_t, unless it embeds too)
     lnfw, lnfb (C)                 with head
     lm_head (C, Vp)                with head and lm_head_t: wte transposed (in panel
                                    order, (C/kc, Vp/nr, kc, nr), with lm_head_panel)
     12 per block, in gpt2_layer's order (ln1w ln1b qkvw qkvb attprojw attprojb ln2w ln2b
                                          fcw fcb fcprojw fcprojb), shapes as stored
     decode: kc (NH, hs, Tc), vc (NH, Tc, hs) per block
   Outputs, in this order:
     main    head: logits f32[1, Vp]; else x f32[n, C]
     kv      per block: prefill: k (NH, hs, T), v (NH, T, hs); decode: kc', vc' (the
             updated caches, aliasing the kc, vc parameters)
     verify  emb (n, C) when embed, then res (n, C) per block (the residual after it) */
#ifndef GPT2_MODEL_H
#define GPT2_MODEL_H

#include <stdbool.h>

#include "hlojit.h"
#include "weights.h"

#define GPT2_LN_EPS 1e-5
enum { GPT2_LAYER_PARAMS = 12 };

/* One block's parameters as graph tensors, and the layout of each matrix (GPT2_OUT_IN or
   GPT2_IN_OUT: they may differ, session.h). */
typedef struct gpt2_lparams {
  hj_tensor_t ln1w, ln1b, qkvw, qkvb, attprojw, attprojb;
  hj_tensor_t ln2w, ln2b, fcw, fcb, fcprojw, fcprojb;
  gpt2_layout lay_qkv, lay_attproj, lay_fc, lay_fcproj;
} gpt2_lparams;

/* ---- one function per layer ------------------------------------------------------------ */
/* ids s32[n], wpe_rows (n, C) -> (n, C) */
hj_tensor_t gpt2_embed(hj_tensor_t wte, hj_tensor_t wpe_rows, hj_tensor_t ids);
/* Layer norm over the last dim, GPT-2's eps. */
hj_tensor_t gpt2_norm(hj_tensor_t x, hj_tensor_t w, hj_tensor_t b);
/* x (n, in) -> (n, out) + b (HJ_NONE: none); |w| (out, in) for GPT2_OUT_IN, (in, out) for
   GPT2_IN_OUT, (in/kc, out/nr, kc, nr) for GPT2_PANELS (hj_linear). */
hj_tensor_t gpt2_linear(hj_tensor_t x, hj_tensor_t w, hj_tensor_t b, gpt2_layout layout);
/* fcproj(gelu_tanh(fc(h))): (n, C) -> (n, C) */
hj_tensor_t gpt2_mlp(hj_tensor_t h, const gpt2_lparams *p);
/* Causal attention of a prefill: qkv (T, 3C) -> y (T, C); *k (NH, hs, T), *v (NH, T, hs). */
hj_tensor_t gpt2_attn_prefill(hj_tensor_t qkv, int NH, hj_tensor_t *k, hj_tensor_t *v);
/* Attention of one position |pos| (s32[]) over the cache kc (NH, hs, Tc), vc (NH, Tc, hs)
   holding positions 0..pos-1: qkv (1, 3C) -> y (1, C); *kc_new, *vc_new: the caches with
   position pos written. */
hj_tensor_t gpt2_attn_decode(hj_tensor_t qkv, hj_tensor_t kc, hj_tensor_t vc, hj_tensor_t pos,
                             int NH, hj_tensor_t *kc_new, hj_tensor_t *vc_new);
/* A whole block, prefill (k, v out) or decode (kc, vc, pos in; the updated caches out). */
hj_tensor_t gpt2_block_prefill(hj_tensor_t x, const gpt2_lparams *p, int NH, hj_tensor_t *k,
                               hj_tensor_t *v);
hj_tensor_t gpt2_block_decode(hj_tensor_t x, const gpt2_lparams *p, int NH, hj_tensor_t kc,
                              hj_tensor_t vc, hj_tensor_t pos, hj_tensor_t *kc_new,
                              hj_tensor_t *vc_new);
/* ln_f and the tied lm_head on one row: x (1, C) -> logits (1, Vp); |lm_head| is wte itself
   (Vp, C) with GPT2_OUT_IN, or wte transposed (C, Vp) with GPT2_IN_OUT. */
hj_tensor_t gpt2_head(hj_tensor_t x, hj_tensor_t lnfw, hj_tensor_t lnfb, hj_tensor_t lm_head,
                      gpt2_layout layout);

/* ---- graphs ------------------------------------------------------------------------------ */
typedef enum { GPT2_PREFILL = 0, GPT2_DECODE } gpt2_phase;

typedef struct gpt2_spec {
  gpt2_phase phase;
  int n;        /* prefill: rows T of the bucket (with dyn_rows: their bound); decode: 1 */
  bool dyn_rows; /* prefill: the rows dim of x_in is HJ_DYN(n) (for the tracing JIT) */
  int Tc;       /* decode: cache entries of the bucket */
  int n_blocks; /* blocks in the graph (their weights are parameters: any layer's fit) */
  bool embed;   /* starts from ids (else from x) */
  bool head;    /* ends with the logits (else with x) */
  bool verify;  /* adds the emb and res outputs */
  bool lm_head_t; /* the head reads a parameter of its own, wte transposed (C, Vp) */
  bool lm_head_bf16; /* ... held in bf16 (session.h, WEIGHTS) */
  int64_t lm_head_panel[2]; /* ... in the CPU's panel order: kc, nr (0: (C, Vp) as it is) */
} gpt2_spec;

/* Where each parameter and output sits (index into the exec's inputs / outputs). */
typedef struct gpt2_sig {
  int x_in, pos, wte, wpe, lnfw, lnfb, lm_head;
  int layer0; /* block b's 12 parameters: layer0 + 12 b .. */
  int cache0; /* decode: block b's kc at cache0 + 2 b, vc at cache0 + 2 b + 1 */
  int nin;
  int main_out;
  int kv0;    /* block b's k (prefill) or kc' (decode) at kv0 + 2 b, v or vc' at kv0 + 2 b + 1 */
  int emb, res0; /* verify outputs */
  int nout;
} gpt2_sig;

/* One parameter of a graph: what hj_param (or a hj_jit_param_t) needs. */
typedef struct gpt2_param {
  char name[40];
  hj_dtype_t dtype;
  hj_shape_t shape;
} gpt2_param;

/* The parameters of |spec|'s graph, in order, into |d| (NULL: only count them), and where
   every parameter and output sits into |sig|; returns how many parameters. Shapes and
   layouts come from |w| (layer 0 for the blocks: every layer has the same). */
int gpt2_params(const gpt2_weights *w, const gpt2_spec *spec, gpt2_param *d, gpt2_sig *sig);
/* Builds the graph from its parameter tensors |p| (gpt2_params' order, |sig| as it filled
   it) and marks the outputs in |sig|'s order. This is what a hj_jit build function calls
   with the tensors the JIT traced. Returns the graph's status. */
hj_status gpt2_body(hj_graph_t *g, const gpt2_weights *w, const gpt2_spec *spec,
                    const hj_tensor_t *p, const gpt2_sig *sig);
/* Both: the parameters as hj_params of |g| (fresh, empty), then the body. */
hj_status gpt2_build(hj_graph_t *g, const gpt2_weights *w, const gpt2_spec *spec,
                     gpt2_sig *sig);

#endif
