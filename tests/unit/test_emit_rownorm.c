/* test_emit_rownorm.c — row normalisation fusions (softmax, log-softmax, layer norm) through
   the reduction emitter (hlojit_impl/emitters/reduction.c: each reduce computed once per
   row, the root evaluated at the row's elements with the reduces overridden), JIT'd with
   backends/cpu/cpu_jit and compared with the reference evaluator (hlo_eval_computation of
   the same fused computation on the same inputs). Split from test_emit_heroes.c (size).

   Cases: hand-written fusions (softmax f32/bf16, a masked softmax whose exp is stashed,
   log-softmax and layer norm with both reduces in one fusion, the second reading the
   first; outputs of every kind; an argmax
   one-hot through get-tuple-element; reduces over middle/major dims and to a scalar); the
   fixtures tests/fixtures/hlo_pass/softmax.hlo and layernorm.hlo, both whole (the entry as
   one fusion: reshapes to [.., 1] and identity broadcasts on the way) and after
   hlo_run_pipeline (every reduce fusion it makes, emitted with emit_fusion as the runtime
   does; also gpt2_block.hlo and moments.hlo); refusals (a reduce read at another row) that
   must fall back to the loop emitter and still match.

   Every run: emit_fusion (the kind must be the expected one: REDUCTION for row
   normalisations, not the loop fallback), kernel over [0, parallel_n) in 1, 2 and 7 chunks
   (last chunk first): identical bits; then |got - want| <= rtol * |want| + atol per element
   (NaN matches NaN). Tolerances, inputs in [-1, 1) unless stated (x in [-4, 4) for softmax):
   - softmax: rtol 1e-5, atol 1e-7. exp goes through emit_math (about 2 ulp), the row sum
     uses 16 partial accumulators (reduction.c) where the evaluator adds sequentially:
     relative differences of a few 1e-7 over 64 terms, all positive (no cancellation).
     bf16: rtol 2^-7 (one bf16 rounding either way; its sum keeps the evaluator's order);
   - log-softmax: atol 1e-5 (values down to -12; log of the sum as above);
   - layer norm (and the pipeline's fusions of gpt2_block/moments): rtol 1e-5, atol 2e-5
     (outputs up to ~5; mean and variance over 768 terms with partial accumulators:
     relative 1e-6 on the variance, 0.5e-6 on rsqrt); E[x^2] - mean^2: atol 1e-6;
   - x - mean(all of x) over 5000 elements: atol 1e-6;
   - reduces over middle or major dims, argmax, refused fusions: bit for bit (sequential).

   Benchmark (printed): 64x768 layer norm and 8x64x64 softmax, one thread, ms: the
   reduction emitter against the loop-emitter fallback (emit_loop_fusion) on the same
   fusion, both for the pipeline's fusions and for the whole single-fusion versions. */
#include "testutil.h"

#if !__has_include(<llvm-c/Core.h>)
int main(void) { return tu_main_without_llvm(); }
#else
#include "emit_testutil.h"
#include "hlojit_impl/emitters/reduction_internal.h"

static etu_env rn;   /* interpreter context, JIT, host target (etu_env_init_host) */

static int rn_setup(void **state) { return etu_env_init_host(&rn); }

static int rn_teardown(void **state) {
  etu_env_free(&rn);
  return 0;
}

/* ---- fusions ------------------------------------------------------------------------------- */

/* A fusion instruction calling |c| (a scratch computation of |m| holds it). */
static hlo_instr *rn_wrap(hlo_module *m, hlo_comp *c) { return etu_wrap_comp(m, c, "rn"); }

static hlo_module *rn_parse(const char *text) {
  hlo_module *m = NULL;
  CHECK_OK(rn.ctx, hlo_parse_module(rn.ctx, text, strlen(text), "rn", &m));
  return m;
}

static char *rn_fixture(const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/fixtures/hlo_pass/%s", tu_data_dir(), name);
  char *t = tu_read_file(path, NULL);
  if (!t) {
    snprintf(path, sizeof path, "tests/fixtures/hlo_pass/%s", name);
    t = tu_read_file(path, NULL);
  }
  if (!t) fail_msg("fixture %s not found", name);
  return t;
}

