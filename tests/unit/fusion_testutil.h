/* fusion_testutil.h — helpers shared by test_fusion.c and test_fusion_fuzz.c (and the
   corpus walk by test_passes.c): random inputs, the optimising pipeline (simplification,
   fusion, scheduling) and a bitwise comparison of the evaluator on two modules. Include
   after testutil.h. */
#ifndef HLOJIT_FUSION_TESTUTIL_H
#define HLOJIT_FUSION_TESTUTIL_H
#include <math.h>

static hj_ctx_t *ftu_ctx;
static uint64_t ftu_rng = 0x243f6a8885a308d3ull;

static inline uint64_t ftu_next(void) {
  ftu_rng ^= ftu_rng << 13;
  ftu_rng ^= ftu_rng >> 7;
  ftu_rng ^= ftu_rng << 17;
  return ftu_rng;
}

/* Parameters for which ftu_few_specials (NULL: none) returns true get an IEEE special one
   float in 256 instead of one in 8: test_fusion_fuzz.c's panel-order weights, each output
   of whose dot sums up to 48 products, nearly all of which would be NaN or inf with 1 in 8. */
static bool (*ftu_few_specials)(const hlo_instr *param);

/* Random values in [-2, 2) (floats, one in |every| an IEEE special), small ints, random preds. */
static inline void ftu_fill(hlo_literal *l, uint64_t every) {
  for (int i = 0; i < l->nelems; i++) ftu_fill(l->elems[i], every);
  if (!hlo_shape_is_array(&l->shape)) return;
  hlo_type t = l->shape.type;
  int64_t n = hlo_shape_numel(&l->shape);
  static const double sp[] = { 0.0, -0.0, INFINITY, -INFINITY, NAN, 1.0, -1.0 };
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = ftu_next();
    if (hlo_type_is_float(t)) {
      double v = ((double)(r >> 11) / 9007199254740992.0) * 4.0 - 2.0;
      if (r % every == 0) v = sp[(r / every) % 7];
      hlo_store_f64(t, l->data, i, v);
    } else if (t == HLO_PRED) {
      hlo_store_u64(t, l->data, i, r & 1);
    } else {
      hlo_store_s64(t, l->data, i, (int64_t)(r % 9) - (hlo_type_class_of(t) == HLO_CLASS_SINT ? 4 : 0));
    }
  }
}

static inline hlo_literal **ftu_args(const hlo_module *m, uint64_t seed) {
  ftu_rng = seed * 0x9e3779b97f4a7c15ull + 1;
  int n = (int)arrlen(m->entry->params);
  hlo_literal **args = calloc((size_t)n + 1, sizeof *args);
  for (int i = 0; i < n; i++) {
    args[i] = hlo_literal_new(ftu_ctx, &m->entry->params[i]->shape);
    assert_non_null(args[i]);
    ftu_fill(args[i], ftu_few_specials && ftu_few_specials(m->entry->params[i]) ? 256 : 8);
  }
  return args;
}

static inline void ftu_free_args(hlo_literal **args, int n) {
  for (int i = 0; i < n; i++) hlo_literal_free(args[i]);
  free(args);
}

/* The optimising pipeline: hlo_run_pipeline (fusion passes on) then the scheduler. */
static inline hj_status ftu_optimize(hlo_module *m) {
  hlo_pass_ctx pc;
  rt_pass_ctx_init(&pc, ftu_ctx);
  pc.dump_dir = NULL;
  pc.verify_each = true;
  hlo_pipeline_options opt;
  hlo_pipeline_options_init(&opt);
  hj_status st = hlo_run_pipeline(&pc, m, &opt);
  bool ch = false;
  if (st == HJ_OK) st = hlo_pass_run(&pc, "schedule", hlo_pass_schedule, m, &ch);
  return st;
}

/* dot canonicalisation (the CPU backend's, passes/dot_canon.c) first, then the pipeline:
   the order the backend needs (the matmul emitter takes canonical dots only). */
static inline hj_status ftu_canon_optimize(hlo_module *m) {
  bool ch = false;
  hj_status st = hlo_pass_inline_calls(NULL, m, &ch);
  if (st == HJ_OK) st = hlo_pass_dot_canon(NULL, m, &ch);
  return st == HJ_OK ? ftu_optimize(m) : st;
}

