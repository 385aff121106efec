/* passes/passes.h — the HLO-to-HLO passes (DESIGN.md section 4): one pass per file, one
   entry point each, and pipeline.c, the flat list. Stands on the IR only: the evaluator
   (constant folding) and the printer (dumps) are reached through hooks in hlo_pass_ctx. */
#ifndef HLOJIT_PASSES_H
#define HLOJIT_PASSES_H

#include "../ir/ir.h"

/* ---- passes/pass.c, passes/pipeline.c --------------------------------------------------------
   The pass framework (DESIGN.md section 4). Every pass, the pipeline's and the backends'
   alike, is
     hj_status hlo_pass_NAME(hlo_pass_ctx *pc, hlo_module *m, bool *changed);
   it edits |m| in place, sets *changed (when not NULL), and leaves a module that verifies.
   |pc| may be NULL for a pass that reads nothing from it: all but constant folding (the
   eval hook), dot canonicalisation (matmul_panel_nr) and the dynamic pad (dyn_info).
   hlo_pass_ctx_init: |dump_dir| from ctx->opt.dump_dir, else $HLOJIT_DUMP_TO, else NULL
   (no dumps); verify_each false (debug builds verify after every pass anyway); no hooks.
   hlo_pass_run: runs |fn|; then verifies the module (#ifndef NDEBUG when the pass says it
   changed it, always with verify_each; a failure names the pass) and, with a dump dir, writes DUMP_DIR/NNN.NAME.txt (HLO text,
   NNN = ++dump_seq, written whether or not the pass changed anything).
   hlo_pass_dump: writes one such file (the pipeline dumps "input" first).
   hlo_run_pipeline: the whole list (pipeline.c); |opt| NULL: defaults.
   hlo_pass_find: the pass named |name| ("fusion-split": the names of the dumps and the
   timings), NULL for none; backends name the passes they add around the pipeline. */
typedef struct pass_dyn_info pass_dyn_info;
typedef struct hlo_pass_ctx {
  hj_ctx_t *ctx;
  const char *dump_dir;     /* NULL: no dumps */
  int dump_seq;             /* number of the last dump file */
  bool verify_each;         /* verify after every pass in release builds too */
  /* Hooks given by whoever runs the passes (runtime/compile.c's rt_pass_ctx_init), so that
     passes know neither the evaluator nor the printer. |eval|: evaluates a computation
     (constant folding; NULL: nothing is folded). |print|: a module as HLO text (dumps;
     NULL: no dump files). */
  hj_status (*eval)(hj_ctx_t *ctx, const hlo_comp *c, hlo_literal *const *args, int nargs,
                    hlo_literal **out);
  hj_status (*print)(const hlo_module *m, char **out);
  /* With |time_passes| set (off by hlo_pass_ctx_init): the time spent in each pass (by
     name, summed over its runs; the verification after each pass is its own entry,
     "verify-after-each-pass"), in first-run order; stb_ds
     array filled by hlo_pass_run, freed with hlo_pass_ctx_free. */
  bool time_passes;
  hj_pass_time_t *times;
  int matmul_panel_nr;      /* dot_canon: the target's emit_target.matmul_panel_nr (0: none) */
  pass_dyn_info *dyn_info;  /* dynamic_pad: where it says what it padded (required there) */
} hlo_pass_ctx;
typedef hj_status (*hlo_pass_fn)(hlo_pass_ctx *pc, hlo_module *m, bool *changed);
typedef struct hlo_pipeline_options {
  bool fusion;              /* run the fusion passes; default true */
  bool layout_norm;         /* default true */
  int max_simplify_rounds;  /* algsimp/fold/CSE/DCE repeated until no change; default 8 */
} hlo_pipeline_options;
void hlo_pass_ctx_init(hlo_pass_ctx *pc, hj_ctx_t *ctx);
void hlo_pass_ctx_free(hlo_pass_ctx *pc);   /* the times; the rest is borrowed */
hj_status hlo_pass_run(hlo_pass_ctx *pc, const char *name, hlo_pass_fn fn, hlo_module *m,
                       bool *changed);