/* ---- compile, run, compare ------------------------------------------------------------------ */

/* emit_fusion (or the loop emitter alone: |force_loop|) into a fresh JIT module. */
static etu_kernel_fn rn_compile(const hlo_instr *fusion, bool force_loop, emit_kernel *k) {
  char name[64];
  cpu_jit_module m;
  emit_module em;
  etu_jit_begin(&rn, "rn", name, sizeof name, &m, &em);
  memset(k, 0, sizeof *k);
  hj_status st = force_loop ? emit_loop_fusion(&em, fusion, name, k) : emit_fusion(&em, fusion, name, false, k);
  emit_module_dispose(&em);
  if (st) fail_msg("emit %s: %s: %s", fusion->name, hj_status_name(st), hj_ctx_error(rn.ctx));
  return etu_jit_finish(&rn, &m, k->name, NULL);
}

static uint64_t rn_rng;   /* etu_rand01 */

typedef struct rn_io {
  hlo_literal *in[64], *want, *wl[64];
  int nin, nout;
  void *out[64];
  int64_t bytes[64];
} rn_io;

/* Inputs uniform in [lo, hi) (ints in [-8, 8)), the evaluator's outputs, output buffers. */
static void rn_io_make(rn_io *io, const hlo_instr *fusion, double lo, double hi) {
  memset(io, 0, sizeof *io);
  rn_rng = 42;
  io->nin = fusion->noperands;
  for (int i = 0; i < io->nin; i++) {
    hlo_literal *l = io->in[i] = hlo_literal_new(rn.ctx, &fusion->operands[i]->shape);
    assert_non_null(l);
    int64_t n = hlo_shape_numel(&l->shape);
    for (int64_t j = 0; j < n; j++) {
      if (hlo_type_is_float(l->shape.type))
        hlo_store_f64(l->shape.type, l->data, j, lo + (hi - lo) * etu_rand01(&rn_rng));
      else hlo_store_s64(l->shape.type, l->data, j, (int64_t)(etu_rand01(&rn_rng) * 16) - 8);
    }
  }
  CHECK_OK(rn.ctx, hlo_eval_computation(rn.ctx, fusion->calls[0], io->in, io->nin, &io->want));
  etu_leaves(io->want, io->wl, &io->nout);
  for (int i = 0; i < io->nout; i++) {
    io->bytes[i] = io->wl[i]->nbytes;
    io->out[i] = aligned_alloc(64, ((size_t)io->bytes[i] + 127) / 64 * 64);
  }
}

static void rn_io_free(rn_io *io) {
  for (int i = 0; i < io->nin; i++) hlo_literal_free(io->in[i]);
  for (int i = 0; i < io->nout; i++) free(io->out[i]);
  hlo_literal_free(io->want);
}

/* Runs in |chunks| chunks, last first, into 0xCD-poisoned outputs. */
static void rn_run(etu_kernel_fn fn, const emit_kernel *k, rn_io *io, int chunks) {
  void *bufs[128];
  for (int i = 0; i < io->nin; i++) bufs[i] = io->in[i]->data;
  for (int i = 0; i < io->nout; i++) {
    memset(io->out[i], 0xCD, (size_t)io->bytes[i]);
    bufs[io->nin + i] = io->out[i];
  }
  etu_run_chunks(fn, k->parallel_n, bufs, chunks);
}

/* Max |got - want| over all float outputs; fails beyond rtol * |want| + atol (both 0:
   bit for bit). */