/* The fusion passes alone (no simplification), then the scheduler. */
static inline hj_status ftu_fuse_only(hlo_module *m) {
  hlo_pass_ctx pc;
  rt_pass_ctx_init(&pc, ftu_ctx);
  pc.dump_dir = NULL;
  pc.verify_each = true;
  bool ch = false;
  hj_status st = hlo_pass_run(&pc, "inline-calls", hlo_pass_inline_calls, m, &ch);
  if (st == HJ_OK) st = hlo_pass_run(&pc, "fusion", hlo_pass_fusion, m, &ch);
  if (st == HJ_OK) st = hlo_pass_run(&pc, "sibling-fusion", hlo_pass_sibling_fusion, m, &ch);
  if (st == HJ_OK) st = hlo_pass_run(&pc, "epilogue", hlo_pass_matmul_epilogue_fusion, m, &ch);
  if (st == HJ_OK) st = hlo_pass_run(&pc, "schedule", hlo_pass_schedule, m, &ch);
  return st;
}

/* 1: |a| and |b| give the same bits on |rounds| random inputs; 0: they differ; -1: |a|
   cannot be evaluated (the caller decides whether that is a skip); -2: |b| cannot. */
static inline int ftu_same(const hlo_module *a, const hlo_module *b, int rounds) {
  int n = (int)arrlen(a->entry->params);
  int res = 1;
  for (int r = 0; r < rounds && res == 1; r++) {
    hlo_literal **args = ftu_args(a, (uint64_t)r + 1);
    hlo_literal *x = NULL, *y = NULL;
    if (hlo_eval_module(ftu_ctx, a, args, n, &x) != HJ_OK) res = -1;
    else if (hlo_eval_module(ftu_ctx, b, args, n, &y) != HJ_OK) res = -2;
    else if (!hlo_literal_equal(x, y)) res = 0;
    hlo_literal_free(x);
    hlo_literal_free(y);
    ftu_free_args(args, n);
  }
  return res;
}

static inline hlo_module *ftu_parse_file(const char *path) {
  size_t len = 0;
  char *text = tu_read_file(path, &len);
  if (!text) return NULL;
  hlo_module *m = NULL;
  hj_status st = hlo_parse_module(ftu_ctx, text, len, path, &m);
  free(text);
  return st == HJ_OK ? m : NULL;
}

/* Runs |fn| on every module of the shared corpus ($HLOJIT_CORPUS, else
   /work/shared/hlo-corpus, tu_each_hlo); skips the test, saying so, when it is absent.
   Returns how many modules. */
static inline int ftu_each_corpus_hlo(void (*fn)(const char *path, void *user), void *user) {
  const char *dir = getenv("HLOJIT_CORPUS");
  if (!dir) dir = "/work/shared/hlo-corpus";
  int n = tu_each_hlo(dir, fn, user);
  if (n < 0) {
    printf("  skipped: no corpus at %s\n", dir);
    skip();
  }
  return n;
}

static inline int64_t ftu_max_numel(const hlo_module *m) {
  int64_t mx = 0;
  for (ptrdiff_t c = 0; c < arrlen(m->comps); c++)
    for (ptrdiff_t i = 0; i < arrlen(m->comps[c]->instrs); i++) {
      const hlo_shape *s = &m->comps[c]->instrs[i]->shape;
      if (hlo_shape_is_array(s) && hlo_shape_numel(s) > mx) mx = hlo_shape_numel(s);
    }
  return mx;
}