hj_status hlo_pass_dump(hlo_pass_ctx *pc, const char *name, const hlo_module *m);
void hlo_pipeline_options_init(hlo_pipeline_options *o);
hj_status hlo_run_pipeline(hlo_pass_ctx *pc, hlo_module *m, const hlo_pipeline_options *opt);
hlo_pass_fn hlo_pass_find(const char *name);
/* passes/inline_calls.c: every `call` replaced by a copy of its callee's body (repeated
   until no call is left); computations no longer called are removed. */
hj_status hlo_pass_inline_calls(hlo_pass_ctx *pc, hlo_module *m, bool *changed);
/* passes/wrap_fusions.c: in the entry and in while/conditional computations reachable
   from it, every instruction that is not parameter, constant, tuple, get-tuple-element,
   reshape, bitcast with default layouts, fusion, while, conditional or opt-barrier becomes
   a single-op fusion "wrapped_NAME" (kInput for reduce, kOutput for dot, else kLoop)
   calling a new computation "wrapped_NAME_computation" placed before its user in m->comps
   (an operand used twice is passed once). Idempotent. */
hj_status hlo_pass_wrap_fusions(hlo_pass_ctx *pc, hlo_module *m, bool *changed);
/* passes/dce.c: drops instructions nobody uses (parameters and roots stay) and
   computations unreachable from the entry. */
hj_status hlo_pass_dce(hlo_pass_ctx *pc, hlo_module *m, bool *changed);
/* passes/dce.c: only the sweep of unreachable computations; true when any was removed. */
bool hlo_dce_comps(hlo_module *m);

/* The simplification passes (one file each under passes/; see each file's comment). */
hj_status hlo_pass_tuple_simplify(hlo_pass_ctx *pc, hlo_module *m, bool *changed);
hj_status hlo_pass_algsimp(hlo_pass_ctx *pc, hlo_module *m, bool *changed);
hj_status hlo_pass_constant_fold(hlo_pass_ctx *pc, hlo_module *m, bool *changed);
hj_status hlo_pass_cse(hlo_pass_ctx *pc, hlo_module *m, bool *changed);
hj_status hlo_pass_layout_norm(hlo_pass_ctx *pc, hlo_module *m, bool *changed);
/* The fusion passes (passes/fusion.c, sibling_fusion.c, epilogue_fusion.c). */
hj_status hlo_pass_fusion(hlo_pass_ctx *pc, hlo_module *m, bool *changed);
hj_status hlo_pass_sibling_fusion(hlo_pass_ctx *pc, hlo_module *m, bool *changed);
hj_status hlo_pass_matmul_epilogue_fusion(hlo_pass_ctx *pc, hlo_module *m, bool *changed);

/* ---- passes/fusion.c, fusion_util.c, sibling_fusion.c, epilogue_fusion.c, schedule.c -------
   hlo_count_kernels (fusion.c): instructions of the entry that run as a kernel: fusions
   and every other instruction except parameter, constant, tuple, get-tuple-element,
   bitcast and reshape (the runtime aliases those).
   fusion_util.c, the surgery shared by the fusion passes:
   hlo_transpose_is_real: a transpose that moves
   data (not only size-1 dims). hlo_fusion_hero: the dot, else the first reduce, else the
   first real transpose of a fused computation (NULL: none). hlo_fusion_relabel: kind from
   the hero (dot kOutput, reduce kInput, else kLoop). hlo_shape_total_bytes: bytes of all
   array leaves. hlo_fusion_make: replaces |ins| of |c| by a one-instruction fusion (in
   its place, uses redirected; its fused computation goes before |c| in m->comps); NULL
   (error set) on OOM. hlo_fusion_absorb: clones |producer| (plain, or a fusion with an
   array root) into |fusion| in place of the parameter(s) that stood for it; the
   producer's operands become operands of the fusion (distinct); |dup|: give the clones
   fresh names (the producer stays in use elsewhere); the producer itself stays in |c|.
   schedule.c: hlo_pass_schedule reorders the entry and the while/conditional
   computations reached from it (a topological order) to lower peak live bytes: a greedy
   list scheduler that runs the ready instruction freeing the most bytes. With a dump dir
   it writes DUMP_DIR/schedule.txt (bytes before/after per computation).
   hlo_schedule_comp: the same for one computation; *before / *after (may be NULL): peak
   bytes (hlo_peak_live_bytes) before and after.
   hlo_peak_live_bytes: arena bytes for the intermediate values of |c| in its text order:
   one buffer per value-producing instruction (not parameters, constants, root outputs or
   aliases: reshape, default-layout bitcast, tuple, get-tuple-element, opt-barrier),
   live from its instruction to its last (alias-followed) use, placed first-fit, 64-byte
   aligned. hlo_unshared_bytes: the same buffers' sum without reuse (one buffer per
   instruction). */