static double rn_compare(const char *what, rn_io *io, double rtol, double atol) {
  double maxerr = 0;
  for (int k = 0; k < io->nout; k++) {
    hlo_type t = io->wl[k]->shape.type;
    int64_t n = hlo_shape_numel(&io->wl[k]->shape);
    int es = hlo_type_size(t);
    for (int64_t i = 0; i < n; i++) {
      bool exact = !hlo_type_is_float(t) || (rtol == 0 && atol == 0);
      if (exact) {
        if (memcmp((char *)io->out[k] + i * es, io->wl[k]->data + i * es, (size_t)es))
          fail_msg("%s: output %d element %lld differs (bitwise)", what, k, (long long)i);
        continue;
      }
      double g = hlo_load_f64(t, io->out[k], i), w = hlo_load_f64(t, io->wl[k]->data, i);
      if (isnan(g) || isnan(w) || isinf(w)) {
        if (!(isnan(g) && isnan(w)) && g != w)
          fail_msg("%s: output %d element %lld: got %.9g want %.9g", what, k, (long long)i, g, w);
        continue;
      }
      double e = fabs(g - w);
      if (e > rtol * fabs(w) + atol)
        fail_msg("%s: output %d element %lld: got %.9g want %.9g (err %.3g > %.3g)", what, k,
                 (long long)i, g, w, e, rtol * fabs(w) + atol);
      if (e > maxerr) maxerr = e;
    }
  }
  return maxerr;
}

/* The whole check of the file comment; |kind|: the kind emit_fusion must report. */
static void rn_check(const char *what, const hlo_instr *fusion, emit_kind kind, double lo, double hi,
                     double rtol, double atol) {
  emit_kernel k;
  etu_kernel_fn fn = rn_compile(fusion, false, &k);
  if (k.kind != kind)
    fail_msg("%s: emitted as %s, expected %s (%s)", what, emit_kind_name(k.kind), emit_kind_name(kind),
             hj_ctx_error(rn.ctx));
  rn_io io;
  rn_io_make(&io, fusion, lo, hi);
  void *first[64];
  rn_run(fn, &k, &io, 1);
  double err = rn_compare(what, &io, rtol, atol);
  for (int i = 0; i < io.nout; i++) {
    first[i] = malloc((size_t)io.bytes[i]);
    memcpy(first[i], io.out[i], (size_t)io.bytes[i]);
  }
  const int splits[] = { 2, 7 };
  for (int s = 0; s < 2; s++) {
    rn_run(fn, &k, &io, splits[s]);
    for (int i = 0; i < io.nout; i++)
      if (memcmp(first[i], io.out[i], (size_t)io.bytes[i]))
        fail_msg("%s: output %d differs between 1 and %d chunks", what, i, splits[s]);
  }
  for (int i = 0; i < io.nout; i++) free(first[i]);
  print_message("%-46s ok  %-9s parallel_n %-6lld max abs err %.3g\n", what, emit_kind_name(k.kind),
                (long long)k.parallel_n, err);
  rn_io_free(&io);
}

/* Parses |text| and checks its last computation (the entry) as one fusion. */
static void rn_check_text(const char *what, const char *text, emit_kind kind, double lo, double hi,
                          double rtol, double atol) {
  hlo_module *m = rn_parse(text);
  rn_check(what, rn_wrap(m, m->entry), kind, lo, hi, rtol, atol);
  hlo_module_free(m);
}

/* ---- hand-written fusions ------------------------------------------------------------------- */

#define RN_REDUCERS                                                                              \
  "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] add(a, b)\n}\n" \
  "max {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] maximum(a, b)\n}\n"

/* softmax / log-softmax over the last dim of f32[8,64,64]: both reduces in the fusion, the
   sum's input reading the max. |tail|: the root. */
static char *rn_softmax_text(const char *dims, const char *rows, const char *bdims, int rdim, const char *tail) {
  char *s = NULL;
  sb_printf(&s,
            RN_REDUCERS
            "fused {\n  x = f32[%s] parameter(0)\n  ninf = f32[] constant(-inf)\n  z = f32[] constant(0)\n"
            "  m = f32[%s] reduce(x, ninf), dimensions={%d}, to_apply=max\n"
            "  mb = f32[%s] broadcast(m), dimensions={%s}\n"
            "  d = f32[%s] subtract(x, mb)\n  e = f32[%s] exponential(d)\n"
            "  s = f32[%s] reduce(e, z), dimensions={%d}, to_apply=add\n"
            "  sb = f32[%s] broadcast(s), dimensions={%s}\n%s}\n",
            dims, rows, rdim, dims, bdims, dims, dims, rows, rdim, dims, bdims, tail);
  return s;
}

/* The plan of |text|'s entry as one fusion: how many stashes, and the hero that stores the
   first. */
