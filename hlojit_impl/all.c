/* all.c — the whole library as one translation unit, for the single-header build
   (`#define HLOJIT_IMPLEMENTATION` before `#include "hlojit.h"`). Every file of
   hlojit_impl/ is listed here once; file-local (static) names carry a file prefix so that
   they do not collide in this one unit. */
#include "core.c"
#include "literal.c"
#include "shape_infer.c"
#include "shape_infer_index.c"
#include "verify.c"
#include "hlo_print.c"
#include "hlo_lex.c"
#include "hlo_parse.c"
#include "hlo_parse_attrs.c"
#include "eval.c"
#include "eval_elem.c"
#include "eval_ops.c"
#include "eval_gather.c"
#include "eval_reduce.c"
#include "npy.c"
#include "api.c"
#include "builder.c"
#include "builder_ops.c"
#include "composites.c"