/* ---- a backend against the evaluator (test_fusion_fuzz.c, test_cuda_emu_fuzz.c) ----------
   ftu_check compiles |m| for a target (ftu_target: ftu_cpu_check's is hj_compile_module on
   a CPU context, the backend's own pipeline: dot canonicalisation, passes with fusion, the
   partitioner, wrapping, emission, LLVM O3; test_cuda_emu_fuzz.c's is the CUDA backend's
   emitters on the GPU emulator) and compares its outputs with the evaluator on the
   UNOPTIMISED |m|, on |rounds| input sets (ftu_args).

   Tolerance. Integers and preds must be equal; floats must have the same class (NaN, +inf,
   -inf, finite) and, when finite, |cpu - eval| <= 2 s + 2^-20 |eval| + 1e-37, where s is
   the element's sensitivity to rounding: the largest deviation from the exact (f64)
   result of the module of
     (a) the module in f64 with every rounding op's result scaled by 1 ± 2^-19 (32 f32
         ulps; FTU_PROBES probes: all +, all -, then four with the sign of element i bit
         0, 1, 2, 3 of i, flipped per instruction at random: x - max(x) over tanh values
         cancels an error of one sign for the whole instruction, not the CPU's, which
         differs from element to element — seeds 8581 and 21481 of the fusion fuzzer
         failed by up to 1.6x their tolerance with per-instruction signs only), every
         sum-reduce and dot moved by ± 2^-19 sqrt(n) sum|terms| (the error of a reordered
         sum of n terms), and every zero of a max/min-reduce given either sign
         (maximum(+0, -0) is its first operand, so the summation order picks the sign);
     (b) the evaluator's own f32 result.
   Why: the CPU backend differs from the evaluator only in rounding — its exp, log, tanh,
   logistic polynomials are within 3.5 ulps (emit_math.c), its reductions and dots sum in
   another order (vector accumulators, blocked matmul), everything else is the same IEEE
   op — so both results lie within about s of the exact value, hence within 2 s of each
   other. The same holds for the GPU kernels (libdevice within 2 ulps, and the host's libm
   in the emulator; tree reductions, tiled dots). Elements whose class changes under a probe, whose f32 evaluator class differs
   from f64's (overflow, a NaN made by rounding), or whose exact value is beyond 1e37 are
   ill-conditioned: not compared, counted. Where the exact result is a discontinuous
   function of a rounded value (floor, sign, compare/select near a tie) the probes cross
   the jump and s is large, so the element is compared only loosely — counted as "loose"
   (s > 2^-10 |eval|). On 1,000 fuzz graphs (with panel-order dots, cache updates and
   wide graphs): 97% of the elements are bitwise equal, 0.9% ill-conditioned, and the
   largest error seen is 0.17 of its tolerance (0.11 over seeds 5000-8999, 0.09 over
   100001-103000). The emulated GPU (test_cuda_emu_fuzz): 0.50 over seeds 1-3000, 0.09
   over 100001-103000. */
#define FTU_PROBES 6
#define FTU_DELTA (1.0 / 524288.0)

typedef struct ftu_tally {
  int graphs, compiled, clean;          /* clean: no evaluator fallback at all */
  int fallback_graphs, emit_error_graphs, runtime_ops;
  int64_t elems, exact, loose, illcond; /* compared bitwise equal, loosely, not compared */
  double compile_ms, max_err_ratio;     /* max |cpu - eval| / tol over compared floats */
  double passes_ms, emit_ms, optimize_ms, codegen_ms;
  int last_fallbacks;                   /* of the last graph compiled */
  int64_t fusions;                      /* fusions the target compiled, in all */
  int64_t kernels[5];                   /* kernels: loop, reduction, transpose, matmul, dus */
  int inplace_updates;                  /* hj_exec_stats' inplace_updates */
} ftu_tally;

static inline hj_ctx_t *ftu_cpu_ctx_new(void) {
  hj_ctx_options_t o;
  hj_ctx_options_init(&o);
  o.backend = HJ_BACKEND_CPU;
  hj_ctx_t *ctx = NULL;
  if (hj_ctx_create(&o, &ctx) != HJ_OK) fail_msg("hj_ctx_create (CPU) failed");
  return ctx;
}

/* Array leaves of |l|, depth first, appended to *out (stb_ds). */
static inline void ftu_lit_leaves(hlo_literal *l, hlo_literal ***out) {
  if (hlo_shape_is_array(&l->shape)) { arrput(*out, l); return; }
  for (int i = 0; i < l->nelems; i++) ftu_lit_leaves(l->elems[i], out);
}

