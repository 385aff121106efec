/* test_api_faults.c — allocator fault injection (issue 14): a program that uses most of the
   API (graph building with sub-graphs and a while loop, compile, run, module print / parse
   / optimize / compile (on the evaluator), .npy write and read) runs with a custom
   hj_allocator_t that fails its Nth allocation, for every N from 1 to the number of
   allocations the program makes, on the evaluator and on the CPU backend. Every run must end with each call either
   succeeding or returning an error with a message (no crash: this also runs under ASan),
   give the reference values whenever it succeeds, and return every block it took (the
   allocator counts them).

   What the allocator sees (hlojit.h's allocator comment has the list): contexts, graphs,
   module arenas, buffers, executables and their arenas, and the evaluator's frames,
   scratch and values (literals). stb_ds containers, LLVM and a few transient scratch
   arrays in passes/runtime/backends use malloc (they are not failed here; the count
   printed says how many allocations were tried). */
#include "testutil.h"
#include "api_testutil.h"
#include <unistd.h>

typedef struct {
  long n, fail_at, live, failed;
} fi_state;

static void *fi_alloc(void *u, size_t n, size_t al) {
  fi_state *s = u;
  if (++s->n == s->fail_at) {
    s->failed++;
    return NULL;
  }
  void *p = NULL;
  if (posix_memalign(&p, al < sizeof(void *) ? sizeof(void *) : al, n ? n : 1)) return NULL;
  s->live++;
  return p;
}

static void fi_free(void *u, void *p) {
  fi_state *s = u;
  if (!p) return;
  s->live--;
  free(p);
}

enum { FI_NOUT = 4 };
typedef struct {
  hj_status st;
  bool had_ctx, msg;
  char why[600];
  float out[FI_NOUT][16];
} fi_result;

/* cond: i < 3 on (s32[], f32[4]); body: (i + 1, v * 2). */
static hj_status fi_loop_graphs(hj_graph_t *g, hj_graph_t **cond, hj_graph_t **body) {
  hj_dtype_t ty[2] = { HJ_S32, HJ_F32 };
  hj_shape_t sh[2] = { HJ_SCALAR, HJ_SHAPE(4) };
  hj_status st = hj_graph_create_sub(g, "cond", cond);
  if (!st) st = hj_graph_create_sub(g, "body", body);
  if (st) return st;
  hj_tensor_t s = hj_param_tuple(*cond, ty, sh, 2, "s");
  st = hj_graph_output(*cond, hj_compare(hj_get_tuple_element(s, 0), hj_scalar(*cond, HJ_S32, 3), HJ_CMP_LT));
  if (st) return st;
  hj_tensor_t b = hj_param_tuple(*body, ty, sh, 2, "s");
  hj_tensor_t i1 = hj_add(hj_get_tuple_element(b, 0), hj_scalar(*body, HJ_S32, 1));
  hj_tensor_t v2 = hj_mul(hj_get_tuple_element(b, 1), hj_scalar(*body, HJ_F32, 2));
  if ((st = hj_graph_output(*body, i1))) return st;
  return hj_graph_output(*body, v2);
}

static hj_status fi_build(hj_graph_t *g) {
  hj_tensor_t x = hj_param(g, HJ_F32, HJ_SHAPE(4, 8), "x");   /* (B, C) */
  hj_tensor_t w = hj_param(g, HJ_F32, HJ_SHAPE(8, 4), "w");   /* (C, H) */
  hj_tensor_t h = hj_gelu_tanh(hj_matmul(x, w));               /* (B, H) */
  hj_tensor_t r = hj_reduce(hj_softmax(h, 1), HJ_RED_SUM, (int64_t[]){ 0 }, 1);   /* (H) */
  hj_tensor_t idx = hj_argmax(h, 1);                           /* (B) s32 */
  hj_graph_t *cond = NULL, *body = NULL;
  hj_status st = fi_loop_graphs(g, &cond, &body);
  if (st) return st;
  hj_tensor_t init = hj_tuple(g, (hj_tensor_t[]){ hj_scalar(g, HJ_S32, 0), r }, 2);
  hj_tensor_t loop = hj_get_tuple_element(hj_while(cond, body, init), 1);   /* (H) */
  hj_tensor_t emb = hj_reduce(hj_embedding(hj_transpose(w, (int64_t[]){ 1, 0 }, 2), idx), HJ_RED_MAX,
                              (int64_t[]){ 1 }, 1);           /* (B) */
  hj_tensor_t srt = hj_sort(hj_layer_norm(r, HJ_NONE, HJ_NONE, 1e-5), 0, false);
  hj_tensor_t outs[FI_NOUT] = { loop, hj_convert(idx, HJ_F32), emb, srt };
  for (int k = 0; k < FI_NOUT && !st; k++) st = hj_graph_output(g, outs[k]);
  return st ? st : hj_graph_status(g);
}

static hj_status fi_run(hj_ctx_t *ctx, hj_exec_t *e, hj_buffer_t **in, fi_result *res) {
  hj_buffer_t *out[FI_NOUT] = { 0 };
  hj_status st = hj_exec_run(e, in, 2, out, FI_NOUT);
  for (int k = 0; k < FI_NOUT && !st; k++) st = hj_buffer_copy_to_host(out[k], res->out[k], 16);
  for (int k = 0; k < FI_NOUT; k++) hj_buffer_destroy(out[k]);
  return st;
}

/* |text|: also the module text round trip (print, parse, optimise, compile again), which the
   CPU sweep leaves to the evaluator's: each CPU compile costs an LLVM O3 run. */
