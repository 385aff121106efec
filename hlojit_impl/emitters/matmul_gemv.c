/* matmul_gemv.c — the matmul emitter's M = 1 kernels (the plan's use_gemv; signatures in
   matmul_plan.h): gemv (B normal, rows of B in groups), gemvt (B transposed, rows side by
   side with a fixed reduction tree), gemvp (B in panel order, panels side by side). Each
   keeps one fma chain per output in k order, so the bits do not depend on the grouping or
   the thread split. matmul.c names them in the plan; cpu_matmul.c calls them. */
#include "matmul_internal.h"

/* ---- gemv (M = 1) ------------------------------------------------------------------------------ */

/* A counted loop j = |start|; j + step <= n; j += step around |body|; returns the j after. */
typedef void (*emm_body_fn)(emit_module *em, LLVMValueRef fn, LLVMValueRef *args, LLVMValueRef j, int arg);
static LLVMValueRef emx_step_loop(emit_module *em, LLVMValueRef fn, LLVMValueRef start,
                                  LLVMValueRef n, int64_t step, emm_body_fn body,
                                  LLVMValueRef *args, int arg) {
  LLVMBuilderRef b = em->b;
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
  LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(em->llctx, fn, "jh");
  LLVMBasicBlockRef bodyb = LLVMAppendBasicBlockInContext(em->llctx, fn, "jb");
  LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(em->llctx, fn, "jx");
  LLVMBuildBr(b, head);
  LLVMPositionBuilderAtEnd(b, head);
  LLVMValueRef j = LLVMBuildPhi(b, em->t_i64, "j");
  LLVMValueRef jn = LLVMBuildAdd(b, j, emit_ci(em->t_i64, step), "");
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLE, jn, n, ""), bodyb, exit);
  LLVMPositionBuilderAtEnd(b, bodyb);
  body(em, fn, args, j, arg);
  LLVMBasicBlockRef last = LLVMGetInsertBlock(b);
  LLVMBuildBr(b, head);
  LLVMAddIncoming(j, (LLVMValueRef[]){ start, jn }, (LLVMBasicBlockRef[]){ pre, last }, 2);
  LLVMPositionBuilderAtEnd(b, exit);
  return j;
}

/* llvm.masked.load / llvm.masked.store of a <vw x float> (lanes off in |mask| untouched). */
static LLVMValueRef emx_masked(emit_module *em, LLVMValueRef store_val, LLVMTypeRef vt, LLVMValueRef p,
                               LLVMValueRef mask) {
  const char *nm = store_val ? "llvm.masked.store" : "llvm.masked.load";
  unsigned id = LLVMLookupIntrinsicID(nm, strlen(nm));
  LLVMTypeRef ts[2] = { vt, em->t_ptr };
  LLVMValueRef fn = LLVMGetIntrinsicDeclaration(em->mod, id, ts, 2);
  LLVMValueRef align = LLVMConstInt(em->t_i32, LLVMGetElementType(vt) == em->t_i16 ? 2 : 4, 0);
  LLVMValueRef args[4] = { store_val, p, align, mask };
  if (!store_val) args[0] = p, args[1] = align, args[2] = mask, args[3] = LLVMGetPoison(vt);
  return LLVMBuildCall2(em->b, LLVMIntrinsicGetType(em->llctx, id, ts, 2), fn, args, 4, "");
}