static int rn_stashes(const char *text, int *hero, hlo_opcode *op) {
  hlo_module *m = rn_parse(text);
  const hlo_instr *f = rn_wrap(m, m->entry);
  char name[64];
  cpu_jit_module jm;
  emit_module em;
  etu_jit_begin(&rn, "rs", name, sizeof name, &jm, &em);
  red_plan *p = calloc(1, sizeof *p);
  assert_non_null(p);
  CHECK_OK(rn.ctx, red_analyse(&em, f, p));
  int n = p->nstash;
  if (n) *hero = p->stash[0].hero, *op = p->stash[0].ins->op;
  free(p);
  emit_module_dispose(&em);
  cpu_jit_module_dispose(&jm);
  hlo_module_free(m);
  return n;
}

static void test_softmax(void **state) {
  char *t = rn_softmax_text("8,64,64", "8,64", "0,1", 2, "  ROOT y = f32[8,64,64] divide(e, sb)\n");
  rn_check_text("softmax f32[8,64,64] (max, sum in one fusion)", t, EMIT_KIND_REDUCTION, -4, 4, 1e-5, 1e-7);
  /* the output leaf belongs to the max (the first hero over its shape); its exp is stored
     while the second hero, the sum, visits the element (reduction_analyse.c) */
  int hero = -1;
  hlo_opcode op = HLO_OP_COUNT;
  assert_int_equal(rn_stashes(t, &hero, &op), 1);
  assert_int_equal(hero, 1);
  assert_int_equal(op, HLO_OP_EXP);
  arrfree(t);
  /* rows of 1000 (remainder after the lanes); outputs of every kind: input shape reading
     the reduces (y, e), input shape reading none (|x|), the row values, a kept epilogue */
  t = rn_softmax_text("3,1000", "3", "0", 1,
                      "  y = f32[3,1000] divide(e, sb)\n  ab = f32[3,1000] abs(x)\n"
                      "  ls = f32[3] log(s)\n  lse = f32[3] add(m, ls)\n"
                      "  ROOT t = (f32[3,1000], f32[3,1000], f32[3,1000], f32[3], f32[3], f32[3]) "
                      "tuple(y, e, ab, m, s, lse)\n");
  rn_check_text("softmax f32[3,1000] + 5 side outputs", t, EMIT_KIND_REDUCTION, -4, 4, 1e-5, 1e-7);
  arrfree(t);
  /* GPT-2's prefill softmax after the dynamic padder: max in another fusion (a parameter
     here), padding columns masked out of the sum and the output; the exp is stashed in the
     output while the sum visits it (reduction.c), and read back for the divide */
  rn_check_text("masked softmax f32[4,96,96] (exp stashed)",
                RN_REDUCERS
                "fused {\n  x = f32[4,96,96] parameter(0)\n  m = f32[4,96] parameter(1)\n"
                "  n = s32[] constant(77)\n  z = f32[] constant(0)\n"
                "  zb = f32[4,96,96] broadcast(z), dimensions={}\n"
                "  mb = f32[4,96,96] broadcast(m), dimensions={0,1}\n  d = f32[4,96,96] subtract(x, mb)\n"
                "  e = f32[4,96,96] exponential(d)\n  nb = s32[4,96,96] broadcast(n), dimensions={}\n"
                "  io = s32[4,96,96] iota(), iota_dimension=2\n"
                "  c = pred[4,96,96] compare(io, nb), direction=LT\n  se = f32[4,96,96] select(c, e, zb)\n"
                "  s = f32[4,96] reduce(se, z), dimensions={2}, to_apply=add\n"
                "  sb = f32[4,96,96] broadcast(s), dimensions={0,1}\n  y = f32[4,96,96] divide(e, sb)\n"
                "  ROOT r = f32[4,96,96] select(c, y, zb)\n}\n",
                EMIT_KIND_REDUCTION, -4, 4, 1e-5, 1e-7);
  /* bf16: the sum keeps the evaluator's order (16-bit sums round at each step); exp and
     the divide round to bf16: 1 ulp (2^-8) relative */
  const char *b =
      "add {\n  a = bf16[] parameter(0)\n  b = bf16[] parameter(1)\n  ROOT c = bf16[] add(a, b)\n}\n"
      "max {\n  a = bf16[] parameter(0)\n  b = bf16[] parameter(1)\n  ROOT c = bf16[] maximum(a, b)\n}\n"
      "fused {\n  x = bf16[16,200] parameter(0)\n  ninf = bf16[] constant(-inf)\n  z = bf16[] constant(0)\n"
      "  m = bf16[16] reduce(x, ninf), dimensions={1}, to_apply=max\n"
      "  mb = bf16[16,200] broadcast(m), dimensions={0}\n  d = bf16[16,200] subtract(x, mb)\n"
      "  e = bf16[16,200] exponential(d)\n  s = bf16[16] reduce(e, z), dimensions={1}, to_apply=add\n"
      "  sb = bf16[16,200] broadcast(s), dimensions={0}\n  ROOT y = bf16[16,200] divide(e, sb)\n}\n";
  rn_check_text("softmax bf16[16,200]", b, EMIT_KIND_REDUCTION, -4, 4, 1.0 / 128, 1e-6);
}

