/* all.c — the whole library as one translation unit, for the single-header build
   (`#define HLOJIT_IMPLEMENTATION` before `#include "hlojit.h"`). Every library file is
   listed here once, part by part; file-local (static) names carry a file prefix so that
   they do not collide in this one unit.

   With LLVM (the default) the unit contains the CPU backend: compile it with
   -std=gnu11 -I<dir of hlojit.h> -I$(llvm-config-19 --includedir) and link with
   $(llvm-config-19 --ldflags --libs) -lm -lpthread -ldl. With -DHLOJIT_NO_LLVM it
   contains the evaluator only (no LLVM headers or library needed; HJ_BACKEND_AUTO then
   runs modules on the reference evaluator). */

/* ir/ */
#include "ir/alias.c"
#include "ir/clone.c"
#include "ir/core.c"
#include "ir/edit.c"
#include "ir/element.c"
#include "ir/fingerprint.c"
#include "ir/inplace.c"
#include "ir/literal.c"
#include "ir/module.c"
#include "ir/opfacts.c"
#include "ir/shape.c"
#include "ir/shape_infer.c"
#include "ir/shape_infer_index.c"
#include "ir/shape_infer_reduce.c"
#include "ir/verify.c"

/* text/ */
#include "text/lex.c"
#include "text/parse.c"
#include "text/parse_attrs.c"
#include "text/parse_header.c"
#include "text/print.c"

/* eval/ */
#include "eval/eval.c"
#include "eval/eval_elem.c"
#include "eval/eval_gather.c"
#include "eval/eval_lapack.c"
#include "eval/eval_ops.c"
#include "eval/eval_reduce.c"
#include "eval/eval_sprog.c"
#include "eval/eval_window.c"

/* passes/ */
#include "passes/algsimp.c"
#include "passes/constant_fold.c"
#include "passes/conv_lower.c"
#include "passes/cse.c"
#include "passes/dce.c"
#include "passes/dot_canon.c"
#include "passes/dynamic_padder.c"
#include "passes/dynamic_padder_ops.c"
#include "passes/epilogue_fusion.c"
#include "passes/fusion.c"
#include "passes/fusion_split.c"
#include "passes/fusion_util.c"
#include "passes/inline_calls.c"
#include "passes/layout_norm.c"
#include "passes/pass.c"
#include "passes/pipeline.c"
#include "passes/sas_lower.c"
#include "passes/sort_lower.c"
#include "passes/schedule.c"
#include "passes/sibling_fusion.c"
#include "passes/tuple_simplify.c"
#include "passes/use_index.c"
#include "passes/wrap_fusions.c"

/* runtime/ (the compile driver needs LLVM) */
#include "runtime/buffer_assign.c"
#include "runtime/disk_cache.c"
#include "runtime/pass_hooks.c"
#include "runtime/profile.c"
#include "runtime/thunks.c"

/* api/ */
#include "api/api.c"
#include "api/buffer.c"
#include "api/builder.c"
#include "api/builder_conv.c"
#include "api/builder_linalg.c"
#include "api/builder_ops.c"
#include "api/control.c"
#include "api/composites.c"
#include "api/exec.c"
#include "api/exec_io.c"
#include "api/exec_profile.c"
#include "api/graph_io.c"
#include "api/graph_module.c"
#include "api/npy.c"
#include "api/optimize.c"

/* jit/ */
#include "jit/jit.c"
#include "jit/jit_run.c"
#include "jit/jit_trace.c"

/* backends */
#include "../backends/backends.c"
#include "../backends/interp/interp_backend.c"

#ifndef HLOJIT_NO_LLVM
#include "runtime/compile.c"
#include "runtime/code_key.c"
#include "emitters/classify.c"
#include "emitters/dus.c"
#include "emitters/elemental.c"
#include "emitters/elemental_index.c"
#include "emitters/elemental_window.c"
#include "emitters/emit_core.c"
#include "emitters/emit_math.c"
#include "emitters/emitter.c"
#include "emitters/gpu_dus.c"
#include "emitters/gpu_emitter.c"
#include "emitters/gpu_kernel.c"
#include "emitters/gpu_loop.c"
#include "emitters/gpu_matmul.c"
#include "emitters/gpu_mm_skinny.c"
#include "emitters/gpu_mm_tiled.c"
#include "emitters/gpu_reduction.c"
#include "emitters/gpu_scatter.c"
#include "emitters/gpu_sort.c"
#include "emitters/gpu_transpose.c"
#include "emitters/loop.c"
#include "emitters/matmul.c"
#include "emitters/matmul_gemv.c"
#include "emitters/reduction.c"
#include "emitters/reduction_analyse.c"
#include "emitters/scatter.c"
#include "emitters/sort.c"
#include "emitters/transpose.c"
#include "../backends/cpu/cpu_backend.c"
#include "../backends/cpu/cpu_code_cache.c"
#include "../backends/cpu/cpu_jit.c"
#include "../backends/cpu/cpu_matmul.c"
#include "../backends/cpu/threadpool.c"
#include "../backends/cuda/cuda_backend.c"
#include "../backends/cuda/cuda_code_cache.c"
#include "../backends/cuda/cuda_codegen.c"
#include "../backends/cuda/cuda_device.c"
#include "../backends/cuda/cuda_driver.c"
#include "../backends/cuda/cuda_gemm.c"
#include "../backends/cuda/cuda_mem.c"
#include "../backends/cuda/cuda_ptxas.c"
#include "../backends/cuda/cuda_run.c"
#endif
