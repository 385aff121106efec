/* test_api_hostile.c — every public function of hlojit.h misused on purpose (issue 14):
   NULL pointers, HJ_NONE, poisoned tensors, bad handles, tensors of another graph, and
   overflowing counts, dims and attributes. The rules checked, from hlojit.h:
   - nothing aborts (this file also runs under ASan/UBSan: an overflow is a failure);
   - an op given a poisoned tensor returns a poisoned tensor and adds no message;
   - an op given HJ_NONE, a bad handle, a tensor of another graph or a bad argument on a
     graph that was fine returns a poisoned tensor AND records a message in the graph;
   - fallible calls return a status and, when they have a context, a message; create
     functions leave *out NULL.
   A table (th_ops) drives the tensor ops, one small caller per op giving it its tensor
   operands in slots a, b, c and valid values for everything else; the test checks that the
   table covers every hj_* function of hlojit.h (by scanning the header). The allocator
   fault injection (every N) is in test_api_faults.c. */
#include "testutil.h"
#include "api_testutil.h"
#include <limits.h>

#if defined(__SANITIZE_ADDRESS__)
/* A shape the library accepts but no machine holds must come back as HJ_ERR_OOM, not as
   ASan's abort on a huge request. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }
#endif

/* ---- the tensor ops, one caller each ------------------------------------------------------ */

typedef hj_tensor_t (*th_fn)(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c);

#define UN(n) static hj_tensor_t o_##n(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) { return hj_##n(a); }
#define BI(n) static hj_tensor_t o_##n(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) { return hj_##n(a, b); }
UN(abs) UN(neg) UN(exp) UN(expm1) UN(log) UN(log1p) UN(logistic) UN(tanh) UN(sqrt) UN(rsqrt)
UN(cbrt) UN(sin) UN(cos) UN(tan) UN(erf) UN(floor) UN(ceil) UN(round_even) UN(round_afz)
UN(sign) UN(is_finite) UN(copy) UN(gelu_tanh) UN(gelu_erf)
BI(add) BI(sub) BI(mul) BI(div) BI(rem) BI(pow) BI(max) BI(min) BI(atan2) BI(matmul)
BI(embedding)
#undef UN
#undef BI
/* integer-only unary/binary ops get s32 operands (kinds "I") */
static hj_tensor_t o_not(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) { return hj_not(a); }
static hj_tensor_t o_popcnt(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) { return hj_popcnt(a); }
static hj_tensor_t o_clz(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) { return hj_clz(a); }
static hj_tensor_t o_and(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) { return hj_and(a, b); }
static hj_tensor_t o_or(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) { return hj_or(a, b); }
static hj_tensor_t o_xor(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) { return hj_xor(a, b); }
static hj_tensor_t o_shl(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) { return hj_shl(a, b); }
static hj_tensor_t o_shr_arith(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) { return hj_shr_arith(a, b); }
static hj_tensor_t o_shr_logical(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) { return hj_shr_logical(a, b); }
static hj_tensor_t o_compare(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) { return hj_compare(a, b, HJ_CMP_LT); }
static hj_tensor_t o_select(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) { return hj_select(a, b, c); }
static hj_tensor_t o_clamp(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) { return hj_clamp(a, b, c); }
static hj_tensor_t o_convert(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) { return hj_convert(a, HJ_S8); }
static hj_tensor_t o_bitcast_convert(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) { return hj_bitcast_convert(a, HJ_S32); }
static hj_tensor_t o_reduce_precision(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) { return hj_reduce_precision(a, 5, 10); }
static hj_tensor_t o_topk(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) { return hj_get_tuple_element(hj_topk(a, 2, true), 1); }
static hj_tensor_t o_broadcast_in_dim(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) {
  return hj_broadcast_in_dim(a, HJ_SHAPE(2, 4, 4), (int64_t[]){ 1, 2 }, 2);
}
static hj_tensor_t o_broadcast_to(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) { return hj_broadcast_to(a, HJ_SHAPE(3, 4, 4)); }
static hj_tensor_t o_reshape(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) { return hj_reshape(a, HJ_SHAPE(2, -1)); }
static hj_tensor_t o_transpose(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) { return hj_transpose(a, (int64_t[]){ 1, 0 }, 2); }
static hj_tensor_t o_slice(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) {
  return hj_slice(a, (int64_t[]){ 0, 1 }, (int64_t[]){ 4, 3 }, NULL);
}
static hj_tensor_t o_dynamic_slice(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) {
  hj_tensor_t st[2] = { b, c };
  return hj_dynamic_slice(a, st, (int64_t[]){ 2, 2 });
}
static hj_tensor_t o_dynamic_update_slice(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) {
  hj_tensor_t st[2] = { c, c };
  return hj_dynamic_update_slice(a, b, st);
}
static hj_tensor_t o_concat(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) {
  hj_tensor_t xs[2] = { a, b };
  return hj_concat(xs, 2, 0);
}
static hj_tensor_t o_pad(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) {
  return hj_pad(a, b, (int64_t[]){ 1, 0 }, (int64_t[]){ 0, 2 }, NULL);
}
static hj_tensor_t o_reverse(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) { return hj_reverse(a, (int64_t[]){ 0 }, 1); }
static hj_tensor_t o_gather(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) {
  hj_gather_dims_t d = { .offset_dims = (int64_t[]){ 1 }, .n_offset_dims = 1,
                         .collapsed_slice_dims = (int64_t[]){ 0 }, .n_collapsed_slice_dims = 1,
                         .start_index_map = (int64_t[]){ 0 }, .n_start_index_map = 1,
                         .index_vector_dim = 1, .slice_sizes = (int64_t[]){ 1, 4 }, .n_slice_sizes = 2 };
  return hj_gather(a, b, &d);
}
static hj_tensor_t o_scatter(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) {
  hj_scatter_dims_t d = { .update_window_dims = (int64_t[]){ 1 }, .n_update_window_dims = 1,
                          .inserted_window_dims = (int64_t[]){ 0 }, .n_inserted_window_dims = 1,
                          .scatter_dims_to_operand_dims = (int64_t[]){ 0 }, .n_scatter_dims_to_operand_dims = 1,
                          .index_vector_dim = 1 };
  return hj_scatter(a, b, c, &d, HJ_RED_SUM);
}
static hj_tensor_t o_reduce(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) { return hj_reduce(a, HJ_RED_MAX, (int64_t[]){ 1 }, 1); }
static hj_tensor_t o_sort(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) { return hj_sort(a, 1, true); }
static hj_tensor_t o_dot_general(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) {
  hj_dot_dims_t d = { .lhs_contracting = (int64_t[]){ 1 }, .n_lhs_contracting = 1,
                      .rhs_contracting = (int64_t[]){ 0 }, .n_rhs_contracting = 1 };
  return hj_dot_general(a, b, &d);
}
static hj_tensor_t o_get_tuple_element(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) {
  return hj_get_tuple_element(hj_tuple(a.graph ? a.graph : b.graph, (hj_tensor_t[]){ a, b }, 2), 1);
}
static hj_tensor_t o_softmax(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) { return hj_softmax(a, -1); }
static hj_tensor_t o_log_softmax(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) { return hj_log_softmax(a, 1); }
static hj_tensor_t o_layer_norm(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) { return hj_layer_norm(a, b, c, 1e-5); }
static hj_tensor_t o_mean(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) { return hj_mean(a, NULL, 0, true); }
static hj_tensor_t o_var(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) { return hj_var(a, (int64_t[]){ 0 }, 1, false); }
static hj_tensor_t o_argmax(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) { return hj_argmax(a, 1); }
static hj_tensor_t o_split(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) {
  return hj_get_tuple_element(hj_split(a, 0, (int64_t[]){ 1, 3 }, 2), 1);
}
static hj_tensor_t o_unpack(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) {
  hj_tensor_t parts[2] = { HJ_NONE, HJ_NONE };
  (void)hj_unpack(hj_tuple(a.graph ? a.graph : b.graph, (hj_tensor_t[]){ a, b }, 2), parts, 2);
  return parts[1];
}
static hj_tensor_t o_linear(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) { return hj_linear(a, b, c, HJ_LINEAR_OUT_IN); }
static hj_tensor_t o_dim_size(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) { return hj_dim_size(a, -1); }
static hj_tensor_t o_reduce_window(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) {
  return hj_reduce_window(a, HJ_RED_MAX, (int64_t[]){ 2, 2 }, (int64_t[]){ 1, 2 }, NULL, (int64_t[]){ 1, 0 });
}
static hj_tensor_t o_cumulative(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) { return hj_cumulative(a, HJ_RED_SUM, 1, true); }
/* the convolution API on 4x4 operands reshaped to NHWC images and HWIO kernels */
static hj_tensor_t th_img(hj_tensor_t a) { return hj_reshape(a, HJ_SHAPE(1, 4, 4, 1)); }
static hj_tensor_t th_ker(hj_tensor_t b) { return hj_reshape(b, HJ_SHAPE(2, 2, 1, 4)); }
static hj_tensor_t o_conv(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) {
  hj_conv_opts_t o = { .padding = HJ_PAD_SAME, .stride = (int64_t[]){ 2, 1 }, .bias = c };
  return hj_conv(th_img(a), th_ker(b), &o);
}
static hj_tensor_t o_conv_transpose(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) {
  hj_conv_opts_t o = { .padding = HJ_PAD_VALID, .stride = (int64_t[]){ 2, 2 } };
  return hj_conv_transpose(th_img(a), th_ker(b), &o);
}
static hj_tensor_t o_conv_general(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) {
  hj_conv_general_t p = { .n_spatial = 2, .in_feature = 3, .in_spatial = { 1, 2 }, .k_in = 2, .k_out = 3,
                          .k_spatial = { 0, 1 }, .out_feature = 3, .out_spatial = { 1, 2 }, .pad_lo = { 1, 0 },
                          .lhs_dilation = { 2, 1 }, .reversal = { true, false } };
  return hj_conv_general(th_img(a), th_ker(b), &p);
}
static hj_tensor_t o_max_pool(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) {
  hj_pool_opts_t o = { .window = (int64_t[]){ 2, 3 }, .padding = HJ_PAD_SAME };
  return hj_max_pool(th_img(a), &o);
}
static hj_tensor_t o_avg_pool(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) {
  hj_pool_opts_t o = { .layout = HJ_NCHW, .window = (int64_t[]){ 3, 3 }, .stride = (int64_t[]){ 1, 1 },
                       .padding = HJ_PAD_SAME, .exclude_pad = true };
  return hj_avg_pool(hj_reshape(a, HJ_SHAPE(1, 1, 4, 4)), &o);
}
static hj_tensor_t th_rng_state(hj_tensor_t a) {   /* u64[2] from the bits of a's first 4 floats */
  hj_tensor_t w = hj_bitcast_convert(hj_reshape(hj_convert(a, HJ_U32), HJ_SHAPE(8, 2)), HJ_U64);
  return hj_slice(w, (int64_t[]){ 0 }, (int64_t[]){ 2 }, NULL);
}
static hj_tensor_t o_rng_bits(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) {
  return hj_get_tuple_element(hj_rng_bits(th_rng_state(a), HJ_RNG_PHILOX, HJ_U32, HJ_SHAPE(3, 4)), 1);
}
static hj_tensor_t o_rng_uniform(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) {
  return hj_get_tuple_element(hj_rng_uniform(th_rng_state(a), HJ_RNG_THREE_FRY, HJ_SHAPE(5)), 1);
}
static hj_tensor_t o_cholesky(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) { return hj_cholesky(a, true); }
static hj_tensor_t o_triangular_solve(hj_tensor_t a, hj_tensor_t b, hj_tensor_t c) {
  return hj_triangular_solve(a, b, true, false, true, false);
}