/* A variadic reduce read through get-tuple-element (argmax -> one-hot), and a reduce to a
   scalar re-expanded to the whole input (one row: single-threaded). */
static void test_rownorm_variadic_and_scalar(void **state) {
  rn_check_text("one-hot of argmax f32[16,100]",
                "am {\n  a = f32[] parameter(0)\n  ai = s32[] parameter(1)\n  b = f32[] parameter(2)\n"
                "  bi = s32[] parameter(3)\n  gt = pred[] compare(a, b), direction=GE\n"
                "  v = f32[] select(gt, a, b)\n  i = s32[] select(gt, ai, bi)\n"
                "  ROOT t = (f32[], s32[]) tuple(v, i)\n}\n"
                "fused {\n  x = f32[16,100] parameter(0)\n  io = s32[16,100] iota(), iota_dimension=1\n"
                "  ninf = f32[] constant(-inf)\n  z = s32[] constant(0)\n"
                "  r = (f32[16], s32[16]) reduce(x, io, ninf, z), dimensions={1}, to_apply=am\n"
                "  i = s32[16] get-tuple-element(r), index=1\n  v = f32[16] get-tuple-element(r), index=0\n"
                "  ib = s32[16,100] broadcast(i), dimensions={0}\n  vb = f32[16,100] broadcast(v), dimensions={0}\n"
                "  eq = pred[16,100] compare(io, ib), direction=EQ\n  d = f32[16,100] subtract(x, vb)\n"
                "  oh = f32[16,100] convert(eq)\n  ROOT t = (f32[16,100], f32[16,100]) tuple(oh, d)\n}\n",
                EMIT_KIND_REDUCTION, -1, 1, 0, 0);
  rn_check_text("x - mean(all of x) f32[100,50]",
                RN_REDUCERS
                "fused {\n  x = f32[100,50] parameter(0)\n  z = f32[] constant(0)\n"
                "  s = f32[] reduce(x, z), dimensions={0,1}, to_apply=add\n  n = f32[] constant(5000)\n"
                "  mean = f32[] divide(s, n)\n  mb = f32[100,50] broadcast(mean), dimensions={}\n"
                "  ROOT y = f32[100,50] subtract(x, mb)\n}\n",
                EMIT_KIND_REDUCTION, -1, 1, 0, 1e-6);
}

static void test_log_softmax(void **state) {
  char *t = rn_softmax_text("8,64,64", "8,64", "0,1", 2,
                            "  ls = f32[8,64] log(s)\n  lb = f32[8,64,64] broadcast(ls), dimensions={0,1}\n"
                            "  ROOT y = f32[8,64,64] subtract(d, lb)\n");
  rn_check_text("log-softmax f32[8,64,64]", t, EMIT_KIND_REDUCTION, -4, 4, 0, 1e-5);
  arrfree(t);
}