int hlo_count_kernels(const hlo_module *m);
bool hlo_transpose_is_real(const hlo_instr *t);
const hlo_instr *hlo_fusion_hero(const hlo_comp *fc);
void hlo_fusion_relabel(hlo_instr *fusion);
int64_t hlo_shape_total_bytes(const hlo_shape *s);
struct hlo_uidx;
/* |ux| (may be NULL): the pass's use index, kept up to date (positions, uses, |ins|
   killed); then the fused computation stays last in m->comps for
   hlo_fusion_run_control_comps to place (without: placed before |c| at once). */
hlo_instr *hlo_fusion_make(hlo_comp *c, hlo_instr *ins, struct hlo_uidx *ux);
/* Does |x| read a dot (or a dot fusion) that nothing else in |c| reads? epilogue_fusion.c
   may still give |x| to that dot, so the other fusion passes leave it alone. |ux| (may be
   NULL) counts the users. */
bool hlo_reads_lone_dot(const hlo_comp *c, const hlo_instr *x, struct hlo_uidx *ux);
/* Moves |nc|, the computation appended last to m->comps, to just before |before| (callees
   first); it stays last when |before| is not in m->comps. */
void hlo_module_insert_comp_before(hlo_module *m, hlo_comp *nc, const hlo_comp *before);
/* The entry and the while/conditional computations reached from it (stb_ds array). */
void hlo_control_comps(hlo_comp *entry, hlo_comp ***out);
/* A fusion pass's driver: |fn|(comp, &any) on each of hlo_control_comps(m->entry) until one
   fails (the computations appended to m->comps meanwhile move to just before comp); then,
   when any changed, hlo_module_prune_comps; *changed (may be NULL) = any. */
typedef hj_status (*hlo_comp_pass_fn)(hlo_comp *c, bool *changed);
hj_status hlo_fusion_run_control_comps(hlo_module *m, hlo_comp_pass_fn fn, bool *changed);
hj_status hlo_fusion_absorb(hlo_comp *c, hlo_instr *fusion, hlo_instr *producer, bool dup,
                            struct hlo_uidx *ux);
hj_status hlo_pass_schedule(hlo_pass_ctx *pc, hlo_module *m, bool *changed);
hj_status hlo_schedule_comp(hlo_comp *c, int64_t *before, int64_t *after);
int64_t hlo_peak_live_bytes(const hlo_comp *c);
int64_t hlo_unshared_bytes(const hlo_comp *c);

/* ---- passes/dot_canon.c ------------------------------------------------------------------
   Rewrites every dot of every computation into the matmul emitter's form: lhs [B,M,K] or
   [M,K] (contracting = last), rhs [B,K,N]/[K,N] or, when that avoids a physical transpose,
   [B,N,K]/[N,K]; batch dims {0} or none; transposes/reshapes around it, and a reshape of the
   [B,M,N] result back to the dot's shape. A dot whose rhs is in panel order (lhs
   [M,P,kc], rhs [P,Q,kc,nr], contracting {1,2} x {0,2}) stays as it is when |panel_nr| is
   its nr (the emitter reads it in place), else it becomes a plain one; |panel_nr| is
   pc->matmul_panel_nr (0 when |pc| is NULL). *changed: some dot was rewritten. */
hj_status hlo_pass_dot_canon(hlo_pass_ctx *pc, hlo_module *m, bool *changed);