/* kinds of the operand slots: F f32[4,4], f f32[4] (gamma, beta), I s32[4,4], S s32[]
   (indices and starts), J s32[2,1] (gather/scatter indices), U f32[2,4] (updates),
   P pred[4,4], W f32[2,2] (an update slice), c f32[4] (a convolution's bias) */
typedef struct { const char *name; th_fn fn; const char *kinds; } th_op;
#define OP(n, k) { "hj_" #n, o_##n, k }
static const th_op th_ops[] = {
  OP(abs, "F"), OP(neg, "F"), OP(exp, "F"), OP(expm1, "F"), OP(log, "F"), OP(log1p, "F"),
  OP(logistic, "F"), OP(tanh, "F"), OP(sqrt, "F"), OP(rsqrt, "F"), OP(cbrt, "F"), OP(sin, "F"),
  OP(cos, "F"), OP(tan, "F"), OP(erf, "F"), OP(floor, "F"), OP(ceil, "F"), OP(round_even, "F"),
  OP(round_afz, "F"), OP(sign, "F"), OP(is_finite, "F"), OP(copy, "F"), OP(gelu_tanh, "F"),
  OP(gelu_erf, "F"), OP(not, "I"), OP(popcnt, "I"), OP(clz, "I"),
  OP(add, "FF"), OP(sub, "FF"), OP(mul, "FF"), OP(div, "FF"), OP(rem, "FF"), OP(pow, "FF"),
  OP(max, "FF"), OP(min, "FF"), OP(atan2, "FF"), OP(and, "II"), OP(or, "II"), OP(xor, "II"),
  OP(shl, "II"), OP(shr_arith, "II"), OP(shr_logical, "II"), OP(compare, "FF"), OP(matmul, "FF"),
  OP(embedding, "FI"), OP(select, "PFF"), OP(clamp, "FFF"), OP(convert, "F"),
  OP(bitcast_convert, "F"), OP(reduce_precision, "F"), OP(topk, "F"), OP(broadcast_in_dim, "F"), OP(broadcast_to, "F"), OP(reshape, "F"),
  OP(transpose, "F"), OP(slice, "F"), OP(dynamic_slice, "FSS"), OP(dynamic_update_slice, "FWS"),
  OP(concat, "FF"), OP(pad, "Fs"), OP(reverse, "F"), OP(gather, "FJ"), OP(scatter, "FJU"),
  OP(reduce, "F"), OP(sort, "F"), OP(dot_general, "FF"), OP(get_tuple_element, "FF"),
  OP(softmax, "F"), OP(log_softmax, "F"), OP(layer_norm, "Fff"), OP(mean, "F"), OP(var, "F"),
  OP(argmax, "F"), OP(split, "F"), OP(unpack, "FF"), OP(linear, "FFf"), OP(dim_size, "F"),
  OP(reduce_window, "F"), OP(cumulative, "F"), OP(conv, "FFc"), OP(conv_transpose, "FF"), OP(conv_general, "FF"),
  OP(max_pool, "F"), OP(avg_pool, "F"), OP(cholesky, "F"), OP(triangular_solve, "FF"),
  OP(rng_bits, "F"), OP(rng_uniform, "F"),
};
#undef OP
enum { TH_NOPS = sizeof th_ops / sizeof th_ops[0] };

/* A valid tensor of |kind| in |g|. */
static hj_tensor_t th_valid(hj_graph_t *g, char kind) {
  switch (kind) {
  case 'F': return hj_param(g, HJ_F32, HJ_SHAPE(4, 4), "f");
  case 'f': return hj_param(g, HJ_F32, HJ_SHAPE(4), "v");
  case 'I': return hj_param(g, HJ_S32, HJ_SHAPE(4, 4), "i");
  case 'S': return hj_scalar(g, HJ_S32, 1);
  case 's': return hj_scalar(g, HJ_F32, 0);
  case 'J': return hj_param(g, HJ_S32, HJ_SHAPE(2, 1), "j");
  case 'U': return hj_param(g, HJ_F32, HJ_SHAPE(2, 4), "u");
  case 'W': return hj_param(g, HJ_F32, HJ_SHAPE(2, 2), "w");
  case 'c': return hj_param(g, HJ_F32, HJ_SHAPE(4), "bias");
  default: return hj_param(g, HJ_PRED, HJ_SHAPE(4, 4), "p");
  }
}