/* The gemv for B normal streams whole rows (see matmul_plan.h): per group of R rows (the
   plan's gemv_rows, 1 or 12; then 4, then 1 at a time for the rest), one pass over y[0, n):
   y[j] = fma(x[k+R-1], b[k+R-1][j], ... fma(x[k], b[k][j], y[j])), n % vw columns by
   masked loads. The same fma chain per column as a column-at-a-time loop, whatever R, but
   B is read as R sequential streams of whole rows and y stays in L1/L2 (what OpenBLAS's
   sgemv_n does too). In a C model of it on Zen 5 this read B at 0.94 of a plain streaming
   read on one thread, blocks of columns walked down the rows at 0.92.
   Row group args: x, b, y, ldb, nfull (n - n % vw), rem (n % vw), lane ids; arg = R | bf16 << 8
   (B's elements bf16, widened as loaded).
   R = 1 for every shape (B as one sequential stream, y updated in L1) was tried on Zen 4
   (AVX-512): bench_matmul M = 1 on 1 thread read B at 0.89-1.06 of the bandwidth (one run
   0.71) against 0.52-0.79 for R = 4, but inside the runtime it lost on long rows (GPT-2
   decode fc 13-17 GB/s against 23; bench_gpt2 decode 30.8 ms against 23.2), and in
   bench_matmul its speed later moved (0.41-1.02) with builds that only moved the partial y.
   bench_matmul's best-of over back-to-back calls hid that: check a gemv change with a
   model's profile too (HLOJIT_PROFILE=1 build/gpt2 ...). R = 1 is kept for short rows only
   (emit_matmul_plan, gemv_rows). For long rows more rows per pass read faster, up to 12:
   Zen 4, 1 thread, build/gpt2 --layouts plain, f32 124M, fc / qkv GB/s: R = 1 18 / 20,
   2 20.5 / 19.6, 4 24.5 / 22.5, 8 26 / 25.3, 12 27 / 27.5, 16 27.1 / 28.3; the lm_head
   (768 x 50304) 4.99-5.17 ms with 12 against 5.41-5.53 with 8 or 16. Placing the partial y
   at a chosen 4 KiB offset from B (0 or 2 KiB) left R = 1's figures as they were (not 4K
   aliasing), and blocks of 768-1024 columns walked down all the rows read 12 GB/s. */
#define EMM_GEMV_ROWS 12   /* the most rows per group (array sizes) */
/* No software prefetching: the f32 gemvs never had it (on Zen 4 prefetching the next row
   group took a GPT-2 124M decode block from 1.35-1.46 ms to 1.59-1.63 and the lm_head from
   6.4 to 9.1 ms), and the bf16 ones, which prefetched the rows two groups ahead (a gain on
   Zen 3 with groups of 4 rows: bench_matmul fc.proj 7.2 -> 10.6 GB/s), lost with it on Zen 4:
   build/gpt2 --layouts plain, bf16 124M, 8-row groups, 3 runs each alternated, 1 thread: a
   block 0.60-0.64 ms without against 0.65-0.67 with, the lm_head 2.77 against 3.95-4.00;
   2 threads 0.37-0.39 against 0.40-0.47, lm_head 1.45-1.49 against 2.06-2.68. The gemvt
   reads one row at a time (matmul.c gemv_cols), where the prefetch never applied. */
static void emx_gemv_cols(emit_module *em, LLVMValueRef fn, LLVMValueRef *a, LLVMValueRef j, int rows) {
  LLVMTypeRef vt = LLVMTypeOf(a[EMM_GEMV_ROWS + 1]);
  bool bf16 = rows >> 8;
  rows &= 255;
  LLVMValueRef py = emx_gep(em, a[0], j), acc = emx_load(em, vt, py);
  for (int r = 0; r < rows; r++)
    acc = emx_fma(em, a[1 + EMM_GEMV_ROWS + r], emx_load_b(em, vt, emx_gep_b(em, a[1 + r], j, bf16), bf16), acc);
  emx_store(em, acc, py);
}