static inline bool ftu_rounds(const hlo_instr *x) {
  switch (x->op) {
  case HLO_OP_ADD: case HLO_OP_SUBTRACT: case HLO_OP_MULTIPLY: case HLO_OP_DIVIDE:
  case HLO_OP_POWER: case HLO_OP_REMAINDER: case HLO_OP_ATAN2: case HLO_OP_EXP: case HLO_OP_EXPM1:
  case HLO_OP_LOG: case HLO_OP_LOG1P: case HLO_OP_LOGISTIC: case HLO_OP_TANH: case HLO_OP_SQRT:
  case HLO_OP_RSQRT: case HLO_OP_CBRT: case HLO_OP_SIN: case HLO_OP_COS: case HLO_OP_TAN:
  case HLO_OP_ERF:
    return true;
  default:
    return false;
  }
}

/* A scalar f64 constant broadcast to |like|'s shape, before |before|. */
static inline hlo_instr *ftu_bcast_const(hlo_comp *e, const hlo_instr *before, const hlo_shape *like, double v) {
  hlo_shape ss = { .type = HLO_F64 };
  hlo_literal *l = hlo_literal_new(ftu_ctx, &ss);
  hlo_store_f64(HLO_F64, l->data, 0, v);
  hlo_instr *c = hlo_constant_new_before(e, before, l);
  hlo_literal_free(l);
  hlo_shape bs = *like;
  bs.has_layout = false;
  hlo_instr *b = hlo_instr_new_before(e, before, HLO_OP_BROADCAST, NULL, &bs, &c, 1);
  b->dims = hlo_ints_dup(e->module, NULL, 0);
  return b;
}

/* An f64 constant of |like|'s shape whose elements are 1 + delta or 1 - delta: the sign of
   element i is bit |bit| of i, flipped when |flip|. A rounding op's error differs from
   element to element (a polynomial tanh is off by different ulps at different x), and a
   result like x[i] - max(x) sees the difference of two elements' errors: the probes with
   bits 0..3 give every two elements of a row of up to 16 opposite signs in one of them. */
static inline hlo_instr *ftu_elem_scale(hlo_comp *e, const hlo_shape *like, double delta, int bit, bool flip) {
  hlo_shape ls = *like;
  ls.type = HLO_F64;
  hlo_shape_set_default_layout(&ls);
  hlo_literal *l = hlo_literal_new(ftu_ctx, &ls);
  int64_t n = hlo_shape_numel(&ls);
  for (int64_t i = 0; i < n; i++)
    hlo_store_f64(HLO_F64, l->data, i, ((i >> bit) & 1) ^ flip ? 1.0 + delta : 1.0 - delta);
  hlo_instr *c = hlo_constant_new_before(e, NULL, l);
  hlo_literal_free(l);
  return c;
}

/* Adds to |y| (a sum-reduce, a dot or a convolution, in f64) v * the same op on
   |operands|' absolute values: the bound of a reordered sum scaled by v. Returns the new
   value. */
static inline hlo_instr *ftu_perturb_sum(hlo_comp *e, hlo_instr *y, double v) {
  hlo_instr *ops[2] = { y->operands[0], y->operands[1] };
  int nabs = y->op == HLO_OP_DOT || y->op == HLO_OP_CONVOLUTION ? 2 : 1;
  for (int k = 0; k < nabs; k++)
    ops[k] = hlo_instr_new_before(e, NULL, HLO_OP_ABS, NULL, &y->operands[k]->shape, &ops[k], 1);
  char nm[64];
  snprintf(nm, sizeof nm, "ftu.abs_sum.%d", y->id);
  hlo_instr *s = hlo_instr_clone_into(e, y, nm, ops, y->calls);
  if (!s) return y;
  hlo_instr *c = ftu_bcast_const(e, NULL, &y->shape, v);
  hlo_instr *t = hlo_instr_new_before(e, NULL, HLO_OP_MULTIPLY, NULL, &y->shape, (hlo_instr *[]){ s, c }, 2);
  return hlo_instr_new_before(e, NULL, HLO_OP_ADD, NULL, &y->shape, (hlo_instr *[]){ y, t }, 2);
}