static hj_tensor_t th_call(const th_op *op, const hj_tensor_t *t) { return op->fn(t[0], t[1], t[2]); }

static hj_ctx_t *th_ctx;

static hj_graph_t *th_graph(const char *name) {
  hj_graph_t *g = NULL;
  CHECK_OK(th_ctx, hj_graph_create(th_ctx, name, &g));
  return g;
}

/* Every op with valid operands works (so the misuse below exercises real checks), then
   with each misuse of each operand slot. */
static void test_tensor_ops_misuse(void **state) {
  for (int i = 0; i < TH_NOPS; i++) {
    const th_op *op = &th_ops[i];
    int n = (int)strlen(op->kinds);
    hj_tensor_t t[3];
    /* valid */
    hj_graph_t *g = th_graph("ok");
    for (int k = 0; k < n; k++) t[k] = th_valid(g, op->kinds[k]);
    for (int k = n; k < 3; k++) t[k] = t[0];
    if (!hj_tensor_ok(th_call(op, t))) fail_msg("%s on valid operands: %s", op->name, hj_ctx_error(th_ctx));
    hj_graph_destroy(g);
    for (int k = 0; k < n; k++) {
      for (int how = 0; how < 4; how++) {
        /* how: 0 HJ_NONE, 1 poisoned (graph already failed), 2 bad handle, 3 other graph */
        if (how == 3 && n < 2) continue;
        if (how == 0 && k > 0 && !strcmp(op->name, "hj_layer_norm")) continue;   /* HJ_NONE: absent, valid */
        if (how == 0 && k == 2 && !strcmp(op->name, "hj_linear")) continue;         /* no bias: valid */
        if (how == 0 && k == 2 && !strcmp(op->name, "hj_conv")) continue;           /* no bias: valid */
        g = th_graph("g");
        hj_graph_t *g2 = th_graph("other");
        for (int j = 0; j < n; j++) t[j] = th_valid(g, op->kinds[j]);
        for (int j = n; j < 3; j++) t[j] = t[0];
        char before[1024] = "";
        if (how == 1) {   /* make g fail first: a poisoned tensor with the graph's first error */
          t[k] = hj_add(hj_param(g, HJ_F32, HJ_SHAPE(3), "bad"), hj_param(g, HJ_F32, HJ_SHAPE(5), "bad2"));
          snprintf(before, sizeof before, "%s", hj_ctx_error(th_ctx));
        }
        if (how == 0) t[k] = HJ_NONE;
        if (how == 2) t[k] = (hj_tensor_t){ g, 12345 };
        if (how == 3) t[k] = th_valid(g2, op->kinds[k]);
        hj_tensor_t r = th_call(op, t);
        if (hj_tensor_ok(r)) fail_msg("%s: slot %d misuse %d gave a valid tensor", op->name, k, how);
        bool others_ok = true;   /* HJ_NONE in every tensor slot leaves no graph to tell */
        for (int j = 0; j < n; j++) others_ok &= j == k || t[j].graph == g;
        /* an HJ_NONE operand of dynamic-slice hides how many starts there are to look at */
        if (how == 0 && k == 0 && !strcmp(op->name, "hj_dynamic_slice")) others_ok = false;
        if (how == 1) {
          assert_int_equal(hj_graph_status(g), HJ_ERR_SHAPE);
          if (strcmp(hj_ctx_error(th_ctx), before) && !strstr(hj_ctx_error(th_ctx), "hj_add"))
            fail_msg("%s: a poisoned operand added a message: %s", op->name, hj_ctx_error(th_ctx));
        } else if (how == 3) {   /* the error lands in the graph of the first operand */
          if (hj_graph_status(g) == HJ_OK && hj_graph_status(g2) == HJ_OK)
            fail_msg("%s: slot %d of another graph: no graph records an error", op->name, k);
          if (!hj_ctx_error(th_ctx)[0]) fail_msg("%s: no message", op->name);
        } else if (others_ok && (how != 0 || n > 1)) {
          if (hj_graph_status(g) == HJ_OK)
            fail_msg("%s: slot %d misuse %d: the graph records no error", op->name, k, how);
          if (!hj_ctx_error(th_ctx)[0]) fail_msg("%s: no message", op->name);
        }
        hj_ctx_clear_error(th_ctx);
        hj_graph_destroy(g2);
        hj_graph_destroy(g);
      }
    }
  }
}

/* hlojit.h's hj_* functions are all called somewhere in this file, in its sequel for the
   later API (test_api_hostile_io.c) or in the allocator fault test (test_api_faults.c):
   the header is scanned for declarations. */
static void test_every_function_covered(void **state) {
  char path[4096];
  snprintf(path, sizeof path, "%s/../hlojit.h", tu_data_dir());
  size_t hn = 0, sn = 0, fn = 0, in = 0;
  char *h = tu_read_file(path, &hn);
  snprintf(path, sizeof path, "%s/unit/test_api_hostile.c", tu_data_dir());
  char *self = tu_read_file(path, &sn);
  snprintf(path, sizeof path, "%s/unit/test_api_faults.c", tu_data_dir());
  char *faults = tu_read_file(path, &fn);
  snprintf(path, sizeof path, "%s/unit/test_api_hostile_io.c", tu_data_dir());
  char *io = tu_read_file(path, &in);
  assert_non_null(h);
  assert_non_null(self);
  assert_non_null(faults);
  assert_non_null(io);
  int n = 0, missing = 0;
  for (char *p = h; (p = strstr(p, " hj_")); p++) {
    char name[64];
    int k = 0;
    for (const char *q = p + 1; k < 63 && (q[k] == '_' || (q[k] >= 'a' && q[k] <= 'z') || (q[k] >= '0' && q[k] <= '9')); k++)
      name[k] = q[k];
    name[k] = 0;
    if (p[1 + k] != '(') continue;   /* a declaration or call: NAME( */
    char call[80], entry[80];
    snprintf(call, sizeof call, "%s(", name);
    snprintf(entry, sizeof entry, "OP(%s,", name + 3);   /* a th_ops entry */
    n++;
    if (!strstr(self + 1, call) && !strstr(faults, call) && !strstr(io, call) && !strstr(self, entry)) {
      printf("  not covered: %s\n", name);
      missing++;
    }
  }
  printf("  %d hj_* names in hlojit.h, %d not called here\n", n, missing);
  assert_int_equal(missing, 0);
  free(h);
  free(self);
  free(faults);
  free(io);
}

/* ---- overflowing and out-of-range arguments ---------------------------------------------- */