static void emx_gemv_rows(emit_module *em, LLVMValueRef fn, LLVMValueRef *a, LLVMValueRef k, int arg) {
  LLVMBuilderRef b = em->b;
  int rows = arg >> 8 & 255, vw = arg & 255;
  bool bf16 = arg >> 16;
  LLVMValueRef c[1 + 2 * EMM_GEMV_ROWS] = { a[2] };   /* y, row pointers, splat x */
  for (int r = 0; r < rows; r++) {
    LLVMValueRef kr = LLVMBuildAdd(b, k, emit_ci(em->t_i64, r), "");
    c[1 + r] = emx_gep_b(em, a[1], LLVMBuildMul(b, kr, a[3], ""), bf16);
    c[1 + EMM_GEMV_ROWS + r] = emx_splat(em, emx_load(em, em->t_f32, emx_gep(em, a[0], kr)), vw);
  }
  for (int r = rows; r < EMM_GEMV_ROWS; r++) c[1 + r] = c[1], c[1 + EMM_GEMV_ROWS + r] = c[1 + EMM_GEMV_ROWS];
  LLVMValueRef j = emx_step_loop(em, fn, emit_ci(em->t_i64, 0), a[4], vw, emx_gemv_cols, c, rows | bf16 << 8);
  /* the last n % vw columns, if any */
  LLVMBasicBlockRef tail = LLVMAppendBasicBlockInContext(em->llctx, fn, "gtail");
  LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(em->llctx, fn, "gnext");
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSGT, a[5], emit_ci(em->t_i64, 0), ""), tail, next);
  LLVMPositionBuilderAtEnd(b, tail);
  LLVMTypeRef vt = LLVMVectorType(em->t_f32, (unsigned)vw);
  LLVMValueRef rem = LLVMBuildTrunc(b, a[5], em->t_i32, "");
  LLVMValueRef remv = LLVMBuildShuffleVector(
      b, LLVMBuildInsertElement(b, LLVMGetPoison(LLVMTypeOf(a[6])), rem, LLVMConstInt(em->t_i32, 0, 0), ""),
      LLVMGetPoison(LLVMTypeOf(a[6])), LLVMConstNull(LLVMTypeOf(a[6])), "");
  LLVMValueRef mask = LLVMBuildICmp(b, LLVMIntULT, a[6], remv, "");
  LLVMValueRef py = emx_gep(em, a[2], j), acc = emx_masked(em, NULL, vt, py, mask);
  LLVMTypeRef bt = bf16 ? LLVMVectorType(em->t_i16, (unsigned)vw) : vt;
  for (int r = 0; r < rows; r++) {
    LLVMValueRef bv = emx_masked(em, NULL, bt, emx_gep_b(em, c[1 + r], j, bf16), mask);
    acc = emx_fma(em, c[1 + EMM_GEMV_ROWS + r], bf16 ? emx_widen_bf16(em, bv, vt) : bv, acc);
  }
  emx_masked(em, acc, vt, py, mask);
  LLVMBuildBr(b, next);
  LLVMPositionBuilderAtEnd(b, next);
}

void emm_emit_gemv(emit_module *em, const char *name, int vw, int R, bool bf16) {
  LLVMBuilderRef b = em->b;
  LLVMValueRef fn = emx_fn_begin(em, name, vw);
  LLVMValueRef K = LLVMGetParam(fn, 0), n = LLVMGetParam(fn, 5);
  LLVMValueRef rem = LLVMBuildSRem(b, n, emit_ci(em->t_i64, vw), "");
  LLVMValueRef lanes[16];
  for (int i = 0; i < vw; i++) lanes[i] = LLVMConstInt(em->t_i32, (unsigned long long)i, 0);
  LLVMValueRef a[7] = { LLVMGetParam(fn, 1), LLVMGetParam(fn, 2), LLVMGetParam(fn, 3), LLVMGetParam(fn, 4),
                        LLVMBuildSub(b, n, rem, ""), rem, LLVMConstVector(lanes, (unsigned)vw) };
  LLVMValueRef k = emx_step_loop(em, fn, emit_ci(em->t_i64, 0), K, R, emx_gemv_rows, a, bf16 << 16 | R << 8 | vw);
  if (R > 4) k = emx_step_loop(em, fn, k, K, 4, emx_gemv_rows, a, bf16 << 16 | 4 << 8 | vw);   /* a row alone reads slowly */
  emx_step_loop(em, fn, k, K, 1, emx_gemv_rows, a, bf16 << 16 | 1 << 8 | vw);
  LLVMBuildRetVoid(b);
}
#undef EMM_GEMV_ROWS