static const char *rn_layernorm_text =
    RN_REDUCERS
    "fused {\n"
    "  x = f32[64,768] parameter(0)\n  g = f32[768] parameter(1)\n  b = f32[768] parameter(2)\n"
    "  z = f32[] constant(0)\n  n = f32[] constant(768)\n  nb = f32[64] broadcast(n), dimensions={}\n"
    "  s = f32[64] reduce(x, z), dimensions={1}, to_apply=add\n"
    "  mean = f32[64] divide(s, nb)\n"
    "  mb = f32[64,768] broadcast(mean), dimensions={0}\n"
    "  xc = f32[64,768] subtract(x, mb)\n  sq = f32[64,768] multiply(xc, xc)\n"
    "  q = f32[64] reduce(sq, z), dimensions={1}, to_apply=add\n"
    "  var = f32[64] divide(q, nb)\n"
    "  eps = f32[] constant(1e-05)\n  epsb = f32[64] broadcast(eps), dimensions={}\n"
    "  ve = f32[64] add(var, epsb)\n  rstd = f32[64] rsqrt(ve)\n"
    "  rb = f32[64,768] broadcast(rstd), dimensions={0}\n  xn = f32[64,768] multiply(xc, rb)\n"
    "  gb = f32[64,768] broadcast(g), dimensions={1}\n  xg = f32[64,768] multiply(xn, gb)\n"
    "  bb = f32[64,768] broadcast(b), dimensions={1}\n  y = f32[64,768] add(xg, bb)\n"
    "  ROOT t = (f32[64,768], f32[64], f32[64]) tuple(y, mean, rstd)\n"
    "}\n";

static void test_layer_norm(void **state) {
  rn_check_text("layer norm f32[64,768] + gamma/beta (mean, rstd)", rn_layernorm_text,
                EMIT_KIND_REDUCTION, -1, 1, 1e-5, 2e-5);
  /* variance as E[x^2] - mean^2: two independent reduces, a kept output reading both */
  const char *t =
      RN_REDUCERS
      "fused {\n"
      "  x = f32[4,16,96] parameter(0)\n  z = f32[] constant(0)\n  n = f32[] constant(96)\n"
      "  nb = f32[4,16] broadcast(n), dimensions={}\n"
      "  s = f32[4,16] reduce(x, z), dimensions={2}, to_apply=add\n"
      "  x2 = f32[4,16,96] multiply(x, x)\n"
      "  s2 = f32[4,16] reduce(x2, z), dimensions={2}, to_apply=add\n"
      "  mean = f32[4,16] divide(s, nb)\n  m2 = f32[4,16] divide(s2, nb)\n"
      "  mm = f32[4,16] multiply(mean, mean)\n  var = f32[4,16] subtract(m2, mm)\n"
      "  mr = f32[4,16,1] reshape(mean)\n  mi = f32[4,16,1] broadcast(mr), dimensions={0,1,2}\n"
      "  ms = f32[4,16] reshape(mi)\n  mb = f32[4,16,96] broadcast(ms), dimensions={0,1}\n"
      "  y = f32[4,16,96] subtract(x, mb)\n"
      "  ROOT t = (f32[4,16,96], f32[4,16]) tuple(y, var)\n"
      "}\n";
  rn_check_text("E[x^2]-mean^2, size-1 reshapes, kept output of 2", t, EMIT_KIND_REDUCTION, -1, 1, 1e-5, 1e-6);
}

/* Reduces over a middle / the major dim re-expanded: the sequential order, bit for bit. */
static void test_rownorm_general(void **state) {
  rn_check_text("x / bcast(sum over middle dim) f32[4,8,16]",
                RN_REDUCERS
                "fused {\n  x = f32[4,8,16] parameter(0)\n  z = f32[] constant(0)\n"
                "  s = f32[4,16] reduce(x, z), dimensions={1}, to_apply=add\n"
                "  sb = f32[4,8,16] broadcast(s), dimensions={0,2}\n"
                "  ROOT y = f32[4,8,16] divide(x, sb)\n}\n",
                EMIT_KIND_REDUCTION, 0.5, 1.5, 0, 0);
  rn_check_text("x - bcast(max over dim 0) f32[64,8]",
                RN_REDUCERS
                "fused {\n  x = f32[64,8] parameter(0)\n  ninf = f32[] constant(-inf)\n"
                "  m = f32[8] reduce(x, ninf), dimensions={0}, to_apply=max\n"
                "  mb = f32[64,8] broadcast(m), dimensions={1}\n"
                "  ROOT y = f32[64,8] subtract(x, mb)\n}\n",
                EMIT_KIND_REDUCTION, -1, 1, 0, 0);
}