#define EXPECT_POISON(g, expr)                                                               \
  do {                                                                                       \
    hj_tensor_t r_ = (expr);                                                                 \
    if (hj_tensor_ok(r_)) fail_msg("accepted: %s", #expr);                                   \
    if (hj_graph_status(g) == HJ_OK || !hj_ctx_error(th_ctx)[0])                            \
      fail_msg("no error recorded: %s", #expr);                                              \
  } while (0)

static void test_overflowing_arguments(void **state) {
  const int64_t M = INT64_MAX, m = INT64_MIN;
  hj_shape_t bad_shapes[] = {
    HJ_SHAPE(M, 2), HJ_SHAPE(4294967296LL, 4294967296LL), HJ_SHAPE(m), HJ_SHAPE(3, m),
    { .rank = 9 }, { .rank = -1 }, { .rank = INT_MIN }, HJ_SHAPE(9007199254740993LL),
  };
  for (size_t i = 0; i < sizeof bad_shapes / sizeof bad_shapes[0]; i++) {
    hj_shape_t s = bad_shapes[i];
#define FRESH(stmt) do { hj_graph_t *g = th_graph("o"); stmt; hj_ctx_clear_error(th_ctx); hj_graph_destroy(g); } while (0)
    FRESH(EXPECT_POISON(g, hj_param(g, HJ_F32, s, "p")));
    FRESH(EXPECT_POISON(g, hj_full(g, HJ_F32, s, 1.0)));
    FRESH(EXPECT_POISON(g, hj_iota(g, HJ_S32, s, 0)));
    FRESH(EXPECT_POISON(g, hj_constant(g, HJ_F32, s, "x")));
    FRESH(EXPECT_POISON(g, hj_param_tuple(g, (hj_dtype_t[]){ HJ_F32 }, &s, 1, "t")));
    FRESH(EXPECT_POISON(g, hj_broadcast_to(hj_scalar(g, HJ_F32, 1), s)));
    FRESH(EXPECT_POISON(g, hj_broadcast_in_dim(hj_scalar(g, HJ_F32, 1), s, NULL, 0)));
    FRESH(EXPECT_POISON(g, hj_reshape(hj_param(g, HJ_F32, HJ_SHAPE(4), "x"), s)));
    hj_buffer_t *b = (hj_buffer_t *)1;
    assert_int_not_equal(hj_buffer_create(th_ctx, HJ_F32, s, &b), HJ_OK);
    assert_null(b);
    b = (hj_buffer_t *)1;
    assert_int_not_equal(hj_buffer_from_host(th_ctx, HJ_F32, s, "data", &b), HJ_OK);
    assert_null(b);
  }
  FRESH(EXPECT_POISON(g, hj_param(g, (hj_dtype_t)-1, HJ_SHAPE(2), "p")));
  FRESH(EXPECT_POISON(g, hj_param(g, HJ_DTYPE_COUNT, HJ_SHAPE(2), "p")));
  FRESH(EXPECT_POISON(g, hj_scalar(g, (hj_dtype_t)INT_MAX, 1)));
  FRESH(EXPECT_POISON(g, hj_iota(g, HJ_S32, HJ_SHAPE(4), INT_MIN)));
  FRESH(EXPECT_POISON(g, hj_param_tuple(g, NULL, NULL, 2, "t")));
  FRESH(EXPECT_POISON(g, hj_param_tuple(g, (hj_dtype_t[]){ HJ_F32 }, (hj_shape_t[]){ HJ_SHAPE(2) }, -1, "t")));
  FRESH(EXPECT_POISON(g, hj_causal_mask(g, -1)));
  FRESH(EXPECT_POISON(g, hj_causal_mask(g, M)));
  FRESH(EXPECT_POISON(g, hj_causal_mask(g, 4294967296LL)));
  FRESH(EXPECT_POISON(g, hj_convert(hj_param(g, HJ_F32, HJ_SHAPE(4), "x"), (hj_dtype_t)99)));
  FRESH(EXPECT_POISON(g, hj_compare(hj_param(g, HJ_F32, HJ_SHAPE(4), "x"), hj_param(g, HJ_F32, HJ_SHAPE(4), "y"), (hj_cmp_t)7)));
  hj_graph_t *g = th_graph("attrs");
  hj_tensor_t x = hj_param(g, HJ_F32, HJ_SHAPE(4, 4), "x"), z = hj_scalar(g, HJ_F32, 0);
  hj_tensor_t i0 = hj_scalar(g, HJ_S32, 0), idx = hj_param(g, HJ_S32, HJ_SHAPE(2, 1), "i");
  hj_tensor_t v4 = hj_param(g, HJ_F32, HJ_SHAPE(4), "v"), i44 = hj_param(g, HJ_S32, HJ_SHAPE(4, 4), "i44");
  hj_tensor_t tup = hj_tuple(g, (hj_tensor_t[]){ x }, 1), w43 = hj_param(g, HJ_F32, HJ_SHAPE(4, 3), "w43");
  const int64_t one2[2] = { 1, 1 };
  hj_tensor_t img = hj_param(g, HJ_F32, HJ_SHAPE(1, 4, 4, 1), "img"), ker = hj_param(g, HJ_F32, HJ_SHAPE(2, 2, 1, 4), "ker");
  struct { const char *what; hj_tensor_t r; } cases[] = {
    { "dim_size dim 2", hj_dim_size(x, 2) },
    { "dim_size dim -3", hj_dim_size(x, -3) },
    { "dim_size dim INT_MIN", hj_dim_size(x, INT_MIN) },
    { "dim_size dim INT_MAX", hj_dim_size(x, INT_MAX) },
    { "dim_size of a scalar", hj_dim_size(z, 0) },
    { "dim_size of a tuple, dim INT_MIN", hj_dim_size(tup, INT_MIN) },
    { "reduce_window NULL window", hj_reduce_window(x, HJ_RED_SUM, NULL, NULL, NULL, NULL) },
    { "reduce_window window 0", hj_reduce_window(x, HJ_RED_SUM, (int64_t[]){ 0, 1 }, NULL, NULL, NULL) },
    { "reduce_window window INT64_MIN", hj_reduce_window(x, HJ_RED_SUM, (int64_t[]){ 1, m }, NULL, NULL, NULL) },
    { "reduce_window stride 0", hj_reduce_window(x, HJ_RED_SUM, one2, (int64_t[]){ 1, 0 }, NULL, NULL) },
    { "reduce_window stride INT64_MIN", hj_reduce_window(x, HJ_RED_SUM, one2, (int64_t[]){ m, 1 }, NULL, NULL) },
    { "reduce_window pad lo INT64_MAX", hj_reduce_window(x, HJ_RED_SUM, one2, NULL, (int64_t[]){ M, 0 }, NULL) },
    { "reduce_window pads INT64_MAX", hj_reduce_window(x, HJ_RED_SUM, one2, NULL, (int64_t[]){ M, 0 }, (int64_t[]){ M, 0 }) },
    { "reduce_window pad hi INT64_MIN", hj_reduce_window(x, HJ_RED_SUM, one2, NULL, NULL, (int64_t[]){ 0, m }) },
    { "reduce_window window INT64_MAX, pad INT64_MAX", hj_reduce_window(x, HJ_RED_SUM, (int64_t[]){ M, 1 }, NULL,
        (int64_t[]){ M, 0 }, NULL) },
    { "reduce_window reducer REPLACE", hj_reduce_window(x, HJ_RED_REPLACE, one2, NULL, NULL, NULL) },
    { "conv NULL-free rank 2", hj_conv(x, x, NULL) },
    { "conv stride INT64_MIN", hj_conv(img, ker, &(hj_conv_opts_t){ .stride = (int64_t[]){ m, 1 } }) },
    { "conv stride and dilation INT64_MAX, same", hj_conv(img, ker, &(hj_conv_opts_t){ .stride = (int64_t[]){ M, 1 },
        .dilation = (int64_t[]){ M, 1 }, .padding = HJ_PAD_SAME }) },
    { "conv dilation INT64_MAX", hj_conv(img, ker, &(hj_conv_opts_t){ .dilation = (int64_t[]){ M, 1 } }) },
    { "conv pads INT64_MAX", hj_conv(img, ker, &(hj_conv_opts_t){ .padding = HJ_PAD_EXPLICIT,
        .pad_lo = (int64_t[]){ M, 0 }, .pad_hi = (int64_t[]){ M, 0 } }) },
    { "conv groups INT64_MAX", hj_conv(img, ker, &(hj_conv_opts_t){ .groups = M }) },
    { "conv groups -1", hj_conv(img, ker, &(hj_conv_opts_t){ .groups = -1 }) },
    { "conv layout 7", hj_conv(img, ker, &(hj_conv_opts_t){ .layout = (hj_conv_layout_t)7 }) },
    { "conv padding 9", hj_conv(img, ker, &(hj_conv_opts_t){ .padding = (hj_pad_mode_t)9 }) },
    { "conv bias of a scalar", hj_conv(img, ker, &(hj_conv_opts_t){ .bias = z }) },
    { "conv_transpose stride INT64_MAX", hj_conv_transpose(img, ker, &(hj_conv_opts_t){ .stride = (int64_t[]){ M, 1 } }) },
    { "conv_transpose stride INT64_MAX, same", hj_conv_transpose(img, ker, &(hj_conv_opts_t){
        .stride = (int64_t[]){ M, M }, .padding = HJ_PAD_SAME }) },
    { "conv_general NULL", hj_conv_general(img, ker, NULL) },
    { "conv_general n_spatial 99", hj_conv_general(img, ker, &(hj_conv_general_t){ .n_spatial = 99 }) },
    { "conv_general n_spatial -1", hj_conv_general(img, ker, &(hj_conv_general_t){ .n_spatial = -1 }) },
    { "conv_general dims out of range", hj_conv_general(img, ker, &(hj_conv_general_t){ .n_spatial = 2,
        .in_feature = M, .in_spatial = { m, 2 }, .k_spatial = { 9, -9 }, .k_out = 3 }) },
    { "conv_general stride -1", hj_conv_general(img, ker, &(hj_conv_general_t){ .n_spatial = 2, .in_feature = 3,
        .in_spatial = { 1, 2 }, .k_in = 2, .k_out = 3, .out_feature = 3, .out_spatial = { 1, 2 },
        .stride = { -1, 1 } }) },
    { "conv_general lhs dilation INT64_MAX", hj_conv_general(img, ker, &(hj_conv_general_t){ .n_spatial = 2,
        .in_feature = 3, .in_spatial = { 1, 2 }, .k_in = 2, .k_out = 3, .out_feature = 3, .out_spatial = { 1, 2 },
        .lhs_dilation = { M, M }, .pad_lo = { M, 0 } }) },
    { "conv_general batch groups INT64_MAX", hj_conv_general(img, ker, &(hj_conv_general_t){ .n_spatial = 2,
        .in_feature = 3, .in_spatial = { 1, 2 }, .k_in = 2, .k_out = 3, .out_feature = 3, .out_spatial = { 1, 2 },
        .batch_group_count = M }) },
    { "max_pool NULL options", hj_max_pool(img, NULL) },
    { "max_pool NULL window", hj_max_pool(img, &(hj_pool_opts_t){ .padding = HJ_PAD_SAME }) },
    { "max_pool window 0", hj_max_pool(img, &(hj_pool_opts_t){ .window = (int64_t[]){ 0, 1 } }) },
    { "max_pool window INT64_MIN", hj_max_pool(img, &(hj_pool_opts_t){ .window = (int64_t[]){ m, 1 } }) },
    { "max_pool stride INT64_MIN", hj_max_pool(img, &(hj_pool_opts_t){ .window = one2, .stride = (int64_t[]){ 1, m } }) },
    { "avg_pool of s32", hj_avg_pool(hj_param(g, HJ_S32, HJ_SHAPE(1, 4, 4, 1), "si"), &(hj_pool_opts_t){ .window = one2 }) },
    { "avg_pool pads INT64_MIN", hj_avg_pool(img, &(hj_pool_opts_t){ .window = one2, .padding = HJ_PAD_EXPLICIT,
        .pad_lo = (int64_t[]){ m, 0 }, .pad_hi = (int64_t[]){ m, 0 } }) },
    { "reduce_window reducer 99", hj_reduce_window(x, (hj_reducer_t)99, one2, NULL, NULL, NULL) },
    { "reduce_window reducer -1", hj_reduce_window(x, (hj_reducer_t)-1, one2, NULL, NULL, NULL) },
    { "reduce_window AND of floats", hj_reduce_window(x, HJ_RED_AND, one2, NULL, NULL, NULL) },
    { "reduce_window of a tuple", hj_reduce_window(tup, HJ_RED_SUM, one2, NULL, NULL, NULL) },
    { "cumulative axis 2", hj_cumulative(x, HJ_RED_SUM, 2, false) },
    { "cumulative axis INT_MIN", hj_cumulative(x, HJ_RED_SUM, INT_MIN, true) },
    { "cumulative axis INT_MAX", hj_cumulative(x, HJ_RED_MAX, INT_MAX, false) },
    { "cumulative of a scalar", hj_cumulative(z, HJ_RED_SUM, 0, false) },
    { "cumulative reducer REPLACE", hj_cumulative(x, HJ_RED_REPLACE, 0, false) },
    { "cumulative reducer 99", hj_cumulative(x, (hj_reducer_t)99, 0, false) },
    { "cumulative OR of floats", hj_cumulative(x, HJ_RED_OR, 0, false) },
    { "cumulative of a tuple", hj_cumulative(tup, HJ_RED_SUM, 0, false) },
    { "linear layout 3", hj_linear(x, x, HJ_NONE, (hj_linear_layout_t)3) },
    { "linear panels of rank 2", hj_linear(x, x, HJ_NONE, HJ_LINEAR_PANELS) },
    { "linear layout -1", hj_linear(x, x, HJ_NONE, (hj_linear_layout_t)-1) },
    { "linear w of rank 1", hj_linear(x, v4, HJ_NONE, HJ_LINEAR_IN_OUT) },
    { "linear w of rank 3", hj_linear(x, hj_reshape(x, HJ_SHAPE(4, 2, 2)), HJ_NONE, HJ_LINEAR_IN_OUT) },
    { "linear x scalar", hj_linear(z, x, HJ_NONE, HJ_LINEAR_IN_OUT) },
    { "linear features differ (out, in)", hj_linear(x, w43, HJ_NONE, HJ_LINEAR_OUT_IN) },
    { "linear features differ (in, out)", hj_linear(w43, w43, HJ_NONE, HJ_LINEAR_IN_OUT) },
    { "linear bias of the in size", hj_linear(x, w43, v4, HJ_LINEAR_IN_OUT) },
    { "linear bias of rank 2", hj_linear(x, x, x, HJ_LINEAR_IN_OUT) },
    { "linear bias s32", hj_linear(x, x, hj_convert(v4, HJ_S32), HJ_LINEAR_IN_OUT) },
    { "linear dtypes differ", hj_linear(x, i44, HJ_NONE, HJ_LINEAR_IN_OUT) },
    { "linear of a tuple", hj_linear(tup, x, HJ_NONE, HJ_LINEAR_IN_OUT) },
    { "linear tuple bias", hj_linear(x, x, tup, HJ_LINEAR_IN_OUT) },
    { "reshape -1 x INT64_MAX", hj_reshape(x, HJ_SHAPE(-1, M)) },
    { "reshape two -1", hj_reshape(x, HJ_SHAPE(-1, -1)) },
    { "reshape INT64_MIN", hj_reshape(x, HJ_SHAPE(m, 1)) },
    { "transpose n -1", hj_transpose(x, (int64_t[]){ 0, 1 }, -1) },
    { "transpose INT64_MIN", hj_transpose(x, (int64_t[]){ m, 0 }, 2) },
    { "transpose n 9", hj_transpose(x, (int64_t[]){ 0, 1, 2, 3, 4, 5, 6, 7, 8 }, 9) },
    { "slice INT64_MIN start", hj_slice(x, (int64_t[]){ m, 0 }, (int64_t[]){ 4, 4 }, NULL) },
    { "slice INT64_MAX limit", hj_slice(x, (int64_t[]){ 0, 0 }, (int64_t[]){ M, 4 }, NULL) },
    { "slice stride 0", hj_slice(x, (int64_t[]){ 0, 0 }, (int64_t[]){ 4, 4 }, (int64_t[]){ 0, 1 }) },
    { "slice stride INT64_MIN", hj_slice(x, (int64_t[]){ 0, 0 }, (int64_t[]){ 4, 4 }, (int64_t[]){ m, 1 }) },
    { "pad lo INT64_MAX", hj_pad(x, z, (int64_t[]){ M, 0 }, (int64_t[]){ 0, 0 }, NULL) },
    { "pad lo+hi INT64_MAX", hj_pad(x, z, (int64_t[]){ M, 0 }, (int64_t[]){ M, 0 }, NULL) },
    { "pad interior INT64_MAX", hj_pad(x, z, (int64_t[]){ 0, 0 }, (int64_t[]){ 0, 0 }, (int64_t[]){ M, 0 }) },
    { "pad interior -1", hj_pad(x, z, (int64_t[]){ 0, 0 }, (int64_t[]){ 0, 0 }, (int64_t[]){ -1, 0 }) },
    { "pad negative size", hj_pad(x, z, (int64_t[]){ -3, 0 }, (int64_t[]){ -3, 0 }, NULL) },
    { "pad NULL lo", hj_pad(x, z, NULL, (int64_t[]){ 0, 0 }, NULL) },
    { "reverse INT64_MAX", hj_reverse(x, (int64_t[]){ M }, 1) },
    { "reverse n -5", hj_reverse(x, (int64_t[]){ 0 }, -5) },
    { "dynamic-slice size INT64_MAX", hj_dynamic_slice(x, (hj_tensor_t[]){ i0, i0 }, (int64_t[]){ M, 1 }) },
    { "dynamic-slice size -1", hj_dynamic_slice(x, (hj_tensor_t[]){ i0, i0 }, (int64_t[]){ -1, 1 }) },
    { "dynamic-slice NULL starts", hj_dynamic_slice(x, NULL, (int64_t[]){ 1, 1 }) },
    { "concat axis INT_MAX", hj_concat((hj_tensor_t[]){ x, x }, 2, INT_MAX) },
    { "concat axis INT_MIN", hj_concat((hj_tensor_t[]){ x, x }, 2, INT_MIN) },
    { "reduce dim INT64_MIN", hj_reduce(x, HJ_RED_SUM, (int64_t[]){ m }, 1) },
    { "reduce n -1", hj_reduce(x, HJ_RED_SUM, (int64_t[]){ 0 }, -1) },
    { "reduce reducer 99", hj_reduce(x, (hj_reducer_t)99, (int64_t[]){ 0 }, 1) },
    { "sort dim INT_MIN", hj_sort(x, INT_MIN, false) },
    { "softmax axis INT_MAX", hj_softmax(x, INT_MAX) },
    { "argmax axis INT_MIN", hj_argmax(x, INT_MIN) },
    { "mean dims INT64_MAX", hj_mean(x, (int64_t[]){ M }, 1, false) },
    { "var n -2", hj_var(x, (int64_t[]){ 0 }, -2, false) },
    { "gte index INT_MIN", hj_get_tuple_element(hj_tuple(g, (hj_tensor_t[]){ x }, 1), INT_MIN) },
    { "gte of an array", hj_get_tuple_element(x, 0) },
    { "tuple n -3", hj_tuple(g, (hj_tensor_t[]){ x }, -3) },
    { "gather NULL dims", hj_gather(x, idx, NULL) },
    { "gather huge ivd", hj_gather(x, idx, &(hj_gather_dims_t){ .index_vector_dim = M }) },
    { "gather slice INT64_MAX", hj_gather(x, idx, &(hj_gather_dims_t){ .offset_dims = (int64_t[]){ 1 }, .n_offset_dims = 1,
        .collapsed_slice_dims = (int64_t[]){ 0 }, .n_collapsed_slice_dims = 1, .start_index_map = (int64_t[]){ 0 },
        .n_start_index_map = 1, .index_vector_dim = 1, .slice_sizes = (int64_t[]){ 1, M }, .n_slice_sizes = 2 }) },
    { "gather n -1", hj_gather(x, idx, &(hj_gather_dims_t){ .offset_dims = (int64_t[]){ 1 }, .n_offset_dims = -1 }) },
    { "scatter NULL dims", hj_scatter(x, idx, x, NULL, HJ_RED_SUM) },
    { "scatter combiner -1", hj_scatter(x, idx, x, &(hj_scatter_dims_t){ .index_vector_dim = 1 }, (hj_reducer_t)-1) },
    { "dot dims INT64_MIN", hj_dot_general(x, x, &(hj_dot_dims_t){ .lhs_contracting = (int64_t[]){ m },
        .n_lhs_contracting = 1, .rhs_contracting = (int64_t[]){ 0 }, .n_rhs_contracting = 1 }) },
    { "dot n 1000", hj_dot_general(x, x, &(hj_dot_dims_t){ .lhs_batch = (int64_t[]){ 0 }, .n_lhs_batch = -1 }) },
    { "dot NULL", hj_dot_general(x, x, NULL) },
    { "broadcast_in_dim dims INT64_MAX", hj_broadcast_in_dim(x, HJ_SHAPE(4, 4), (int64_t[]){ M, 1 }, 2) },
    { "broadcast_in_dim n -1", hj_broadcast_in_dim(x, HJ_SHAPE(4, 4), (int64_t[]){ 0, 1 }, -1) },
    { "embedding of floats", hj_embedding(x, x) },
    { "matmul of vectors of other sizes", hj_matmul(hj_param(g, HJ_F32, HJ_SHAPE(3), "a"), hj_param(g, HJ_F32, HJ_SHAPE(4), "b")) },
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    if (hj_tensor_ok(cases[i].r)) fail_msg("accepted: %s", cases[i].what);
  assert_int_not_equal(hj_graph_status(g), HJ_OK);
  hj_graph_destroy(g);
  /* split: sizes whose sum overflows */
  g = th_graph("split");
  x = hj_param(g, HJ_F32, HJ_SHAPE(4), "x");
  assert_false(hj_tensor_ok(hj_split(x, 0, (int64_t[]){ M, M, 6 }, 3)));
  assert_false(hj_tensor_ok(hj_split(x, 0, (int64_t[]){ m, 4 }, 2)));
  assert_false(hj_tensor_ok(hj_split(x, INT_MIN, (int64_t[]){ 4 }, 1)));
  assert_false(hj_tensor_ok(hj_split(x, 0, (int64_t[]){ 4 }, -1)));
  assert_false(hj_tensor_ok(hj_split(x, 0, NULL, 1)));
  hj_graph_destroy(g);
  /* hj_unpack: counts that differ, no tuple, no out array; a poisoned tuple gives poison */
  hj_tensor_t o3[3];
  FRESH(assert_int_equal(hj_unpack(hj_split(hj_param(g, HJ_F32, HJ_SHAPE(4), "x"), 0, (int64_t[]){ 1, 3 }, 2), o3, 3),
                         HJ_ERR_SHAPE);
        assert_false(hj_tensor_ok(o3[0]) || hj_tensor_ok(o3[2])); assert_int_equal(hj_graph_status(g), HJ_ERR_SHAPE));
  FRESH(assert_int_equal(hj_unpack(hj_split(hj_param(g, HJ_F32, HJ_SHAPE(4), "x"), 0, (int64_t[]){ 4 }, 1), o3, 2),
                         HJ_ERR_SHAPE));
  FRESH(assert_int_equal(hj_unpack(hj_param(g, HJ_F32, HJ_SHAPE(4), "x"), o3, 1), HJ_ERR_SHAPE);
        assert_false(hj_tensor_ok(o3[0])));
  FRESH(assert_int_equal(hj_unpack(hj_tuple(g, (hj_tensor_t[]){ hj_scalar(g, HJ_F32, 1) }, 1), NULL, 1), HJ_ERR_INVALID_ARG);
        assert_int_not_equal(hj_graph_status(g), HJ_OK));
  FRESH(assert_int_equal(hj_unpack(hj_tuple(g, (hj_tensor_t[]){ hj_scalar(g, HJ_F32, 1) }, 1), o3, -1), HJ_ERR_INVALID_ARG));
  FRESH(assert_int_equal(hj_unpack(hj_tuple(g, (hj_tensor_t[]){ hj_scalar(g, HJ_F32, 1) }, 1), o3, INT_MIN), HJ_ERR_INVALID_ARG));
  FRESH(assert_int_not_equal(hj_unpack((hj_tensor_t){ g, 12345 }, o3, 2), HJ_OK); assert_false(hj_tensor_ok(o3[1]));
        assert_int_not_equal(hj_graph_status(g), HJ_OK));
  FRESH(hj_tensor_t bad = hj_add(hj_param(g, HJ_F32, HJ_SHAPE(3), "a"), hj_param(g, HJ_F32, HJ_SHAPE(2), "b"));
        char before[1024]; snprintf(before, sizeof before, "%s", hj_ctx_error(th_ctx));
        assert_int_equal(hj_unpack(bad, o3, 2), HJ_ERR_SHAPE); assert_false(hj_tensor_ok(o3[0]));
        assert_string_equal(hj_ctx_error(th_ctx), before));
  o3[0] = o3[1] = (hj_tensor_t){ NULL, 7 };   /* HJ_NONE: no graph to tell, every out[i] HJ_NONE */
  assert_int_equal(hj_unpack(HJ_NONE, o3, 2), HJ_ERR_INVALID_ARG);
  assert_true(o3[0].graph == NULL && o3[0].id < 0 && o3[1].id < 0);
#undef FRESH
}

/* ---- graphs, sub-graphs and control flow ------------------------------------------------ */

static void test_graph_misuse(void **state) {
  hj_graph_t *g = th_graph("top"), *g2 = th_graph("other"), *sub = NULL, *sub2 = NULL;
  CHECK_OK(th_ctx, hj_graph_create_sub(g, "s", &sub));
  CHECK_OK(th_ctx, hj_graph_create_sub(g2, "s2", &sub2));
  hj_tensor_t a = hj_param(sub, HJ_F32, HJ_SHAPE(2), "a");
  CHECK_OK(th_ctx, hj_graph_output(sub, hj_neg(a)));
  CHECK_OK(th_ctx, hj_graph_output(sub2, hj_neg(hj_param(sub2, HJ_F32, HJ_SHAPE(2), "b"))));
  hj_tensor_t x = hj_param(g, HJ_F32, HJ_SHAPE(2), "x"), y = hj_param(g2, HJ_F32, HJ_SHAPE(2), "y");
  /* outputs of the wrong graph, of no graph, poisoned */
  assert_int_equal(hj_graph_output(g, y), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_graph_output(g, HJ_NONE), HJ_ERR_INVALID_ARG);
  assert_int_not_equal(hj_graph_output(g, (hj_tensor_t){ g, -1 }), HJ_OK);
  assert_int_not_equal(hj_graph_output(g, (hj_tensor_t){ g, INT32_MAX }), HJ_OK);
  assert_true(hj_graph_ctx(g) == th_ctx);
  assert_null(hj_graph_ctx(NULL));
  /* callees from another family, NULL callees, a top graph as callee, a poisoned arg */
  assert_false(hj_tensor_ok(hj_call(sub2, &x, 1)));
  assert_false(hj_tensor_ok(hj_call(NULL, &x, 1)));
  assert_false(hj_tensor_ok(hj_call(g, &x, 1)));
  assert_false(hj_tensor_ok(hj_call(sub, &x, -1)));
  assert_false(hj_tensor_ok(hj_call(sub, NULL, 1)));
  assert_false(hj_tensor_ok(hj_map(sub2, &x, 1)));
  assert_false(hj_tensor_ok(hj_map(NULL, NULL, 0)));
  assert_false(hj_tensor_ok(hj_while(sub, sub2, x)));
  assert_false(hj_tensor_ok(hj_while(NULL, NULL, HJ_NONE)));
  assert_false(hj_tensor_ok(hj_conditional(hj_scalar(g, HJ_PRED, 1), (hj_graph_t *[]){ sub, sub2 }, (hj_tensor_t[]){ x, x }, 2)));
  assert_false(hj_tensor_ok(hj_conditional(hj_scalar(g, HJ_PRED, 1), NULL, NULL, 2)));
  assert_false(hj_tensor_ok(hj_conditional(hj_scalar(g, HJ_PRED, 1), (hj_graph_t *[]){ sub }, &x, INT_MAX)));
  assert_false(hj_tensor_ok(hj_reduce_with(sub2, &x, &x, 1, (int64_t[]){ 0 }, 1)));
  assert_false(hj_tensor_ok(hj_reduce_with(sub, &x, NULL, 1, NULL, 0)));
  assert_false(hj_tensor_ok(hj_reduce_with(sub, &x, &x, INT_MAX, NULL, 0)));
  assert_false(hj_tensor_ok(hj_sort_with(sub2, &x, 1, 0, true)));
  assert_false(hj_tensor_ok(hj_sort_with(NULL, &x, 1, INT_MIN, true)));
  assert_false(hj_tensor_ok(hj_sort_with(sub, NULL, 3, 0, true)));
  assert_int_not_equal(hj_graph_status(g), HJ_OK);
  /* a sub-graph used by a call is frozen */
  hj_graph_t *g3 = th_graph("freeze"), *s3 = NULL;
  CHECK_OK(th_ctx, hj_graph_create_sub(g3, "s3", &s3));
  hj_tensor_t p3 = hj_param(s3, HJ_F32, HJ_SHAPE(2), "p");
  CHECK_OK(th_ctx, hj_graph_output(s3, hj_exp(p3)));
  hj_tensor_t x3 = hj_param(g3, HJ_F32, HJ_SHAPE(2), "x");
  assert_true(hj_tensor_ok(hj_call(s3, &x3, 1)));
  assert_false(hj_tensor_ok(hj_neg(p3)));
  assert_int_not_equal(hj_graph_output(s3, p3), HJ_OK);
  /* destroying a sub-graph is a no-op; its top frees it */
  hj_graph_destroy(s3);
  hj_graph_t *gs = (hj_graph_t *)1;
  assert_int_equal(hj_graph_create_sub(NULL, "x", &gs), HJ_ERR_INVALID_ARG);
  assert_null(gs);
  assert_int_equal(hj_graph_create_sub(g3, "x", NULL), HJ_ERR_INVALID_ARG);
  /* compile / to_module of a failed graph: the first message */
  hj_exec_t *e = (hj_exec_t *)1;
  assert_int_not_equal(hj_compile(g, &e), HJ_OK);
  assert_null(e);
  hj_module_t *m = (hj_module_t *)1;
  assert_int_not_equal(hj_graph_to_module(g, &m), HJ_OK);
  assert_null(m);
  assert_int_equal(hj_graph_to_module(NULL, &m), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_graph_to_module(g3, NULL), HJ_ERR_INVALID_ARG);
  /* the panel order's helpers: NULL, zero and overflowing sizes, a layout out of range */
  int64_t kc = -1, nr = -1;
  float wf[4] = { 0 }, df[4];
  assert_int_equal(hj_linear_panels(NULL, HJ_BACKEND_CPU, 8, 8, &kc, &nr), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_linear_panels(hj_graph_ctx(g3), HJ_BACKEND_CPU, 8, 8, NULL, &nr), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_linear_panels(hj_graph_ctx(g3), HJ_BACKEND_CPU, 0, 8, &kc, &nr), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_linear_panels(hj_graph_ctx(g3), (hj_backend_t)99, 8, 8, &kc, &nr), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_linear_panels(hj_graph_ctx(g3), HJ_BACKEND_INTERP, 8, 8, &kc, &nr), HJ_ERR_UNSUPPORTED);
  assert_int_equal(hj_linear_pack(NULL, wf, HJ_LINEAR_IN_OUT, 2, 2, 1, 1, df), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_linear_pack(hj_graph_ctx(g3), wf, (hj_linear_layout_t)-1, 2, 2, 1, 1, df), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_linear_pack(hj_graph_ctx(g3), wf, HJ_LINEAR_IN_OUT, INT64_MAX, 2, 1, 1, df), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_linear_pack(hj_graph_ctx(g3), wf, HJ_LINEAR_IN_OUT, 2, 2, 0, 1, df), HJ_ERR_INVALID_ARG);
  uint16_t wh[4] = { 0 }, dh[4];
  assert_int_equal(hj_linear_pack_bf16(NULL, wh, HJ_LINEAR_IN_OUT, 2, 2, 1, 1, dh), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_linear_pack_bf16(hj_graph_ctx(g3), wh, HJ_LINEAR_PANELS, 2, 2, 1, 1, dh), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_linear_pack_bf16(hj_graph_ctx(g3), wh, HJ_LINEAR_IN_OUT, INT64_MAX, 2, 1, 1, dh), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_linear_pack_bf16(hj_graph_ctx(g3), wh, HJ_LINEAR_OUT_IN, 2, 2, 1, 3, dh), HJ_ERR_INVALID_ARG);
  /* a graph with no output */
  hj_graph_t *g4 = th_graph("empty");
  e = (hj_exec_t *)1;
  assert_int_not_equal(hj_compile(g4, &e), HJ_OK);
  assert_null(e);
  assert_true(hj_ctx_error(th_ctx)[0] != 0);
  /* tensor queries on anything */
  assert_int_equal(hj_tensor_dtype(HJ_NONE), HJ_DTYPE_COUNT);
  assert_int_equal(hj_tensor_dtype((hj_tensor_t){ g, INT32_MAX }), HJ_DTYPE_COUNT);
  assert_int_equal(hj_tensor_shape((hj_tensor_t){ g, INT32_MIN }).rank, 0);
  assert_false(hj_tensor_ok((hj_tensor_t){ NULL, 0 }));
  hj_graph_destroy(g4);
  hj_graph_destroy(g3);
  hj_graph_destroy(g2);
  hj_graph_destroy(g);
  hj_graph_destroy(NULL);
}

/* ---- contexts, modules, executables, buffers -------------------------------------------------- */

static void test_module_exec_buffer_misuse(void **state) {
  hj_ctx_options_init(NULL);
  hj_ctx_clear_error(NULL);
  hj_ctx_destroy(NULL);
  assert_string_equal(hj_ctx_error(NULL), "");
  assert_string_equal(hj_status_name((hj_status)-5), "HJ_ERR_UNKNOWN");
  assert_null(hj_dtype_name((hj_dtype_t)-1));
  assert_int_equal(hj_dtype_size((hj_dtype_t)INT_MAX), 0);
  assert_int_equal(hj_shape_numel((hj_shape_t){ .rank = 100 }), 0);
  hj_ctx_options_t o;
  hj_ctx_options_init(&o);
  o.num_threads = -1;
  hj_ctx_t *c = (hj_ctx_t *)1;
  assert_int_equal(hj_ctx_create(&o, &c), HJ_ERR_INVALID_ARG);
  assert_null(c);
  hj_ctx_options_init(&o);
  o.allocator.alloc = (void *(*)(void *, size_t, size_t))1;   /* alloc without free */
  c = (hj_ctx_t *)1;
  assert_int_equal(hj_ctx_create(&o, &c), HJ_ERR_INVALID_ARG);
  assert_null(c);
  /* modules */
  hj_module_t *m = (hj_module_t *)1;
  assert_int_not_equal(hj_module_parse(NULL, "HloModule x", 11, NULL, &m), HJ_OK);
  assert_null(m);
  assert_int_equal(hj_module_parse(th_ctx, "HloModule x", 11, NULL, NULL), HJ_ERR_INVALID_ARG);
  m = (hj_module_t *)1;
  assert_int_not_equal(hj_module_parse_file(th_ctx, NULL, &m), HJ_OK);
  assert_null(m);
  assert_int_not_equal(hj_module_parse_file(NULL, "/nonexistent", &m), HJ_OK);
  assert_int_not_equal(hj_module_parse_file(th_ctx, "/", &m), HJ_OK);   /* a directory */
  assert_true(hj_ctx_error(th_ctx)[0] != 0);
  static const char text[] =
    "HloModule ok\nENTRY main {\n  p = f32[2] parameter(0)\n  ROOT r = f32[2] negate(p)\n}\n";
  CHECK_OK(th_ctx, hj_module_parse(th_ctx, text, strlen(text), "ok", &m));
  assert_int_equal(hj_module_print(m, NULL), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_module_verify(NULL), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_module_optimize(NULL), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_module_num_outputs(NULL), 0);
  assert_int_equal(hj_module_num_inputs(NULL), 0);
  assert_int_equal(hj_module_num_inputs(m), 1);
  hj_dtype_t t;
  hj_shape_t s;
  assert_int_not_equal(hj_module_input(m, -1, &t, &s), HJ_OK);
  assert_int_not_equal(hj_module_input(m, INT_MAX, &t, &s), HJ_OK);
  assert_int_not_equal(hj_module_output(m, 1, &t, &s), HJ_OK);
  assert_int_not_equal(hj_module_input(NULL, 0, &t, &s), HJ_OK);
  CHECK_OK(th_ctx, hj_module_input(m, 0, NULL, NULL));   /* |t| and |s| may be NULL */
  assert_int_not_equal(hj_module_output(NULL, 0, &t, &s), HJ_OK);
  CHECK_OK(th_ctx, hj_module_verify(m));
  CHECK_OK(th_ctx, hj_module_optimize(m));
  /* executables */
  hj_exec_t *e = (hj_exec_t *)1;
  assert_int_equal(hj_compile_module(NULL, m, &e), HJ_ERR_INVALID_ARG);
  assert_null(e);
  assert_int_equal(hj_compile_module(th_ctx, m, NULL), HJ_ERR_INVALID_ARG);
  CHECK_OK(th_ctx, hj_compile_module(th_ctx, m, &e));
  hj_buffer_t *in[1] = { NULL }, *out[1] = { NULL };
  assert_int_not_equal(hj_exec_run(e, NULL, 1, out, 1), HJ_OK);
  assert_int_not_equal(hj_exec_run(e, in, -1, out, 1), HJ_OK);
  assert_int_not_equal(hj_exec_run(e, in, INT_MAX, out, 1), HJ_OK);
  CHECK_OK(th_ctx, hj_buffer_create(th_ctx, HJ_F32, HJ_SHAPE(2), &in[0]));
  assert_int_not_equal(hj_exec_run(e, in, 1, NULL, 1), HJ_OK);
  assert_int_not_equal(hj_exec_run(e, in, 1, out, -1), HJ_OK);
  assert_int_not_equal(hj_exec_run(e, in, 1, out, INT_MIN), HJ_OK);
  assert_null(out[0]);
  assert_int_equal(hj_exec_num_inputs(NULL), 0);
  assert_int_equal(hj_exec_num_outputs(NULL), 0);
  assert_int_equal(hj_exec_backend(e), HJ_BACKEND_INTERP);
  (void)hj_exec_backend(NULL);
  hj_exec_stats_t st;
  assert_int_equal(hj_exec_stats(NULL, &st), HJ_ERR_INVALID_ARG);
  assert_int_equal(hj_exec_stats(e, NULL), HJ_ERR_INVALID_ARG);
  /* buffers */
  hj_buffer_t *b = (hj_buffer_t *)1;
  assert_int_not_equal(hj_buffer_create(th_ctx, HJ_F32, HJ_SHAPE(2, HJ_DYN(INT64_MAX)), &b), HJ_OK);
  assert_null(b);
  assert_int_equal(hj_buffer_dtype(NULL), HJ_DTYPE_COUNT);
  assert_int_equal(hj_buffer_shape(NULL).rank, 0);
  assert_int_equal(hj_buffer_nbytes(NULL), 0);
  float two[2];
  assert_int_not_equal(hj_buffer_copy_to_host(NULL, two, sizeof two), HJ_OK);
  CHECK_OK(th_ctx, hj_buffer_copy_to_host(in[0], two, sizeof two));   /* a big enough dst is fine */
  assert_int_not_equal(hj_buffer_write_npy(in[0], "/nonexistent/dir/x.npy"), HJ_OK);
  assert_int_not_equal(hj_buffer_write_npy(in[0], NULL), HJ_OK);
  b = (hj_buffer_t *)1;
  assert_int_not_equal(hj_buffer_read_npy(th_ctx, "/nonexistent.npy", &b), HJ_OK);
  assert_null(b);
  assert_int_not_equal(hj_buffer_read_npy(NULL, "/nonexistent.npy", &b), HJ_OK);
  assert_int_not_equal(hj_buffer_read_npy(th_ctx, "/tmp", NULL), HJ_OK);
  hj_buffer_destroy(in[0]);
  hj_exec_destroy(e);
  hj_module_destroy(m);
}

/* argv[1], when given, selects the tests to run (a cmocka filter pattern). */
int main(int argc, char **argv) {
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  th_ctx = tu_ctx();
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_every_function_covered),
    cmocka_unit_test(test_tensor_ops_misuse),
    cmocka_unit_test(test_overflowing_arguments),
    cmocka_unit_test(test_graph_misuse),
    cmocka_unit_test(test_module_exec_buffer_misuse),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  hj_ctx_destroy(th_ctx);
  return rc;
}