/* ---- passes/conv_lower.c -----------------------------------------------------------------
   Rewrites each ungrouped f32/bf16/f16 convolution with at least 16 multiply-adds per output
   into transposes, a pad, the slices of its patch matrix (one per tap, or one per output
   position when those are fewer; at most 64), a concatenate and one canonical [M,K]x[K,N]
   dot in f32; the others stay convolutions (elemental kernels). Runs before
   dot-canonicalize (the CPU and CUDA backends' first step). *changed: some were. */
hj_status hlo_pass_conv_lower(hlo_pass_ctx *pc, hlo_module *m, bool *changed);

/* ---- passes/sas_lower.c ------------------------------------------------------------------
   Rewrites each select-and-scatter without dilations (N < 2^31 elements, at most 64 taps)
   into a variadic reduce-window that finds each window's pick (the select computation
   cloned into its reducer) and one elementwise pass over the operand's elements that
   scatters the source values of the windows that picked them, tap by tap, in XLA's order.
   *changed: some were. */
hj_status hlo_pass_sas_lower(hlo_pass_ctx *pc, hlo_module *m, bool *changed);

/* ---- passes/sort_lower.c -----------------------------------------------------------------
   topk becomes a stable sort of (x, iota) and two slices; every sort's comparator breaks
   ties by position (an iota operand, appended when there is none), so the sort kernels'
   in-place networks give the evaluator's stable order. *changed: some sort or topk was
   rewritten. */
hj_status hlo_pass_sort_lower(hlo_pass_ctx *pc, hlo_module *m, bool *changed);

/* ---- passes/rng_lower.c ------------------------------------------------------------------
   rng-bit-generator as integer arithmetic over iotas (three-fry or philox per element,
   eval/eval_rng.c's bits) and the advanced state: one fusible elementwise computation.
   *changed: some was rewritten. */
hj_status hlo_pass_rng_lower(hlo_pass_ctx *pc, hlo_module *m, bool *changed);

/* ---- passes/fusion_split.c ---------------------------------------------------------------
   The computation partitioner: a fused instruction that the elemental emitter would
   evaluate at more than 8 distinct index tuples (64 for index maps only) is materialised
   by a fusion of its own placed before its consumer (chains of slices/broadcast diamonds
   otherwise emit exponentially). Run by the CPU backend after the pipeline. Exact.
   hlo_fusion_index_tuples: the most distinct index tuples at which the emitter evaluates
   one non-leaf instruction of fused computation |fc| (capped at 65); for tests. */
hj_status hlo_pass_fusion_split(hlo_pass_ctx *pc, hlo_module *m, bool *changed);
int hlo_fusion_index_tuples(const hlo_comp *fc);

/* ---- passes/dynamic_padder.c, dynamic_padder_ops.c ---------------------------------------
   Bounded dynamic dims (`<=N`, XLA's DynamicPadder, our rules). Two modes:
   hlo_pass_dynamic_padder (the pipeline's line): every get-dimension-size becomes the bound
     it reads (a module compiled on its own runs at its bounds); nothing else changes.
   hlo_pass_dynamic_pad (the tracing JIT, before compiling; what it did goes to
     *pc->dyn_info, which it requires): every array is padded to its bound,
     and the real size of each dynamic dim of an entry parameter becomes a new s32[]
     parameter (appended, in order); every op that crosses a padded dim is masked or
     corrected (reductions, dot contractions, reduce-window, concatenate, pad, reverse,
     slices, dynamic-(update-)slice starts, gather indices), get-dimension-size becomes the
     real size, and the real sizes of the outputs' dynamic dims that are not a size
     parameter are appended to the root tuple as s32[] outputs. The result is static.
     Contract: the caller passes parameters zero-padded (padded lanes hold zeros: masks
     that only restore zeros are skipped there). Ops the rules do not cover on a dynamic dim
     (scatter, sort along it, while/conditional state, merging reshapes, ...) are
     HJ_ERR_UNSUPPORTED with the op named; |m| is then unusable (the JIT retraces at exact
     sizes). Calls are inlined first. */