/* The gemv for a panel-order B (matmul_plan.h): gemvp(kc, x, b, y, pstride, npan) does,
   for panels q < npan of kc x nr floats (panel q at b + q * pstride, row-major),
   y[q*nr + j] = fma(x[kc-1], b_q[kc-1][j], ... fma(x[0], b_q[0][j], y[q*nr + j])):
   the fma chain of the plain gemv over one panel (same bits), G = EMM_PANEL_G panels at a
   time with their G * nr / vw accumulators in registers from the first row to the last.
   G panels are G sequential streams. A bf16 B (the plan's rhs_bf16) is widened as it is
   loaded (pstride still in elements). One panel at a time through the plain gemv (ldb =
   nr, y through L1 on every 8 rows) was slower (18-25 GB/s per matrix, GPT-2 124M decode
   on Zen 4). G = 1, one stream, reads fastest: the GPT-2 124M block matrices (kc = 384,
   nr = 48, 340 MB in 48 huge-page buffers, read in the decode step's order), G interleaved
   in one process, best of 15, Zen 4: 1 thread G = 1 31.6-35.1 GB/s, G = 2 28.3-31.3
   (this very kernel from the JIT, G = 1: 34.5 where a C copy of it read 35.1); 2 threads
   34.1-35.0 against 33.8-34.5 (on a host whose 2-thread bandwidth was then down to 35
   GB/s). bench_gpt2 decode at 1 thread went from 0.85 to 0.92-0.93 of the read bound
   (f32) and from 0.73 to 0.90 (bf16). Software prefetching (a line 1-8 KB ahead) made
   every G slower (G = 2: 19-22 GB/s). */
#define EMM_PANEL_G 1
static void emx_gemvp_group(emit_module *em, LLVMValueRef fn, LLVMValueRef *a, LLVMValueRef q, int arg) {
  LLVMBuilderRef b = em->b;
  int G = arg >> 8 & 255, vw = arg & 255, nv = arg >> 16 & 255;
  bool bf16 = arg >> 24;
  LLVMValueRef kc = a[0], x = a[1], pb = a[2], py = a[3], ps = a[4];
  LLVMTypeRef vt = LLVMVectorType(em->t_f32, (unsigned)vw);
  int64_t nr = (int64_t)nv * vw;
  int nacc = G * nv;
  LLVMValueRef acc0[EMM_MAX_ACC], acc[EMM_MAX_ACC], base[8], ypt[EMM_MAX_ACC];
  for (int g = 0; g < G; g++) {
    LLVMValueRef qg = LLVMBuildAdd(b, q, emit_ci(em->t_i64, g), "");
    base[g] = emx_gep_b(em, pb, LLVMBuildMul(b, qg, ps, ""), bf16);
    for (int v = 0; v < nv; v++) {
      ypt[g * nv + v] = emx_gep(em, py, LLVMBuildAdd(b, LLVMBuildMul(b, qg, emit_ci(em->t_i64, nr), ""),
                                                     emit_ci(em->t_i64, (int64_t)v * vw), ""));
      acc0[g * nv + v] = emx_load(em, vt, ypt[g * nv + v]);
    }
  }
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
  LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(em->llctx, fn, "kh");
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(em->llctx, fn, "kb");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(em->llctx, fn, "kx");
  LLVMBuildBr(b, head);
  LLVMPositionBuilderAtEnd(b, head);
  LLVMValueRef k = LLVMBuildPhi(b, em->t_i64, "k");
  for (int i = 0; i < nacc; i++) acc[i] = LLVMBuildPhi(b, vt, "acc");
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, k, kc, ""), body, done);
  LLVMPositionBuilderAtEnd(b, body);
  LLVMValueRef xs = emx_splat(em, emx_load(em, em->t_f32, emx_gep(em, x, k)), vw), nxt[EMM_MAX_ACC];
  LLVMValueRef row = LLVMBuildMul(b, k, emit_ci(em->t_i64, nr), "");
  for (int g = 0; g < G; g++)
    for (int v = 0; v < nv; v++) {
      LLVMValueRef off = LLVMBuildAdd(b, row, emit_ci(em->t_i64, (int64_t)v * vw), "");
      nxt[g * nv + v] = emx_fma(em, xs, emx_load_b(em, vt, emx_gep_b(em, base[g], off, bf16), bf16), acc[g * nv + v]);
    }
  LLVMValueRef k1 = LLVMBuildAdd(b, k, emit_ci(em->t_i64, 1), "");
  LLVMBasicBlockRef last = LLVMGetInsertBlock(b);
  LLVMBuildBr(b, head);
  LLVMAddIncoming(k, (LLVMValueRef[]){ emit_ci(em->t_i64, 0), k1 }, (LLVMBasicBlockRef[]){ pre, last }, 2);
  for (int i = 0; i < nacc; i++)
    LLVMAddIncoming(acc[i], (LLVMValueRef[]){ acc0[i], nxt[i] }, (LLVMBasicBlockRef[]){ pre, last }, 2);
  LLVMPositionBuilderAtEnd(b, done);
  for (int i = 0; i < nacc; i++) emx_store(em, acc[i], ypt[i]);
}