/* |m| in f64 (every f32 in its text becomes f64), with probe |k| applied (k = 0: none;
   1: every rounding op +2^-19, 2: every one -2^-19, else per element: the sign bit k - 3
   of the element's index, flipped per instruction at random; sums and max-reduce zeros
   take the instruction's random sign). NULL when the text does not parse back (then
   nothing is compared loosely: the caller fails). */
static inline hlo_module *ftu_probe_module(const hlo_module *m, int k) {
  char *text = NULL;
  if (hlo_print_module(m, &text) != HJ_OK) return NULL;
  for (char *p = text; (p = strstr(p, "f32")); p += 3) p[2] = '4', p[1] = '6';
  hlo_module *o = NULL;
  hj_status st = hlo_parse_module(ftu_ctx, text, strlen(text), "probe", &o);
  free(text);
  if (st != HJ_OK) return NULL;
  if (k == 0) return o;
  hlo_comp *e = o->entry;
  uint64_t rs = 0x9e3779b97f4a7c15ull * (uint64_t)k;
  ptrdiff_t n = arrlen(e->instrs);
  for (ptrdiff_t i = 0; i < n; i++) {
    hlo_instr *y = e->instrs[i];
    if (!hlo_shape_is_array(&y->shape) || y->shape.type != HLO_F64) continue;
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    double sg = k == 1 ? 1.0 : k == 2 ? -1.0 : (rs >> 32) & 1 ? 1.0 : -1.0;
    hlo_instr *neu = NULL;
    if (ftu_rounds(y)) {
      hlo_instr *c = k >= 3 ? ftu_elem_scale(e, &y->shape, FTU_DELTA, k - 3, sg < 0)
                            : ftu_bcast_const(e, NULL, &y->shape, 1.0 + sg * FTU_DELTA);
      neu = hlo_instr_new_before(e, NULL, HLO_OP_MULTIPLY, NULL, &y->shape, (hlo_instr *[]){ y, c }, 2);
    } else if ((y->op == HLO_OP_REDUCE && y->noperands == 2 && y->calls[0]->root->op == HLO_OP_ADD) ||
               y->op == HLO_OP_DOT || y->op == HLO_OP_CONVOLUTION) {
      int64_t nsum = 1;
      const hlo_ints *d = y->op == HLO_OP_DOT ? &y->dot.lhs_contract : &y->dims;
      if (y->op == HLO_OP_CONVOLUTION)   /* kernel input features x window taps */
        for (int j = 0; j < y->operands[1]->shape.rank; j++)
          nsum *= j == y->conv.k_out ? 1 : y->operands[1]->shape.dims[j];
      else
        for (int j = 0; j < d->n; j++) nsum *= y->operands[0]->shape.dims[d->v[j]];
      neu = ftu_perturb_sum(e, y, sg * FTU_DELTA * sqrt((double)nsum));
    } else if (y->op == HLO_OP_REDUCE && y->noperands == 2 && (y->calls[0]->root->op == HLO_OP_MAXIMUM ||
                                                                y->calls[0]->root->op == HLO_OP_MINIMUM)) {
      /* max(+0, -0) is its first operand: a reordered max-reduce may give either zero */
      hlo_shape ps = y->shape;
      ps.type = HLO_PRED;
      ps.has_layout = false;
      hlo_instr *z = ftu_bcast_const(e, NULL, &y->shape, 0.0);
      hlo_instr *q = hlo_instr_new_before(e, NULL, HLO_OP_COMPARE, NULL, &ps, (hlo_instr *[]){ y, z }, 2);
      q->cmp_dir = HLO_CMP_EQ;
      hlo_instr *sz = ftu_bcast_const(e, NULL, &y->shape, sg > 0 ? 0.0 : -0.0);
      neu = hlo_instr_new_before(e, NULL, HLO_OP_SELECT, NULL, &y->shape, (hlo_instr *[]){ q, sz, y }, 3);
    }
    if (!neu || neu == y) continue;
    hlo_replace_all_uses(e, y, neu);
    for (int j = 0; j < neu->noperands; j++)   /* the zero probe's compare reads y too */
      if (neu->operands[j]->op == HLO_OP_COMPARE) hlo_replace_operand(neu->operands[j], neu, y);
  }
  if (hlo_comp_topo_sort(e) != HJ_OK || hlo_verify_module(o) != HJ_OK) {
    hlo_module_free(o);
    return NULL;
  }
  return o;
}