/* A reduce read at another row: the reduction emitter refuses (its override would give the
   wrong row's value), emit_fusion falls back to the loop emitter, which matches. */
static void test_rownorm_refused(void **state) {
  const char *texts[] = {
    RN_REDUCERS
    "fused {\n  x = f32[16,32] parameter(0)\n  z = f32[] constant(0)\n"
    "  s = f32[16] reduce(x, z), dimensions={1}, to_apply=add\n"
    "  r = f32[16] reverse(s), dimensions={0}\n  ROOT y = f32[16] add(s, r)\n}\n",
    RN_REDUCERS
    "fused {\n  x = f32[32,32] parameter(0)\n  z = f32[] constant(0)\n"
    "  s = f32[32] reduce(x, z), dimensions={1}, to_apply=add\n"
    "  sb = f32[32,32] broadcast(s), dimensions={1}\n  ROOT y = f32[32,32] subtract(x, sb)\n}\n",
    RN_REDUCERS
    "fused {\n  x = f32[16,32] parameter(0)\n  z = f32[] constant(0)\n"
    "  s = f32[16] reduce(x, z), dimensions={1}, to_apply=add\n"
    "  sb = f32[16,32] broadcast(s), dimensions={0}\n  d = f32[16,32] subtract(x, sb)\n"
    "  sl = f32[16,31] slice(d), slice={[0:16], [1:32]}\n"
    "  ROOT q = f32[16] reduce(sl, z), dimensions={1}, to_apply=add\n}\n",
  };
  const char *names[] = { "s + reverse(s)", "transposed re-expansion", "slice between reduces" };
  for (int i = 0; i < 3; i++) {
    hlo_module *m = rn_parse(texts[i]);
    hlo_instr *f = rn_wrap(m, m->entry);
    char nm[64];
    cpu_jit_module jm;
    emit_module em;
    etu_jit_begin(&rn, "rn_refused", nm, sizeof nm, &jm, &em);
    emit_kernel k;
    hj_status st = emit_reduction_fusion(&em, f, NULL, nm, &k);
    emit_module_dispose(&em);
    cpu_jit_module_dispose(&jm);
    assert_int_equal(st, HJ_ERR_UNSUPPORTED);
    print_message("refused as expected: %s\n", hj_ctx_error(rn.ctx));
    rn_check(names[i], f, EMIT_KIND_LOOP, -1, 1, 0, 0);
    hlo_module_free(m);
  }
}

/* ---- the fixtures, whole and after the pipeline ---------------------------------------------- */

static bool rn_has_reduce(const hlo_comp *c) {
  for (ptrdiff_t i = 0; i < arrlen(c->instrs); i++)
    if (c->instrs[i]->op == HLO_OP_REDUCE) return true;
  return false;
}

/* Every fusion holding a reduce in the pipeline's output of |name|; returns how many. */
static int rn_check_pipeline(const char *name, double lo, double hi, double rtol, double atol) {
  char *t = rn_fixture(name);
  hlo_module *m = rn_parse(t);
  free(t);
  hlo_pass_ctx pc;
  rt_pass_ctx_init(&pc, rn.ctx);
  pc.dump_dir = NULL;
  CHECK_OK(rn.ctx, hlo_run_pipeline(&pc, m, NULL));
  int nred = 0;
  for (ptrdiff_t i = 0; i < arrlen(m->entry->instrs); i++) {
    const hlo_instr *f = m->entry->instrs[i];
    if (f->op != HLO_OP_FUSION) continue;
    if (!rn_has_reduce(f->calls[0])) continue;
    nred++;
    char what[128];
    snprintf(what, sizeof what, "%s after pipeline: %s", name, f->name);
    rn_check(what, f, EMIT_KIND_REDUCTION, lo, hi, rtol, atol);
  }
  hlo_module_free(m);
  return nred;
}