void emm_emit_gemvp(emit_module *em, const char *name, int vw, int nr, bool bf16) {
  LLVMValueRef fn = emx_fn_begin(em, name, vw);
  int nv = nr / vw, G = EMM_PANEL_G * nv <= 16 ? EMM_PANEL_G : 16 / nv;
  LLVMValueRef a[5] = { LLVMGetParam(fn, 0), LLVMGetParam(fn, 1), LLVMGetParam(fn, 2), LLVMGetParam(fn, 3),
                        LLVMGetParam(fn, 4) };
  LLVMValueRef npan = LLVMGetParam(fn, 5);
  int arg = bf16 << 24 | nv << 16 | vw;
  LLVMValueRef q = emx_step_loop(em, fn, emit_ci(em->t_i64, 0), npan, G, emx_gemvp_group, a, arg | G << 8);
  if (G > 1) emx_step_loop(em, fn, q, npan, 1, emx_gemvp_group, a, arg | 1 << 8);
  LLVMBuildRetVoid(em->b);
}

/* Horizontal sum of a <vw x float> by halves (a fixed tree). */
static LLVMValueRef emx_hsum(emit_module *em, LLVMValueRef v, int vw) {
  LLVMBuilderRef b = em->b;
  for (int w = vw / 2; w >= 1; w /= 2) {
    LLVMValueRef lo[16], hi[16];
    for (int i = 0; i < w; i++) {
      lo[i] = LLVMConstInt(em->t_i32, (unsigned long long)i, 0);
      hi[i] = LLVMConstInt(em->t_i32, (unsigned long long)(i + w), 0);
    }
    LLVMValueRef l, h;
    if (w == 1) {
      l = LLVMBuildExtractElement(b, v, lo[0], "");
      h = LLVMBuildExtractElement(b, v, hi[0], "");
    } else {
      l = LLVMBuildShuffleVector(b, v, LLVMGetPoison(LLVMTypeOf(v)), LLVMConstVector(lo, (unsigned)w), "");
      h = LLVMBuildShuffleVector(b, v, LLVMGetPoison(LLVMTypeOf(v)), LLVMConstVector(hi, (unsigned)w), "");
    }
    v = LLVMBuildFAdd(b, l, h, "");
  }
  return v;
}

/* y[j .. j+rows) for B transposed. Per row: two vector chains over k in steps of 2*vw
   (lanes k mod 2vw), their sum, one more chain step per remaining full vector, the tree
   sum, then the scalar tail in k order. Identical per row for any |rows|. arg = bf16 << 16
   | rows << 8 | vw. */