/* Runs executable |e| on |args| (array literals); *out: a copy of |like| (the evaluator's
   result) holding the CPU's outputs. */
static inline hj_status ftu_cpu_exec(hj_ctx_t *cpu, hj_exec_t *e, hlo_literal *const *args, int nargs,
                                     const hlo_literal *like, hlo_literal **out) {
  *out = NULL;
  hj_buffer_t *in[64] = { 0 }, *res[64] = { 0 };
  int nout = hj_exec_num_outputs(e);
  if (nargs > 64 || nout > 64) return hj__err(cpu, HJ_ERR_INVALID_ARG, "too many buffers");
  hj_status st = HJ_OK;
  for (int i = 0; i < nargs && st == HJ_OK; i++) {
    if (!hlo_shape_is_array(&args[i]->shape))
      return hj__err(cpu, HJ_ERR_UNSUPPORTED, "ftu_cpu_exec: parameter %d is not an array", i);
    hj_shape_t s = { .rank = args[i]->shape.rank };
    for (int d = 0; d < s.rank; d++) s.dims[d] = args[i]->shape.dims[d];
    st = hj_buffer_from_host(cpu, (hj_dtype_t)args[i]->shape.type, s, args[i]->data, &in[i]);
  }
  if (st == HJ_OK) st = hj_exec_run(e, in, nargs, res, nout);
  hlo_literal **leaves = NULL;
  if (st == HJ_OK) {
    *out = hlo_literal_clone(ftu_ctx, like);
    ftu_lit_leaves(*out, &leaves);
    if (arrlen(leaves) != nout) st = hj__err(cpu, HJ_ERR_INTERNAL, "%d outputs, %d leaves", nout, (int)arrlen(leaves));
    for (int i = 0; i < nout && st == HJ_OK; i++) {
      memset(leaves[i]->data, 0xA5, (size_t)leaves[i]->nbytes);
      st = hj_buffer_copy_to_host(res[i], leaves[i]->data, (size_t)leaves[i]->nbytes);
    }
  }
  arrfree(leaves);
  for (int i = 0; i < nargs; i++) hj_buffer_destroy(in[i]);
  for (int i = 0; i < nout; i++) hj_buffer_destroy(res[i]);
  return st;
}

/* 0 NaN, 1 +inf, 2 -inf, 3 finite. */
static inline int ftu_fclass(double v) { return isnan(v) ? 0 : isinf(v) ? (v > 0 ? 1 : 2) : 3; }

/* Compares a backend's |y| with the evaluator's |x| (the tolerance above): |ref| is the
   exact (f64) result, |probes| the perturbed ones. false with a message in |why|. */