static fi_result fi_scenario(fi_state *S, hj_backend_t be, bool text_trip) {
  fi_result res;
  memset(&res, 0, sizeof res);
  hj_ctx_options_t o;
  hj_ctx_options_init(&o);
  o.backend = be;
  o.num_threads = 1;
  o.allocator = (hj_allocator_t){ fi_alloc, fi_free, S };
  hj_ctx_t *ctx = NULL;
  hj_graph_t *g = NULL;
  hj_exec_t *e = NULL, *e2 = NULL;
  hj_module_t *m = NULL, *m2 = NULL;
  hj_buffer_t *in[2] = { 0 }, *back = NULL, *tmp = NULL;
  char *text = NULL, path[64];
  snprintf(path, sizeof path, "/tmp/hlojit_faults_%d.npy", (int)getpid());
  float xv[32], wv[32];
  for (int i = 0; i < 32; i++) xv[i] = (float)((i * 7) % 11) / 8 - 0.6f, wv[i] = (float)((i * 5) % 13) / 16 - 0.4f;
  hj_status st = hj_ctx_create(&o, &ctx);
  if (st) goto done;
  res.had_ctx = true;
  if ((st = hj_graph_create(ctx, "faults", &g)) || (st = fi_build(g)) || (st = hj_compile(g, &e))) goto done;
  if ((st = hj_buffer_from_host(ctx, HJ_F32, HJ_SHAPE(4, 8), xv, &in[0])) ||
      (st = hj_buffer_from_host(ctx, HJ_F32, HJ_SHAPE(8, 4), wv, &in[1])) || (st = fi_run(ctx, e, in, &res)))
    goto done;
  /* the same program as text: print, parse, optimise, compile again, run again */
  if (!text_trip) goto npy;
  if ((st = hj_graph_to_module(g, &m)) || (st = hj_module_print(m, &text)) ||
      (st = hj_module_parse(ctx, text, strlen(text), "faults", &m2)) || (st = hj_module_optimize(m2)) ||
      (st = hj_module_verify(m2)) || (st = hj_compile_module(ctx, m2, &e2)))
    goto done;
  fi_result again;
  memset(&again, 0, sizeof again);
  if ((st = fi_run(ctx, e2, in, &again))) goto done;
  if (memcmp(again.out, res.out, sizeof res.out)) {
    st = HJ_ERR_INTERNAL;
    snprintf(res.why, sizeof res.why, "the re-parsed, optimised module gives other values");
    goto done;
  }
npy:   /* .npy out and back */
  if ((st = hj_buffer_from_host(ctx, HJ_F32, HJ_SHAPE(4), res.out[0], &tmp)) ||
      (st = hj_buffer_write_npy(tmp, path)) || (st = hj_buffer_read_npy(ctx, path, &back)))
    goto done;
  if (hj_buffer_nbytes(back) != 16 || memcmp(hj_buffer_host_ptr(back), res.out[0], 16)) {
    st = HJ_ERR_INTERNAL;
    snprintf(res.why, sizeof res.why, "the .npy round trip changed the values");
  }
done:
  res.st = st;
  if (ctx && st) {
    res.msg = hj_ctx_error(ctx)[0] != 0;
    if (!res.why[0]) snprintf(res.why, sizeof res.why, "%s", hj_ctx_error(ctx));
  }
  free(text);
  hj_buffer_destroy(back);
  hj_buffer_destroy(tmp);
  hj_buffer_destroy(in[0]);
  hj_buffer_destroy(in[1]);
  hj_exec_destroy(e2);
  hj_exec_destroy(e);
  hj_module_destroy(m2);
  hj_module_destroy(m);
  hj_graph_destroy(g);
  hj_ctx_destroy(ctx);
  unlink(path);
  return res;
}

static void fi_sweep(hj_backend_t be, const char *name, bool text_trip) {
  fi_state S = { 0 };
  fi_result ref = fi_scenario(&S, be, text_trip);
  if (ref.st) fail_msg("%s: the program fails without faults: %s", name, ref.why);
  assert_int_equal(S.live, 0);
  long total = S.n, ok = 0, oom = 0, other = 0, bad = 0;
  for (long n = 1; n <= total; n++) {
    fi_state F = { .fail_at = n };
    fi_result r = fi_scenario(&F, be, text_trip);
    const char *why = NULL;
    if (F.live != 0) why = "blocks never returned";
    else if (r.st == HJ_OK && memcmp(r.out, ref.out, sizeof r.out)) why = "a run succeeded with other values";
    else if (r.st != HJ_OK && r.had_ctx && !r.msg) why = "an error without a message";
    else if (r.st == HJ_ERR_INTERNAL) why = "HJ_ERR_INTERNAL";
    if (why) {   /* every bad N is listed (the first 30), then the test fails */
      if (bad++ < 30) printf("  %s: allocation %ld of %ld failed: %s (%s: %s)\n", name, n, total, why,
                             hj_status_name(r.st), r.why);
      continue;
    }
    if (r.st == HJ_OK) ok++;
    else if (r.st == HJ_ERR_OOM) oom++;
    else other++;
  }
  if (bad) fail_msg("%s: %ld of %ld injected failures were not handled cleanly", name, bad, total);
  printf("  %s: %ld allocations through the allocator; failing each in turn: %ld runs still succeeded "
         "(the failure was handled and retried or not needed), %ld HJ_ERR_OOM, %ld other errors with a message\n",
         name, total, ok, oom, other);
}

static void test_faults_interp(void **state) { fi_sweep(HJ_BACKEND_INTERP, "evaluator", true); }
static void test_faults_cpu(void **state) { fi_sweep(HJ_BACKEND_CPU, "cpu", false); }

int main(int argc, char **argv) {
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_faults_interp),
    cmocka_unit_test(test_faults_cpu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