static void emx_gemvt_body(emit_module *em, LLVMValueRef fn, LLVMValueRef *a, LLVMValueRef j, int arg) {
  LLVMBuilderRef b = em->b;
  int rows = arg >> 8 & 255, vw = arg & 255;
  bool bf16 = arg >> 16;
  LLVMTypeRef vt = LLVMVectorType(em->t_f32, (unsigned)vw);
  LLVMValueRef K = a[0], x = a[1], pb = a[2], ldb = a[3], py = a[4];
  LLVMValueRef base[8];
  for (int r = 0; r < rows; r++)
    base[r] = LLVMBuildMul(b, LLVMBuildAdd(b, j, emit_ci(em->t_i64, r), ""), ldb, "");
  LLVMValueRef K2 = LLVMBuildMul(b, LLVMBuildSDiv(b, K, emit_ci(em->t_i64, 2 * vw), ""), emit_ci(em->t_i64, 2 * vw), "");
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
  LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(em->llctx, fn, "tk");
  LLVMBasicBlockRef out = LLVMAppendBasicBlockInContext(em->llctx, fn, "tout");
  LLVMValueRef zero = LLVMConstNull(vt);
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSGT, K2, emit_ci(em->t_i64, 0), ""), loop, out);
  LLVMPositionBuilderAtEnd(b, loop);
  LLVMValueRef k = LLVMBuildPhi(b, em->t_i64, ""), acc[16], nxt[16];
  for (int i = 0; i < 2 * rows; i++) acc[i] = LLVMBuildPhi(b, vt, "");
  for (int u = 0; u < 2; u++) {
    LLVMValueRef ku = LLVMBuildAdd(b, k, emit_ci(em->t_i64, u * vw), "");
    LLVMValueRef xv = emx_load(em, vt, emx_gep(em, x, ku));
    for (int r = 0; r < rows; r++) {
      LLVMValueRef bv = emx_load_b(em, vt, emx_gep_b(em, pb, LLVMBuildAdd(b, base[r], ku, ""), bf16), bf16);
      nxt[2 * r + u] = emx_fma(em, xv, bv, acc[2 * r + u]);
    }
  }
  LLVMValueRef k1 = LLVMBuildAdd(b, k, emit_ci(em->t_i64, 2 * vw), "");
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, k1, K2, ""), loop, out);
  LLVMAddIncoming(k, (LLVMValueRef[]){ emit_ci(em->t_i64, 0), k1 }, (LLVMBasicBlockRef[]){ pre, loop }, 2);
  for (int i = 0; i < 2 * rows; i++)
    LLVMAddIncoming(acc[i], (LLVMValueRef[]){ zero, nxt[i] }, (LLVMBasicBlockRef[]){ pre, loop }, 2);
  LLVMPositionBuilderAtEnd(b, out);
  LLVMValueRef s[8], f01[16];
  for (int i = 0; i < 2 * rows; i++) {
    f01[i] = LLVMBuildPhi(b, vt, "");
    LLVMAddIncoming(f01[i], (LLVMValueRef[]){ zero, nxt[i] }, (LLVMBasicBlockRef[]){ pre, loop }, 2);
  }
  for (int r = 0; r < rows; r++) s[r] = LLVMBuildFAdd(b, f01[2 * r], f01[2 * r + 1], "");
  /* one remaining full vector (K mod 2vw >= vw): a straight-line step */
  LLVMBasicBlockRef one = LLVMAppendBasicBlockInContext(em->llctx, fn, "t1");
  LLVMBasicBlockRef red = LLVMAppendBasicBlockInContext(em->llctx, fn, "tred");
  LLVMBasicBlockRef from = LLVMGetInsertBlock(b);
  LLVMValueRef has1 = LLVMBuildICmp(b, LLVMIntSLE, LLVMBuildAdd(b, K2, emit_ci(em->t_i64, vw), ""), K, "");
  LLVMBuildCondBr(b, has1, one, red);
  LLVMPositionBuilderAtEnd(b, one);
  LLVMValueRef s1[8];
  LLVMValueRef xv = emx_load(em, vt, emx_gep(em, x, K2));
  for (int r = 0; r < rows; r++)
    s1[r] = emx_fma(em, xv, emx_load_b(em, vt, emx_gep_b(em, pb, LLVMBuildAdd(b, base[r], K2, ""), bf16), bf16), s[r]);
  LLVMValueRef K2v = LLVMBuildAdd(b, K2, emit_ci(em->t_i64, vw), "");
  LLVMBuildBr(b, red);
  LLVMPositionBuilderAtEnd(b, red);
  LLVMValueRef kt = LLVMBuildPhi(b, em->t_i64, "");
  LLVMAddIncoming(kt, (LLVMValueRef[]){ K2, K2v }, (LLVMBasicBlockRef[]){ from, one }, 2);
  LLVMValueRef tot[8];
  for (int r = 0; r < rows; r++) {
    tot[r] = LLVMBuildPhi(b, vt, "");
    LLVMAddIncoming(tot[r], (LLVMValueRef[]){ s[r], s1[r] }, (LLVMBasicBlockRef[]){ from, one }, 2);
  }
  for (int r = 0; r < rows; r++) tot[r] = emx_hsum(em, tot[r], vw);
  /* scalar tail, k order */
  LLVMBasicBlockRef pre2 = LLVMGetInsertBlock(b);
  LLVMBasicBlockRef tl = LLVMAppendBasicBlockInContext(em->llctx, fn, "tt");
  LLVMBasicBlockRef fin = LLVMAppendBasicBlockInContext(em->llctx, fn, "tfin");
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, kt, K, ""), tl, fin);
  LLVMPositionBuilderAtEnd(b, tl);
  LLVMValueRef kk = LLVMBuildPhi(b, em->t_i64, ""), ph[8], nt[8];
  for (int r = 0; r < rows; r++) ph[r] = LLVMBuildPhi(b, em->t_f32, "");
  LLVMValueRef xs = emx_load(em, em->t_f32, emx_gep(em, x, kk));
  for (int r = 0; r < rows; r++)
    nt[r] = emx_fma(em, xs, emx_load_b(em, em->t_f32, emx_gep_b(em, pb, LLVMBuildAdd(b, base[r], kk, ""), bf16), bf16), ph[r]);
  LLVMValueRef kk1 = LLVMBuildAdd(b, kk, emit_ci(em->t_i64, 1), "");
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, kk1, K, ""), tl, fin);
  LLVMAddIncoming(kk, (LLVMValueRef[]){ kt, kk1 }, (LLVMBasicBlockRef[]){ pre2, tl }, 2);
  for (int r = 0; r < rows; r++)
    LLVMAddIncoming(ph[r], (LLVMValueRef[]){ tot[r], nt[r] }, (LLVMBasicBlockRef[]){ pre2, tl }, 2);
  LLVMPositionBuilderAtEnd(b, fin);
  LLVMValueRef f[8];
  for (int r = 0; r < rows; r++) {
    f[r] = LLVMBuildPhi(b, em->t_f32, "");
    LLVMAddIncoming(f[r], (LLVMValueRef[]){ tot[r], nt[r] }, (LLVMBasicBlockRef[]){ pre2, tl }, 2);
  }
  for (int r = 0; r < rows; r++)
    emx_store(em, f[r], emx_gep(em, py, LLVMBuildAdd(b, j, emit_ci(em->t_i64, r), "")));
}

void emm_emit_gemvt(emit_module *em, const char *name, int rows, int vw, bool bf16) {
  LLVMValueRef fn = emx_fn_begin(em, name, vw);
  LLVMValueRef a[5] = { LLVMGetParam(fn, 0), LLVMGetParam(fn, 1), LLVMGetParam(fn, 2),
                        LLVMGetParam(fn, 4), LLVMGetParam(fn, 3) };
  LLVMValueRef n = LLVMGetParam(fn, 5);
  LLVMValueRef j = emx_step_loop(em, fn, emit_ci(em->t_i64, 0), n, rows, emx_gemvt_body, a,
                                 bf16 << 16 | rows << 8 | vw);
  emx_step_loop(em, fn, j, n, 1, emx_gemvt_body, a, bf16 << 16 | 1 << 8 | vw);
  LLVMBuildRetVoid(em->b);
}