static inline bool ftu_compare(hlo_literal *x, hlo_literal *y, hlo_literal *ref, hlo_literal *const *probes,
                                   int nprobes, ftu_tally *t, char *why, size_t nwhy) {
  hlo_literal **lx = NULL, **ly = NULL, **lr = NULL, **lp[FTU_PROBES] = { 0 };
  ftu_lit_leaves(x, &lx);
  ftu_lit_leaves(y, &ly);
  ftu_lit_leaves(ref, &lr);
  for (int k = 0; k < nprobes; k++) ftu_lit_leaves(probes[k], &lp[k]);
  bool ok = true;
  for (ptrdiff_t L = 0; L < arrlen(lx) && ok; L++) {
    hlo_type tx = lx[L]->shape.type, tr = lr[L]->shape.type;
    bool fl = hlo_type_is_float(tx);
    int64_t n = hlo_shape_numel(&lx[L]->shape);
    for (int64_t i = 0; i < n && ok; i++) {
      double b = hlo_load_f64(tx, lx[L]->data, i), a = hlo_load_f64(tx, ly[L]->data, i);
      double r = hlo_load_f64(tr, lr[L]->data, i), s = 0;
      bool ill = ftu_fclass(b) != ftu_fclass(r) || (fl && fabs(r) > 1e37 && !isinf(r));
      for (int k = 0; k < nprobes && !ill; k++) {
        double p = hlo_load_f64(tr, lp[k][L]->data, i);
        if (ftu_fclass(p) != ftu_fclass(r) || (!fl && p != r)) ill = true;
        else if (isfinite(p)) s = fmax(s, fabs(p - r));
      }
      if (!fl && !ill && b != r) ill = true;
      t->elems++;
      if (ill) { t->illcond++; continue; }
      if (isfinite(b)) s = fmax(s, fabs(b - r));
      bool same = fl ? (ftu_fclass(a) == 0 && ftu_fclass(b) == 0) || memcmp(&a, &b, sizeof a) == 0 : a == b;
      if (same) { t->exact++; continue; }
      double tol = 2 * s + fabs(b) / 1048576.0 + 1e-37;
      if (fl && s > fabs(b) / 1024.0) t->loose++;
      if (fl && ftu_fclass(a) == 3 && ftu_fclass(b) == 3 && fabs(a - b) <= tol) {
        t->max_err_ratio = fmax(t->max_err_ratio, fabs(a - b) / tol);
        continue;
      }
      ok = false;
      snprintf(why, nwhy, "output %d element %lld: %.9g, evaluator %.9g (exact %.9g, tolerance %.3g)",
               (int)L, (long long)i, a, b, r, tol);
    }
  }
  arrfree(lx); arrfree(ly); arrfree(lr);
  for (int k = 0; k < nprobes; k++) arrfree(lp[k]);
  return ok;
}

/* Evaluates the probe modules |mods| (ftu_probe_module 0..FTU_PROBES) on |args|
   converted to f64; ref[k] receives each result. false when one does not run. */
static inline bool ftu_probe_eval(hlo_module *const *mods, hlo_literal *const *args, int n, hlo_literal **ref) {
  if (!mods[0]) return false;
  hlo_literal **args64 = calloc((size_t)n + 1, sizeof *args64);
  for (int i = 0; i < n; i++) {
    args64[i] = hlo_literal_new(ftu_ctx, &mods[0]->entry->params[i]->shape);
    int64_t ne = hlo_shape_numel(&args[i]->shape);
    for (int64_t j = 0; j < ne; j++)
      hlo_store_f64(args64[i]->shape.type, args64[i]->data, j, hlo_load_f64(args[i]->shape.type, args[i]->data, j));
  }
  bool all = true;
  for (int k = 0; k <= FTU_PROBES && all; k++)
    all = mods[k] && hlo_eval_module(ftu_ctx, mods[k], args64, n, &ref[k]) == HJ_OK;
  ftu_free_args(args64, n);
  return all;
}

/* A backend under test: |compile| makes an executable of |m| (opaque, |destroy| frees it)
   and fills |stats|; |run| runs it on |args| (array literals), *out a copy of |like| (the
   evaluator's result) holding its outputs. Errors go to |ctx|. */
typedef struct ftu_target {
  const char *name;   /* "CPU", "emulated GPU": the messages' prefix */
  hj_ctx_t *ctx;
  void *self;
  hj_status (*compile)(void *self, const hlo_module *m, void **exe, hj_exec_stats_t *stats);
  hj_status (*run)(void *self, void *exe, hlo_literal *const *args, int nargs, const hlo_literal *like,
                   hlo_literal **out);
  void (*destroy)(void *exe);
} ftu_target;

/* 0: the target matches the evaluator on the unoptimised |m| for |rounds| input sets (the
   tolerance above); 1: values differ; 2: compile or run failed; 3: an emitter error
   (emit_errors > 0); -1: the evaluator cannot run |m| (not counted). |t| (may be NULL) is
   updated. */
