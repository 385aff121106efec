/* passes/pipeline.c — the HLO pass pipeline as one flat list (DESIGN.md section 4).

   Every pass runs through hlo_pass_run (verifier in debug builds, a dump per pass under
   HLOJIT_DUMP_TO). Order matters where the comments say so.

   Backends add their own steps around it, named in their rt_target (the CPU and CUDA
   backends: convolutions lowered to im2col + dot, select-and-scatter to a pick and a scatter
   pass, topk to a sort and every sort to a stable one, rng-bit-generator to arithmetic, and dot canonicalisation before; fusion splitting and single-op wrapping of what
   fusion left after); hlo_pass_find turns such a name into its pass. */
#include "passes.h"

/* Every pass by the name its dumps and timings carry. */
static const struct { const char *name; hlo_pass_fn fn; } pip_passes[] = {
  { "inline-calls", hlo_pass_inline_calls },
  { "dynamic-padder", hlo_pass_dynamic_padder },
  { "dynamic-pad", hlo_pass_dynamic_pad },
  { "tuple-simplify", hlo_pass_tuple_simplify },
  { "algsimp", hlo_pass_algsimp },
  { "constant-fold", hlo_pass_constant_fold },
  { "cse", hlo_pass_cse },
  { "dce", hlo_pass_dce },
  { "layout-norm", hlo_pass_layout_norm },
  { "conv-lower", hlo_pass_conv_lower },
  { "select-and-scatter-lower", hlo_pass_sas_lower },
  { "sort-lower", hlo_pass_sort_lower },
  { "rng-lower", hlo_pass_rng_lower },
  { "dot-canonicalize", hlo_pass_dot_canon },
  { "fusion", hlo_pass_fusion },
  { "sibling-fusion", hlo_pass_sibling_fusion },
  { "matmul-epilogue-fusion", hlo_pass_matmul_epilogue_fusion },
  { "fusion-split", hlo_pass_fusion_split },
  { "wrap-fusions", hlo_pass_wrap_fusions },
  { "schedule", hlo_pass_schedule },
};

hlo_pass_fn hlo_pass_find(const char *name) {
  for (size_t i = 0; name && i < sizeof pip_passes / sizeof pip_passes[0]; i++)
    if (!strcmp(pip_passes[i].name, name)) return pip_passes[i].fn;
  return NULL;
}

void hlo_pipeline_options_init(hlo_pipeline_options *o) {
  memset(o, 0, sizeof *o);
  o->fusion = true;
  o->layout_norm = true;
  o->max_simplify_rounds = 8;
}

#define PIP_RUN(name, fn, chp)                                                              \
  do {                                                                                      \
    hj_status st_ = hlo_pass_run(pc, name, fn, m, chp);                                     \
    if (st_ != HJ_OK) return st_;                                                           \
  } while (0)

/* algsimp, constant folding, CSE, DCE until nothing changes (each can expose work for the
   others: folding makes constants algsimp matches, algsimp makes duplicates CSE merges). */
static hj_status pip_simplify(hlo_pass_ctx *pc, hlo_module *m, int rounds) {
  for (int r = 0; r < rounds; r++) {
    bool any = false, ch = false;
    PIP_RUN("tuple-simplify", hlo_pass_tuple_simplify, &ch);
    any |= ch;
    PIP_RUN("algsimp", hlo_pass_algsimp, &ch);
    any |= ch;
    PIP_RUN("constant-fold", hlo_pass_constant_fold, &ch);
    any |= ch;
    PIP_RUN("cse", hlo_pass_cse, &ch);
    any |= ch;
    PIP_RUN("dce", hlo_pass_dce, &ch);
    any |= ch;
    if (!any) break;
  }
  return HJ_OK;
}

hj_status hlo_run_pipeline(hlo_pass_ctx *pc, hlo_module *m, const hlo_pipeline_options *opt) {
  hlo_pipeline_options defaults;
  if (!opt) {
    hlo_pipeline_options_init(&defaults);
    opt = &defaults;
  }
  hj_status st = hlo_pass_dump(pc, "input", m);
  if (st != HJ_OK) return st;
  bool ch = false;
  /* First: every later pass sees one flat computation instead of call boundaries. */
  PIP_RUN("inline-calls", hlo_pass_inline_calls, &ch);
  /* Before simplification: a module compiled on its own runs at its bounds, so each
     get-dimension-size becomes its bound (the tracing JIT pads and passes the real sizes
     before the pipeline, with hlo_pass_dynamic_pad: none is left then). */
  PIP_RUN("dynamic-padder", hlo_pass_dynamic_padder, &ch);
  /* tuple simplification, algsimp, constant folding, CSE, DCE to a fixed point. */
  st = pip_simplify(pc, m, opt->max_simplify_rounds);
  if (st != HJ_OK) return st;
  /* Layout normalisation after simplification (fewer copies left to rewrite), and
     simplification again: the transposes it makes compose with their neighbours. */
  if (opt->layout_norm) {
    PIP_RUN("layout-norm", hlo_pass_layout_norm, &ch);
    if (ch && (st = pip_simplify(pc, m, opt->max_simplify_rounds)) != HJ_OK) return st;
  }
  if (opt->fusion) {
    /* Producer-consumer fusion first: sibling fusion merges the fusions it made. */
    PIP_RUN("fusion", hlo_pass_fusion, &ch);
    PIP_RUN("sibling-fusion", hlo_pass_sibling_fusion, &ch);
    /* Last: bias/scale/GELU/residual epilogues join the dot fusions made above. */
    PIP_RUN("matmul-epilogue-fusion", hlo_pass_matmul_epilogue_fusion, &ch);
    /* Fusion duplicates cheap producers into several consumers: merge and sweep. */
    PIP_RUN("cse", hlo_pass_cse, &ch);
    PIP_RUN("dce", hlo_pass_dce, &ch);
  }
  /* Last: an order minimising peak live bytes, which buffer assignment then follows. */
  PIP_RUN("schedule", hlo_pass_schedule, &ch);
  return HJ_OK;
}

#undef PIP_RUN