static void test_fixtures(void **state) {
  char *t = rn_fixture("softmax.hlo");
  rn_check_text("softmax.hlo whole", t, EMIT_KIND_REDUCTION, -4, 4, 1e-5, 1e-7);
  free(t);
  t = rn_fixture("layernorm.hlo");
  rn_check_text("layernorm.hlo whole", t, EMIT_KIND_REDUCTION, -1, 1, 1e-5, 2e-5);
  free(t);
  /* softmax: {max, sum of exp(x - max), exp(x - max) / sum}; layer norm: {mean, variance,
     normalise}: one reduce fusion each, its reduces chained per row */
  assert_int_equal(rn_check_pipeline("softmax.hlo", -4, 4, 1e-5, 1e-7), 1);
  assert_int_equal(rn_check_pipeline("layernorm.hlo", -1, 1, 1e-5, 2e-5), 1);
  /* a GPT-2 block: two layer norms and the attention softmax (scaled, masked) */
  assert_true(rn_check_pipeline("gpt2_block.hlo", -1, 1, 1e-5, 2e-5) >= 3);
  assert_int_equal(rn_check_pipeline("moments.hlo", -1, 1, 1e-5, 2e-5), 1);
}

/* ---- speed ------------------------------------------------------------------------------------- */

/* Best of |reps| single-threaded runs, ms. */
static double rn_time(const hlo_instr *f, bool force_loop, int reps) {
  emit_kernel k;
  etu_kernel_fn fn = rn_compile(f, force_loop, &k);
  rn_io io;
  rn_io_make(&io, f, -1, 1);
  void *bufs[128];
  for (int i = 0; i < io.nin; i++) bufs[i] = io.in[i]->data;
  for (int i = 0; i < io.nout; i++) bufs[io.nin + i] = io.out[i];
  double best = etu_best_time(fn, k.parallel_n, bufs, reps);
  rn_io_free(&io);
  return best * 1e3;
}

/* The fusion of |m|'s entry whose computation holds a reduce and has the entry root's shape. */
static const hlo_instr *rn_rownorm_fusion(hlo_module *m) {
  for (ptrdiff_t i = 0; i < arrlen(m->entry->instrs); i++) {
    const hlo_instr *f = m->entry->instrs[i];
    if (f->op == HLO_OP_FUSION && rn_has_reduce(f->calls[0]) &&
        hlo_same_dims(&f->shape, &m->entry->root->shape))
      return f;
  }
  fail_msg("no row normalisation fusion");
  return NULL;
}

static void test_bench(void **state) {
  const char *fx[] = { "layernorm.hlo", "softmax.hlo" }, *what[] = { "64x768 layer norm", "8x64x64 softmax" };
  for (int v = 0; v < 2; v++) {
    char *t = rn_fixture(fx[v]);
    hlo_module *m = rn_parse(t), *whole = rn_parse(t);
    free(t);
    hlo_pass_ctx pc;
    rt_pass_ctx_init(&pc, rn.ctx);
    pc.dump_dir = NULL;
    CHECK_OK(rn.ctx, hlo_run_pipeline(&pc, m, NULL));
    const hlo_instr *f = rn_rownorm_fusion(m), *w = rn_wrap(whole, whole->entry);
    double tr = rn_time(f, false, 50), tl = rn_time(f, true, 3);
    double wr = rn_time(w, false, 50), wl = rn_time(w, true, 1);
    print_message("bench %s, 1 thread: pipeline's row-norm fusion: reduction emitter %.3f ms, loop "
                  "fallback %.3f ms (%.0fx); whole module as one fusion: %.3f ms vs %.3f ms (%.0fx)\n",
                  what[v], tr, tl, tl / tr, wr, wl, wl / wr);
    hlo_module_free(m);
    hlo_module_free(whole);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_softmax),
    cmocka_unit_test(test_log_softmax),
    cmocka_unit_test(test_layer_norm),
    cmocka_unit_test(test_rownorm_general),
    cmocka_unit_test(test_rownorm_variadic_and_scalar),
    cmocka_unit_test(test_rownorm_refused),
    cmocka_unit_test(test_fixtures),
    cmocka_unit_test(test_bench),
  };
  return cmocka_run_group_tests(tests, rn_setup, rn_teardown);
}
#endif