static inline int ftu_check(const ftu_target *tg, const hlo_module *m, int rounds, ftu_tally *t,
                            char *why, size_t nwhy) {
  ftu_tally scratch = { 0 };
  if (!t) t = &scratch;
  hlo_module *mods[FTU_PROBES + 1] = { 0 };
  for (int k = 0; k <= FTU_PROBES; k++) mods[k] = ftu_probe_module(m, k);
  void *e = NULL;
  hj_exec_stats_t es = { 0 };
  int res = 0;
  t->graphs++;
  if (tg->compile(tg->self, m, &e, &es) != HJ_OK) {
    snprintf(why, nwhy, "%s compile: %s", tg->name, hj_ctx_error(tg->ctx));
    res = 2;
  } else {
    t->compiled++;
    t->compile_ms += es.compile_ms;
    t->passes_ms += es.passes_ms;
    t->emit_ms += es.emit_ms;
    t->optimize_ms += es.optimize_ms;
    t->codegen_ms += es.codegen_ms;
    t->last_fallbacks = es.evaluator_fallbacks;
    t->fusions += es.fusions;
    const int kinds[5] = { es.kernels_loop, es.kernels_reduction, es.kernels_transpose, es.kernels_matmul, es.kernels_dus };
    for (int k = 0; k < 5; k++) t->kernels[k] += kinds[k];
    t->inplace_updates += es.inplace_updates;
    t->clean += es.evaluator_fallbacks == 0;
    t->fallback_graphs += es.evaluator_fallbacks > 0;
    t->runtime_ops += es.runtime_ops;
    if (es.emit_errors > 0) {
      t->emit_error_graphs++;
      snprintf(why, nwhy, "%d emitter error(s) (HLOJIT_DUMP_TO shows them in the thunk dump)", es.emit_errors);
      res = 3;
    }
  }
  int n = (int)arrlen(m->entry->params);
  for (int r = 0; r < rounds && res == 0; r++) {
    hlo_literal **args = ftu_args(m, (uint64_t)r + 1), *x = NULL, *y = NULL, *ref[FTU_PROBES + 1] = { 0 };
    char w[1024];
    if (hlo_eval_module(ftu_ctx, m, args, n, &x) != HJ_OK) {
      res = -1;
    } else if (tg->run(tg->self, e, args, n, x, &y) != HJ_OK) {
      snprintf(why, nwhy, "%s run: %s", tg->name, hj_ctx_error(tg->ctx));
      res = 2;
    } else {
      if (!ftu_probe_eval(mods, args, n, ref)) {
        snprintf(why, nwhy, "the f64 probes of the module do not run: %s", hj_ctx_error(ftu_ctx));
        res = 2;
      } else if (!ftu_compare(x, y, ref[0], ref + 1, FTU_PROBES, t, w, sizeof w)) {
        snprintf(why, nwhy, "%s %.900s", tg->name, w);
        res = 1;
      }
      for (int k = 0; k <= FTU_PROBES; k++) hlo_literal_free(ref[k]);
    }
    hlo_literal_free(x);
    hlo_literal_free(y);
    ftu_free_args(args, n);
  }
  if (e) tg->destroy(e);
  for (int k = 0; k <= FTU_PROBES; k++) hlo_module_free(mods[k]);
  return res;
}

/* The CPU backend as a target: hj_compile_module on |cpu|, runs by ftu_cpu_exec. */
static inline hj_status ftu_cpu_compile(void *self, const hlo_module *m, void **exe, hj_exec_stats_t *stats) {
  hj_exec_t *e = NULL;
  hj_status st = hj_compile_module((hj_ctx_t *)self, (hj_module_t *)m, &e);
  if (st == HJ_OK) hj_exec_stats(e, stats);
  *exe = e;
  return st;
}
static inline hj_status ftu_cpu_run(void *self, void *exe, hlo_literal *const *args, int nargs,
                                    const hlo_literal *like, hlo_literal **out) {
  return ftu_cpu_exec((hj_ctx_t *)self, (hj_exec_t *)exe, args, nargs, like, out);
}
static inline void ftu_cpu_destroy(void *exe) { hj_exec_destroy((hj_exec_t *)exe); }

static inline int ftu_cpu_check(hj_ctx_t *cpu, const hlo_module *m, int rounds, ftu_tally *t,
                                char *why, size_t nwhy) {
  const ftu_target tg = { "CPU", cpu, cpu, ftu_cpu_compile, ftu_cpu_run, ftu_cpu_destroy };
  return ftu_check(&tg, m, rounds, t, why, nwhy);
}
#endif