typedef struct pass_dyn_param {   /* a dynamic dim of an entry parameter */
  int param, dim;                 /* original parameter number, dim */
  int size_param;                 /* the s32[] parameter holding its real size */
} pass_dyn_param;
typedef struct pass_dyn_out {     /* where the real size of an output dim is */
  int output, dim;                /* original flattened output leaf, dim */
  int size_param;                 /* >= 0: it equals this size parameter */
  int size_output;                /* >= 0: the s32[] output leaf holding it */
} pass_dyn_out;
struct pass_dyn_info {
  int nparams, noutputs;          /* before padding (flattened output leaves) */
  pass_dyn_param *params;         /* stb_ds */
  pass_dyn_out *outs;             /* stb_ds: only dynamic output dims */
  int nsize_outputs;              /* s32[] outputs appended after the noutputs leaves */
  int masks;                      /* selects inserted (statistics) */
};
hj_status hlo_pass_dynamic_padder(hlo_pass_ctx *pc, hlo_module *m, bool *changed);
hj_status hlo_pass_dynamic_pad(hlo_pass_ctx *pc, hlo_module *m, bool *changed);
void pass_dyn_info_free(pass_dyn_info *info);

/* ---- passes/use_index.c: users kept up to date while a pass edits one computation --------
   hlo_uidx_build: the users of every instruction of |c| and their positions in c->instrs.
   A pass records each new use (hlo_uidx_add: |user| now reads |x|; hlo_uidx_add_operands:
   all operands of a new instruction) and each instruction it takes out (hlo_uidx_kill);
   stale entries (dead users, users that stopped reading x, repeats) are dropped when read.
   hlo_uidx_users: the live distinct users of |x| (an array owned by the index, valid until
   the next call that records a use of |x|); hlo_uidx_count: their number.
   hlo_uidx_replace_all_uses: hlo_replace_all_uses through the index (the root too).
   hlo_uidx_pos / set_pos: the position recorded for |x| (-1: none). hlo_uidx_compact: drops
   the killed instructions from c->instrs and renumbers the positions. The add functions
   return false on OOM. */
typedef struct hlo_uidx {
  hlo_comp *c;
  hlo_instr ***users;       /* per id: stb_ds array */
  int *pos;                 /* per id: index in c->instrs, -1 */
  uint8_t *dead;            /* per id */
  uint32_t *stamp, cur;     /* per id: dedup marks */
  int cap;                  /* ids covered */
} hlo_uidx;
hj_status hlo_uidx_build(hlo_uidx *u, hlo_comp *c);
void hlo_uidx_free(hlo_uidx *u);
bool hlo_uidx_add(hlo_uidx *u, hlo_instr *x, hlo_instr *user);
bool hlo_uidx_add_operands(hlo_uidx *u, hlo_instr *user);
void hlo_uidx_kill(hlo_uidx *u, const hlo_instr *x);
bool hlo_uidx_dead(const hlo_uidx *u, const hlo_instr *x);
int hlo_uidx_users(hlo_uidx *u, const hlo_instr *x, hlo_instr ***out);
int hlo_uidx_count(hlo_uidx *u, const hlo_instr *x);
bool hlo_uidx_replace_all_uses(hlo_uidx *u, hlo_instr *old, hlo_instr *neu);
void hlo_uidx_set_pos(hlo_uidx *u, const hlo_instr *x, int pos);
int hlo_uidx_pos(const hlo_uidx *u, const hlo_instr *x);
void hlo_uidx_compact(hlo_uidx *u);
/* Forwarding for passes that walk one computation in text order replacing instructions:
   hlo_fwd_set records old -> neu (false on OOM); hlo_fwd_apply makes the operands of |ins|
   read through the records (true if any changed; neu itself is never made to read
   itself); hlo_fwd_root does the same for the root; |changed| says whether either changed
   anything. Zero-initialise, free with hlo_fwd_free. */
typedef struct hlo_fwd {
  hlo_instr **rep;          /* per id: the replacement, NULL none */
  int cap;
  bool changed;
} hlo_fwd;
bool hlo_fwd_set(hlo_fwd *f, const hlo_instr *old, hlo_instr *neu);
hlo_instr *hlo_fwd_get(const hlo_fwd *f, hlo_instr *x);
bool hlo_fwd_apply(hlo_fwd *f, hlo_instr *ins);
bool hlo_fwd_root(hlo_fwd *f, hlo_comp *c);
void hlo_fwd_free(hlo_fwd *f);

#endif /* HLOJIT_PASSES_H */
